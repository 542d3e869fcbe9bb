terraform {
  # Nothing newer than Terraform 1.5 is used (preconditions, optional nullable variables).
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
