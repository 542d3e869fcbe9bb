terraform {
  # Nothing newer than Terraform 1.5 is used (preconditions, startswith, strcontains).
  required_version = ">= 1.5"

  # Each lower bound is the oldest release the offline schema check validates every
  # resource, data source, argument, block and attribute reference of this module and
  # of examples/minimal against (tests/deploy/test_terraform_schema.py, with schemas
  # from the prebuilt CDK bindings: infra/provider_schema.py); the upper bound excludes
  # the next major, unreleased and unchecked. google 6.1.0 is the oldest 6.x release with
  # published bindings (6.0.x has none to check against); 8.7.0 is checked too.
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.1, < 9"
    }
    # Only for google_project_service_identity (iam.tf), which the google provider does
    # not have: it creates the Pub/Sub service agent before anything is granted to it.
    google-beta = {
      source  = "hashicorp/google-beta"
      version = ">= 6.1, < 9"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4.1, < 3"
    }
    # time_sleep: the propagation waits (iam.tf, log-sinks.tf, monitoring.tf).
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9.1, < 1"
    }
  }
}
