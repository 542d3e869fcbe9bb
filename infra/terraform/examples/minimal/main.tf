# loopbreaker for one GKE cluster's project: sinks on that project, Slack approvals, and
# remediation in dry run (it records the calls it would make, nothing more) until
# dry_run = false.
#
#   terraform init
#   terraform apply -var project_id=my-training-project -var region=us-central1
#
# then add the three secret values (module README, "Secret values") and point the Slack
# app's interactivity URL at the chat_action_uri output.

terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 5.40, < 7"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4, < 3"
    }
  }
}

variable "project_id" {
  type        = string
  description = "Project of the GKE cluster and of loopbreaker."
}

variable "region" {
  type        = string
  description = "Region of the cluster and of the functions."
  default     = "us-central1"
}

provider "google" {
  project = var.project_id
  region  = var.region
}

module "loopbreaker" {
  source = "../.."

  project_id = var.project_id
  region     = var.region

  # The cluster's GPU pool only; the system pool is never touched.
  node_pools = ["a3-highgpu-8g"]

  notifier      = "slack"
  slack_channel = "C0123456789"
  approvers     = ["U0123456789"]

  # Keep in dry run until a planned remediation has been read and found right.
  dry_run = true
}

output "chat_action_uri" {
  description = "Slack interactivity request URL."
  value       = module.loopbreaker.chat_action_uri
}

output "secret_ids" {
  description = "Secrets to add versions to."
  value       = module.loopbreaker.secret_ids
}
