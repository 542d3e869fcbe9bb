# Log sinks -> log_events -> Eventarc -> on_log_entry.
resource "google_pubsub_topic" "log_events" {
  # checkov:skip=CKV_GCP_83: Google-managed encryption; the module owns no Cloud KMS key, and the messages are copies of log entries already held (Google-managed) in Cloud Logging.
  project                    = var.project_id
  name                       = "${local.name_prefix}log-events"
  labels                     = local.labels
  message_retention_duration = var.message_retention_duration

  depends_on = [google_project_service.this]
}

# on_chat_action / on_schedule -> remediation -> Eventarc -> on_remediation_request.
resource "google_pubsub_topic" "remediation" {
  # checkov:skip=CKV_GCP_83: Google-managed encryption; the module owns no Cloud KMS key, and a request holds only ids and names that are also on the incident in Firestore.
  project                    = var.project_id
  name                       = "${local.name_prefix}remediation"
  labels                     = local.labels
  message_retention_duration = var.message_retention_duration

  depends_on = [google_project_service.this]
}

# Deliveries that keep failing (10 attempts) end here once the dead-letter policy is set
# on the Eventarc-created subscriptions (see README, "Dead letters"); replay them with
# `loopbreaker replay` after a fix.
resource "google_pubsub_topic" "dead_letter" {
  # checkov:skip=CKV_GCP_83: Google-managed encryption; the module owns no Cloud KMS key, and dead letters are copies of messages of the two topics above.
  project                    = var.project_id
  name                       = "${local.name_prefix}dead-letter"
  labels                     = local.labels
  message_retention_duration = var.message_retention_duration

  depends_on = [google_project_service.this]
}

# The pull subscription to watch and drain: monitoring.tf alerts when it holds messages.
resource "google_pubsub_subscription" "dead_letter" {
  project                    = var.project_id
  name                       = "${local.name_prefix}dead-letter"
  topic                      = google_pubsub_topic.dead_letter.id
  labels                     = local.labels
  ack_deadline_seconds       = 60
  message_retention_duration = var.message_retention_duration
  retain_acked_messages      = false

  # Never deleted for inactivity: it is read only when something went wrong.
  expiration_policy {
    ttl = ""
  }
}

# Pub/Sub forwards undeliverable messages as its own service agent.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.id
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${local.pubsub_service_agent}"
}
