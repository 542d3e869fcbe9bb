# loopbreaker for one GKE cluster's project: sinks on that project narrowed to the
# training cluster, Slack approvals, and remediation in dry run (it records the calls it
# would make, nothing more) until dry_run = false. One apply, no step after it:
#
#   1. Create the Slack app from deploy/slack/manifest.yaml (deploy/slack/README.md),
#      install it (it gives the bot token and the signing secret) and /invite it to the
#      channel.
#   2. export TF_VAR_slack_bot_token=xoxb-...
#      export TF_VAR_slack_signing_secret=...
#      export TF_VAR_action_signing_key="$(openssl rand -base64 32)"
#      export TF_VAR_alert_webhook_token="$(openssl rand -hex 32)"  # kube-prometheus-stack
#   3. terraform init
#      terraform apply -var project_id=my-training-project -var cluster=train-a \
#        -var slack_channel=C0123456789 -var 'approvers=["U0123456789"]' \
#        -var 'node_pools=["a3-gpu-pool"]'
#
# The README's module block (README.md, "Deploy it") sets the same inputs; a test
# (tests/deploy/test_docs_deploy.py) keeps the two in step.

terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.1, < 9"
    }
    google-beta = {
      source  = "hashicorp/google-beta"
      version = ">= 6.1, < 9"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4.1, < 3"
    }
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9.1, < 1"
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

variable "cluster" {
  type        = string
  description = "The training cluster whose entries the sinks take."
}

variable "slack_channel" {
  type        = string
  description = "Slack channel id (C...) incident messages go to; the app must be invited there."
}

variable "approvers" {
  type        = list(string)
  description = "Slack user ids (U...) who may approve a remediation."
}

variable "node_pools" {
  type        = list(string)
  description = "Names of the GPU node pools remediation may touch (gcloud container node-pools list), not machine types."
}

variable "enable_alertmanager_webhook" {
  type        = bool
  description = "Deploy on_alertmanager_webhook for alerts from kube-prometheus-stack (docs/prometheus.md); false needs no alert_webhook_token."
  default     = true
}

variable "alert_webhook_token" {
  type        = string
  description = "Bearer token Alertmanager sends to on_alertmanager_webhook: openssl rand -hex 32."
  default     = null
  sensitive   = true
}

variable "slack_bot_token" {
  type        = string
  description = "The Slack app's bot token (xoxb-...)."
  sensitive   = true
}

variable "slack_signing_secret" {
  type        = string
  description = "The Slack app's signing secret (Basic Information > App Credentials)."
  sensitive   = true
}

variable "action_signing_key" {
  type        = string
  description = "HMAC key of the approval buttons: openssl rand -base64 32."
  sensitive   = true
}

provider "google" {
  project = var.project_id
  region  = var.region
}

provider "google-beta" {
  project = var.project_id
  region  = var.region
}

module "loopbreaker" {
  source = "../.."

  project_id = var.project_id
  region     = var.region
  clusters   = [var.cluster]

  # The cluster's GPU node pools by name; the system pool is never touched.
  node_pools = var.node_pools

  notifier             = "slack"
  slack_channel        = var.slack_channel
  approvers            = var.approvers
  slack_bot_token      = var.slack_bot_token
  slack_signing_secret = var.slack_signing_secret
  action_signing_key   = var.action_signing_key

  # Alerts from kube-prometheus-stack (docs/prometheus.md); the token is the webhook Secret's.
  enable_alertmanager_webhook = var.enable_alertmanager_webhook
  alert_webhook_token         = var.alert_webhook_token
  alert_cluster               = var.cluster # alerts with no cluster label are this one's

  # Keep in dry run until a planned remediation has been read and found right.
  dry_run = true
}

output "chat_action_uri" {
  description = "Slack interactivity request URL (the one the manifest was given)."
  value       = module.loopbreaker.chat_action_uri
}

output "slack_app_manifest" {
  description = "The Slack app manifest with this deployment's URL."
  value       = module.loopbreaker.slack_app_manifest
}
