# One sink per filter of log-filters.json, at the scope var.sink_scope names; all publish
# to the log_events topic. Folder and organization sinks include their children, so one
# deployment sees every project below them (diagnosis and remediation permissions are
# granted in var.project_id only: see README, "Sink scope").

resource "google_logging_project_sink" "this" {
  for_each = var.sink_scope == "project" ? local.log_filters : {}

  project                = var.project_id
  name                   = "${local.name_prefix}${each.key}"
  description            = "loopbreaker: ${each.key} entries to Pub/Sub (generated filter)."
  destination            = "pubsub.googleapis.com/${google_pubsub_topic.log_events.id}"
  filter                 = each.value
  unique_writer_identity = true
}

resource "google_logging_folder_sink" "this" {
  for_each = var.sink_scope == "folder" ? local.log_filters : {}

  folder           = var.sink_folder
  name             = "${local.name_prefix}${each.key}"
  description      = "loopbreaker: ${each.key} entries to Pub/Sub (generated filter)."
  destination      = "pubsub.googleapis.com/${google_pubsub_topic.log_events.id}"
  filter           = each.value
  include_children = true

  lifecycle {
    precondition {
      condition     = var.sink_folder != null
      error_message = "sink_scope = \"folder\" needs sink_folder."
    }
  }
}

resource "google_logging_organization_sink" "this" {
  for_each = var.sink_scope == "organization" ? local.log_filters : {}

  org_id           = var.sink_organization
  name             = "${local.name_prefix}${each.key}"
  description      = "loopbreaker: ${each.key} entries to Pub/Sub (generated filter)."
  destination      = "pubsub.googleapis.com/${google_pubsub_topic.log_events.id}"
  filter           = each.value
  include_children = true

  lifecycle {
    precondition {
      condition     = var.sink_organization != null
      error_message = "sink_scope = \"organization\" needs sink_organization."
    }
  }
}

# Each active sink's own writer identity may publish to log_events, and to nothing else.
resource "google_pubsub_topic_iam_member" "sink_writer" {
  for_each = merge(
    google_logging_project_sink.this,
    google_logging_folder_sink.this,
    google_logging_organization_sink.this,
  )

  project = var.project_id
  topic   = google_pubsub_topic.log_events.id
  role    = "roles/pubsub.publisher"
  member  = each.value.writer_identity
}
