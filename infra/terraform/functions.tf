# The entry points of functions/main.py, one Cloud Function (2nd gen) and one service
# account each, all built from the same source bundle (bundle.tf). Every function is an
# HTTP function: on_log_entry and on_remediation_request are pushed to by Pub/Sub
# subscriptions this module owns (pubsub.tf), which functions-framework turns into the
# same CloudEvent an Eventarc trigger would deliver.
#
# Logging: nothing to configure. The Python runtime sends each function's stdout and
# stderr to Cloud Logging and turns every JSON line into a structured entry; the library
# writes one JSON object per line (severity, message, labels, event fields), which arrive
# as jsonPayload and feed the log-based metrics in monitoring.tf.
resource "google_cloudfunctions2_function" "this" {
  # checkov:skip=CKV_GCP_124: ingress is per function: ALLOW_INTERNAL_ONLY for the pushed functions and on_schedule, ALLOW_ALL only for on_chat_action and on_alertmanager_webhook, which Slack, Google Chat and Alertmanager call from outside Google Cloud.
  for_each = local.deployed

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
          # The projects served (projects.tf): every function, so none falls back to
          # project_id alone; an entry or alert of another project opens nothing.
          LOOPBREAKER_PROJECTS = join(",", local.workload_projects)
          # on_schedule names the path when it asks for approval; the executor follows it.
          LOOPBREAKER_REPAIR_PATH = var.repair_path
          # Only the functions that post to chat get the chat notifier; the others log.
          LOOPBREAKER_NOTIFIER = each.value.notifies ? var.notifier : "log"
        },
        each.value.notifies ? {
          LOOPBREAKER_SLACK_CHANNEL     = var.notifier == "slack" ? var.slack_channel : null
          LOOPBREAKER_GOOGLE_CHAT_SPACE = var.notifier == "google-chat" ? var.google_chat_space : null
          # The route file's YAML itself (the functions have no file of the applier's):
          # where each incident is posted and whose clicks approve it. Unset when null.
          LOOPBREAKER_ROUTES = var.routes
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
          # A self-run Prometheus (prometheus.tf); its secrets are injected below.
          LOOPBREAKER_PROMETHEUS_URL           = var.prometheus_url
          LOOPBREAKER_PROMETHEUS_CLUSTER_LABEL = var.prometheus_cluster_label
          LOOPBREAKER_PROMETHEUS_USERNAME      = var.prometheus_username
        } : {},
        each.key == "on_alertmanager_webhook" ? {
          LOOPBREAKER_ALERT_CLUSTER = var.alert_cluster
        } : {},
        # The audience of Google Chat's tokens: the endpoint URL by default (the Chat app's
        # "Authentication Audience: HTTP endpoint URL", deploy/slack/google-chat.md).
        each.key == "on_chat_action" && var.notifier == "google-chat" ? {
          LOOPBREAKER_GOOGLE_CHAT_AUDIENCE = coalesce(var.google_chat_audience, local.function_urls["on_chat_action"])
        } : {},
        each.key == "on_remediation_request" ? {
          LOOPBREAKER_DRY_RUN                     = tostring(var.dry_run)
          LOOPBREAKER_MAX_DELETIONS_PER_HOUR      = tostring(var.max_deletions_per_hour)
          LOOPBREAKER_MAX_UNREADY_SHARE           = tostring(var.max_unready_share)
          LOOPBREAKER_NODE_POOLS                  = join(",", var.node_pools)
          LOOPBREAKER_DRAIN_MODE                  = var.drain_mode
          LOOPBREAKER_DRAIN_TIMEOUT               = var.drain_timeout
          LOOPBREAKER_REPORT_DISRUPTION_SCHEDULE  = var.report_disruption_schedule
          LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS = join(",", var.foreign_remediation_markers)
          LOOPBREAKER_SUPPORT_PARENT              = var.support_parent
          LOOPBREAKER_SUPPORT_CLASSIFICATION      = var.support_classification
        } : {},
      ) : variable => value if value != null && value != ""
    }

    # Secret Manager values as plain LOOPBREAKER_* variables, resolved when a revision is
    # deployed and when an instance starts; each function gets only the secrets it reads
    # (local.functions[*].secrets). The version is the one this module added: a new value
    # is a new version and a new revision, and the deploy waits for the version to exist.
    dynamic "secret_environment_variables" {
      for_each = local.function_secrets[each.key]
      content {
        key        = local.secret_variables[secret_environment_variables.value]
        project_id = data.google_project.this.number
        secret     = google_secret_manager_secret.this[secret_environment_variables.value].secret_id
        version    = google_secret_manager_secret_version.this[secret_environment_variables.value].version
      }
    }

    # The Prometheus' token or password, from the team's own secret (prometheus.tf): its
    # latest version when an instance starts, so rotating it needs no apply.
    dynamic "secret_environment_variables" {
      for_each = each.key == "on_schedule" ? local.prometheus_secrets : {}
      content {
        key        = secret_environment_variables.key
        project_id = secret_environment_variables.value.project
        secret     = secret_environment_variables.value.secret
        version    = "latest"
      }
    }
  }

  lifecycle {
    precondition {
      condition     = var.notifier != "slack" || var.slack_channel != null
      error_message = "notifier = \"slack\" needs slack_channel (a channel id such as C0123456789)."
    }
    precondition {
      condition     = var.notifier != "google-chat" || var.google_chat_space != null
      error_message = "notifier = \"google-chat\" needs google_chat_space (the module posts through the Chat API as the Chat app)."
    }
    # The library refuses these at start-up too; here they fail the plan instead.
    precondition {
      condition     = var.prometheus_bearer_token_secret == null || (var.prometheus_username == null && var.prometheus_password_secret == null)
      error_message = "prometheus_bearer_token_secret and basic auth (prometheus_username, prometheus_password_secret) are exclusive: use one."
    }
    precondition {
      condition     = (var.prometheus_username == null) == (var.prometheus_password_secret == null)
      error_message = "basic auth to prometheus_url needs both prometheus_username and prometheus_password_secret."
    }
    precondition {
      condition     = var.prometheus_url != null || (var.prometheus_cluster_label == null && var.prometheus_username == null)
      error_message = "prometheus_cluster_label and prometheus_username need prometheus_url."
    }
  }

  depends_on = [
    google_project_service.this,
    # Cloud Run resolves every secret reference at deploy time: the version must exist
    # (also implied by the version reference above) and the runtime account read it.
    google_secret_manager_secret_version.this,
    google_secret_manager_secret_iam_member.accessor,
    google_secret_manager_secret_iam_member.prometheus,
  ]
}

# Slack and Google Chat call on_chat_action, and Alertmanager on_alertmanager_webhook,
# without Google credentials. These endpoints verify every request themselves (Slack
# signature, Google Chat bearer token, Alertmanager bearer token) before reading it, and
# their service accounts can publish remediation requests at most: never touch a node.
resource "google_cloud_run_service_iam_member" "public_invoker" {
  # checkov:skip=CKV_GCP_102: public on purpose; Slack, Google Chat and Alertmanager hold no Google credentials, and the function verifies every request (signature or token) itself.
  for_each = { for name, fn in local.deployed : name => fn if fn.public }

  project  = var.project_id
  location = google_cloudfunctions2_function.this[each.key].location
  service  = google_cloudfunctions2_function.this[each.key].name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# The pushed functions may be invoked by the push subscriptions' service account only.
resource "google_cloud_run_service_iam_member" "trigger_invoker" {
  for_each = { for name, fn in local.deployed : name => fn if fn.trigger != null }

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
