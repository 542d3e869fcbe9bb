# Log sinks -> log_events -> push subscription -> on_log_entry.
resource "google_pubsub_topic" "log_events" {
  # checkov:skip=CKV_GCP_83: Google-managed encryption; the module owns no Cloud KMS key, and the messages are copies of log entries already held (Google-managed) in Cloud Logging.
  project                    = var.project_id
  name                       = "${local.name_prefix}log-events"
  labels                     = local.labels
  message_retention_duration = var.message_retention_duration

  depends_on = [google_project_service.this]
}

# on_chat_action / on_schedule -> remediation -> push subscription -> on_remediation_request.
resource "google_pubsub_topic" "remediation" {
  # checkov:skip=CKV_GCP_83: Google-managed encryption; the module owns no Cloud KMS key, and a request holds only ids and names that are also on the incident in Firestore.
  project                    = var.project_id
  name                       = "${local.name_prefix}remediation"
  labels                     = local.labels
  message_retention_duration = var.message_retention_duration

  depends_on = [google_project_service.this]
}

# Deliveries that keep failing (max_delivery_attempts) end here; replay them with
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

# One push subscription per pushed function (local.functions[*].trigger), owned here so
# that its retry and dead-letter policies are too. Pub/Sub posts each message to the
# function's run.app URL with an OIDC token of the push account, which alone may invoke it
# (functions.tf); functions-framework turns the push into the CloudEvent the function
# takes. Retries are on: both handlers are idempotent (deliveries are deduplicated by
# entry and messageId; remediation steps recorded as done never run again), so a
# TransientError (HTTP 500) is redelivered with backoff instead of being lost.
resource "google_pubsub_subscription" "push" {
  for_each = { for name, fn in local.deployed : name => fn if fn.trigger != null }

  project                    = var.project_id
  name                       = "${local.name_prefix}${each.value.name}"
  topic                      = each.value.trigger == "log_events" ? google_pubsub_topic.log_events.id : google_pubsub_topic.remediation.id
  labels                     = local.labels
  ack_deadline_seconds       = each.value.ack_deadline
  message_retention_duration = var.message_retention_duration

  push_config {
    push_endpoint = google_cloudfunctions2_function.this[each.key].service_config[0].uri

    oidc_token {
      service_account_email = google_service_account.trigger.email
      audience              = google_cloudfunctions2_function.this[each.key].service_config[0].uri
    }
  }

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  # Never deleted for inactivity: a quiet week has no failures to deliver.
  expiration_policy {
    ttl = ""
  }

  depends_on = [
    # The first push is answered, not refused: the push account may invoke the function
    # and the Pub/Sub service agent may sign its tokens and forward dead letters.
    google_cloud_run_service_iam_member.trigger_invoker,
    google_service_account_iam_member.trigger_token_creator,
    google_pubsub_topic_iam_member.dead_letter_publisher,
  ]
}

# Pub/Sub forwards undeliverable messages as its own service agent: publisher on the
# dead-letter topic, subscriber on each subscription it forwards from.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.id
  role    = "roles/pubsub.publisher"
  member  = time_sleep.pubsub_agent.triggers["member"]
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  for_each = google_pubsub_subscription.push

  project      = var.project_id
  subscription = each.value.name
  role         = "roles/pubsub.subscriber"
  member       = time_sleep.pubsub_agent.triggers["member"]
}
