# The entry points of functions/main.py, one Cloud Function (2nd gen) and one service
# account each, all built from the same source bundle (bundle.tf).
#
# Logging: nothing to configure. The Python runtime sends each function's stdout and
# stderr to Cloud Logging and turns every JSON line into a structured entry; the library
# writes one JSON object per line (severity, message, labels, event fields), which arrive
# as jsonPayload and feed the log-based metrics in monitoring.tf.
resource "google_cloudfunctions2_function" "this" {
  # checkov:skip=CKV_GCP_124: ingress is per function: ALLOW_INTERNAL_ONLY for the event functions and on_schedule, ALLOW_ALL only for on_chat_action and on_alertmanager_webhook, which Slack, Google Chat and Alertmanager call from outside Google Cloud.
  for_each = { for name, fn in local.functions : name => fn if fn.deploy }

  project     = var.project_id
  location    = var.region
  name        = "${local.name_prefix}${each.value.name}"
  description = each.value.description
  labels      = local.labels

  build_config {
    runtime     = "python311"
    entry_point = each.value.entry_point
    # null: the project's default Cloud Build service account.
    service_account = var.build_service_account == null ? null : "projects/${var.project_id}/serviceAccounts/${var.build_service_account}"

    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.bundle.name
      }
    }
  }

  service_config {
    available_memory               = each.value.memory
    timeout_seconds                = each.value.timeout_seconds
    min_instance_count             = each.value.min_instances
    max_instance_count             = each.value.max_instances
    ingress_settings               = each.value.ingress
    all_traffic_on_latest_revision = true
    service_account_email          = google_service_account.functions[each.key].email
    vpc_connector                  = each.value.reaches_cluster ? var.vpc_connector : null
    vpc_connector_egress_settings  = each.value.reaches_cluster && var.vpc_connector != null ? "PRIVATE_RANGES_ONLY" : null

    # The LOOPBREAKER_* settings (README, "Configuration"), each to the functions that use
    # it; unset ones are left out so the library's defaults apply. Settings are validated
    # when an instance starts, so every function gets a consistent set.
    environment_variables = {
      for variable, value in merge(
        {
          LOOPBREAKER_STORE              = "firestore"
          LOOPBREAKER_PROJECT            = var.project_id
          LOOPBREAKER_FIRESTORE_DATABASE = local.firestore_database
          LOOPBREAKER_COLLECTION_PREFIX  = local.collection_prefix
          LOOPBREAKER_GROUPING_WINDOW    = var.grouping_window
          LOOPBREAKER_SETTLE_TIME        = var.settle_time
          LOOPBREAKER_STALE_AFTER        = var.stale_after
          LOOPBREAKER_MAX_SIGNALS        = tostring(var.max_signals)
          LOOPBREAKER_DEDUP_RETENTION    = var.dedup_retention
          LOOPBREAKER_LOG_LEVEL          = var.log_level
          LOOPBREAKER_WORKLOAD_KIND      = var.workload_kind
          # Only the functions that post to chat get the chat notifier; the others log.
          LOOPBREAKER_NOTIFIER = each.value.notifies ? var.notifier : "log"
        },
        each.value.notifies ? {
          LOOPBREAKER_SLACK_CHANNEL     = var.notifier == "slack" ? var.slack_channel : null
          LOOPBREAKER_GOOGLE_CHAT_SPACE = var.notifier == "google-chat" ? var.google_chat_space : null
        } : {},
        each.value.approvals ? {
          LOOPBREAKER_APPROVERS         = join(",", var.approvers)
          LOOPBREAKER_APPROVAL_TTL      = var.approval_ttl
          LOOPBREAKER_REMEDIATION_TOPIC = google_pubsub_topic.remediation.id
        } : {},
        each.key == "on_schedule" ? {
          LOOPBREAKER_QUERY_BUDGET = tostring(var.query_budget)
          LOOPBREAKER_SETTLE_BATCH = tostring(var.settle_batch)
          LOOPBREAKER_LIVE_SOURCES = tostring(var.live_sources)
        } : {},
        each.key == "on_alertmanager_webhook" ? {
          LOOPBREAKER_ALERT_CLUSTER = var.alert_cluster
        } : {},
        each.key == "on_chat_action" ? {
          LOOPBREAKER_GOOGLE_CHAT_AUDIENCE = var.google_chat_audience
        } : {},
        each.key == "on_remediation_request" ? {
          LOOPBREAKER_DRY_RUN                = tostring(var.dry_run)
          LOOPBREAKER_MAX_DELETIONS_PER_HOUR = tostring(var.max_deletions_per_hour)
          LOOPBREAKER_MAX_UNREADY_SHARE      = tostring(var.max_unready_share)
          LOOPBREAKER_NODE_POOLS             = join(",", var.node_pools)
          LOOPBREAKER_DRAIN_MODE             = var.drain_mode
          LOOPBREAKER_DRAIN_TIMEOUT          = var.drain_timeout
          LOOPBREAKER_HOST_ACTION            = var.host_action
          LOOPBREAKER_SUPPORT_PARENT         = var.support_parent
          LOOPBREAKER_SUPPORT_CLASSIFICATION = var.support_classification
        } : {},
      ) : variable => value if value != null && value != ""
    }

    # Secret Manager values as plain LOOPBREAKER_* variables, resolved when an instance
    # starts; each function gets only the secrets it reads (local.functions[*].secrets).
    dynamic "secret_environment_variables" {
      for_each = local.function_secrets[each.key]
      content {
        key        = local.secret_variables[secret_environment_variables.value]
        project_id = data.google_project.this.number
        secret     = google_secret_manager_secret.this[secret_environment_variables.value].secret_id
        version    = "latest"
      }
    }
  }

  # on_log_entry and on_remediation_request: Pub/Sub CloudEvents through Eventarc. Retries
  # are on: both handlers are idempotent (deliveries are deduplicated by entry and
  # messageId; remediation steps recorded as done never run again), so a TransientError
  # is redelivered with backoff instead of being lost.
  dynamic "event_trigger" {
    for_each = each.value.trigger == null ? [] : [each.value.trigger]
    content {
      trigger_region        = var.region
      event_type            = "google.cloud.pubsub.topic.v1.messagePublished"
      pubsub_topic          = event_trigger.value == "log_events" ? google_pubsub_topic.log_events.id : google_pubsub_topic.remediation.id
      retry_policy          = "RETRY_POLICY_RETRY"
      service_account_email = google_service_account.trigger.email
    }
  }

  lifecycle {
    precondition {
      condition     = var.notifier != "slack" || var.slack_channel != null
      error_message = "notifier = \"slack\" needs slack_channel (and a slack-bot-token secret version)."
    }
    precondition {
      condition     = var.notifier != "google-chat" || var.google_chat_space != null
      error_message = "notifier = \"google-chat\" needs google_chat_space (the module posts through the Chat API as the Chat app)."
    }
    precondition {
      condition     = var.notifier != "google-chat" || length(var.approvers) == 0 || var.google_chat_audience != null
      error_message = "Approvals in Google Chat need google_chat_audience, or every click is refused with 401."
    }
  }

  depends_on = [
    google_project_service.this,
    # Cloud Run checks at deploy time that the runtime account can read its secrets.
    google_secret_manager_secret_iam_member.accessor,
    # Pub/Sub must be able to sign the trigger account's tokens before the first push.
    google_service_account_iam_member.trigger_token_creator,
  ]
}

# Slack and Google Chat call on_chat_action, and Alertmanager on_alertmanager_webhook,
# without Google credentials. These endpoints verify every request themselves (Slack
# signature, Google Chat bearer token, Alertmanager bearer token) before reading it, and
# their service accounts can publish remediation requests at most: never touch a node.
resource "google_cloud_run_service_iam_member" "public_invoker" {
  # checkov:skip=CKV_GCP_102: public on purpose; Slack, Google Chat and Alertmanager hold no Google credentials, and the function verifies every request (signature or token) itself.
  for_each = { for name, fn in local.functions : name => fn if fn.deploy && fn.public }

  project  = var.project_id
  location = google_cloudfunctions2_function.this[each.key].location
  service  = google_cloudfunctions2_function.this[each.key].name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# The event functions may be invoked by their Eventarc trigger's service account only.
resource "google_cloud_run_service_iam_member" "trigger_invoker" {
  for_each = { for name, fn in local.functions : name => fn if fn.deploy && fn.trigger != null }

  project  = var.project_id
  location = google_cloudfunctions2_function.this[each.key].location
  service  = google_cloudfunctions2_function.this[each.key].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.trigger.email}"
}

# on_schedule may be invoked by the Cloud Scheduler job's service account only.
resource "google_cloud_run_service_iam_member" "scheduler_invoker" {
  project  = var.project_id
  location = google_cloudfunctions2_function.this["on_schedule"].location
  service  = google_cloudfunctions2_function.this["on_schedule"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
}
