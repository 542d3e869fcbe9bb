locals {
  metric_prefix = "${local.collection_prefix}/"
  # The functions' own log entries (Cloud Functions 2nd gen log as Cloud Run revisions).
  function_logs = join(" ", [
    "resource.type=\"cloud_run_revision\"",
    "AND resource.labels.service_name=(${join(" OR ", [for name, fn in local.deployed : "\"${local.name_prefix}${fn.name}\""])})",
  ])
  log_metric_types = {
    accelerator_hours_lost = "logging.googleapis.com/user/${google_logging_metric.accelerator_hours_lost.name}"
    entries_rejected       = "logging.googleapis.com/user/${google_logging_metric.entries_rejected.name}"
    incident_outcomes      = "logging.googleapis.com/user/${google_logging_metric.incident_outcomes.name}"
    incidents_opened       = "logging.googleapis.com/user/${google_logging_metric.incidents_opened.name}"
    remediation_approvals  = "logging.googleapis.com/user/${google_logging_metric.remediation_approvals.name}"
    remediation_steps      = "logging.googleapis.com/user/${google_logging_metric.remediation_steps.name}"
    seconds_to_verified    = "logging.googleapis.com/user/${google_logging_metric.seconds_to_verified.name}"
  }
}

# --- log-based metrics from the functions' structured logs -------------------------------

resource "google_logging_metric" "incidents_opened" {
  project     = var.project_id
  name        = "${local.metric_prefix}incidents_opened"
  description = "Incidents opened by on_log_entry (jsonPayload.event = incident_opened)."
  filter      = "${local.function_logs} AND jsonPayload.event=\"incident_opened\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key         = "cluster"
      value_type  = "STRING"
      description = "GKE cluster of the incident, when known."
    }
  }
  label_extractors = {
    cluster = "EXTRACT(labels.cluster)"
  }
}

resource "google_logging_metric" "remediation_approvals" {
  project     = var.project_id
  name        = "${local.metric_prefix}remediation_approvals"
  description = "Remediations approved in chat (jsonPayload.event = remediation_approved)."
  filter      = "${local.function_logs} AND jsonPayload.event=\"remediation_approved\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key         = "platform"
      value_type  = "STRING"
      description = "slack or google-chat."
    }
  }
  label_extractors = {
    platform = "EXTRACT(jsonPayload.platform)"
  }
}

resource "google_logging_metric" "remediation_steps" {
  project     = var.project_id
  name        = "${local.metric_prefix}remediation_steps"
  description = "Remediation steps recorded by on_remediation_request (jsonPayload.event = remediation_step)."
  filter      = "${local.function_logs} AND jsonPayload.event=\"remediation_step\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key         = "step"
      value_type  = "STRING"
      description = "recheck, cordon, drain, delete_vm, report_host_faulty, hand_to_gke, await_gke or support_case."
    }
    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "done, failed, skipped or planned."
    }
  }
  label_extractors = {
    step    = "EXTRACT(jsonPayload.step)"
    outcome = "EXTRACT(jsonPayload.outcome)"
  }
}

resource "google_logging_metric" "entries_rejected" {
  project     = var.project_id
  name        = "${local.metric_prefix}entries_rejected"
  description = "Messages on_log_entry acknowledged without use: not a LogEntry (jsonPayload.event = entry_rejected)."
  filter      = "${local.function_logs} AND jsonPayload.event=\"entry_rejected\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }
}

# The outcome of each remediation, logged by on_schedule once it is decided (verified: no
# restart in the verify window; recurred: the same host again), with the time from the
# first signal; `loopbreaker incidents report` prints the same figures from the store.
resource "google_logging_metric" "incident_outcomes" {
  project     = var.project_id
  name        = "${local.metric_prefix}incident_outcomes"
  description = "Remediated incidents verified or recurred (jsonPayload.event = incident_verified or incident_recurred)."
  filter      = "${local.function_logs} AND jsonPayload.event=(\"incident_verified\" OR \"incident_recurred\")"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key         = "verdict"
      value_type  = "STRING"
      description = "verified or recurred."
    }
    labels {
      key         = "root_cause"
      value_type  = "STRING"
      description = "The incident's root cause (faulty_host, ...)."
    }
  }
  label_extractors = {
    verdict    = "EXTRACT(jsonPayload.verdict)"
    root_cause = "EXTRACT(jsonPayload.root_cause)"
  }
}

resource "google_logging_metric" "seconds_to_verified" {
  project     = var.project_id
  name        = "${local.metric_prefix}seconds_to_verified"
  description = "Seconds from an incident's first signal to its verdict (jsonPayload.durations.seconds_to_verified)."
  filter      = "${local.function_logs} AND jsonPayload.event=(\"incident_verified\" OR \"incident_recurred\")"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"
  }
  value_extractor = "EXTRACT(jsonPayload.durations.seconds_to_verified)"
  # 60 s .. about 4 weeks, doubling.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 16
      growth_factor      = 2
      scale              = 60
    }
  }
}

# What each restart loop cost, logged by on_schedule with every diagnosis of a loop
# (accelerators x (downtime + lost progress), docs/diagnosis.md "Cost"). An incident is
# diagnosed again as signals arrive: jsonPayload.accelerator_hours_added is what each
# diagnosis adds to the previous one, so the sum counts every loop once. A loop whose cost
# the evidence cannot give logs no figure and is not counted.
resource "google_logging_metric" "accelerator_hours_lost" {
  project     = var.project_id
  name        = "${local.metric_prefix}accelerator_hours_lost"
  description = "Accelerator-hours lost to restart loops (jsonPayload.accelerator_hours_added of incident_diagnosed), by root cause."
  filter      = "${local.function_logs} AND jsonPayload.event=\"incident_diagnosed\" AND jsonPayload.accelerator_hours_added>0"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "h"
    labels {
      key         = "root_cause"
      value_type  = "STRING"
      description = "The diagnosis' root cause (faulty_host, nccl_timeout, ...)."
    }
    labels {
      key         = "accelerator"
      value_type  = "STRING"
      description = "The accelerator GKE's node labels name (nvidia-h100-80gb, tpu-v5p-slice), when known."
    }
  }
  value_extractor = "EXTRACT(jsonPayload.accelerator_hours_added)"
  label_extractors = {
    root_cause  = "EXTRACT(jsonPayload.root_cause)"
    accelerator = "EXTRACT(jsonPayload.accelerator)"
  }
  # 0.1 accelerator-hour .. about 3,300, doubling.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 16
      growth_factor      = 2
      scale              = 0.1
    }
  }
}

# A new log-based metric is known to Cloud Logging at once but to Cloud Monitoring only
# after a while: an alert policy on it is refused with 404 "Cannot find metric(s) ... it
# could take up to 10 minutes to become available" until then. The policies on these
# metrics wait here after the metrics are created (once: a renamed metric waits again).
resource "time_sleep" "log_metrics" {
  create_duration = var.metric_propagation_wait

  triggers = local.log_metric_types
}

# --- the metrics scope ----------------------------------------------------------------------

# Each workload project other than project_id joins project_id's metrics scope, so
# Managed Prometheus queries made in project_id (and the JobSet alert below) see its
# series. metrics_scope is the scope's resource name, locations/global/metricsScopes/
# {SCOPING_PROJECT_ID_OR_NUMBER}; name is the monitored project's id (the provider also
# takes the long form .../projects/{ID} and keeps the last segment). Creating one needs
# monitoring.metricsScopes.link on both projects (README, "IAM roles needed to apply").
# (registry.terraform.io/providers/hashicorp/google/latest/docs/resources/monitoring_monitored_project)
resource "google_monitoring_monitored_project" "workload" {
  for_each = local.monitored_projects

  metrics_scope = "locations/global/metricsScopes/${var.project_id}"
  name          = each.value

  # The scope lives in project_id's Cloud Monitoring, which must be enabled first.
  depends_on = [google_project_service.this]
}

# --- alert policies ---------------------------------------------------------------------

# Managed Service for Prometheus: kube_jobset_restarts is a gauge of status.restarts; its
# increase, not its value, means a restart loop is going on (README, "Preparing the GKE
# side", for the kube-state-metrics configuration that exports it).
resource "google_monitoring_alert_policy" "jobset_restarts" {
  project               = var.project_id
  display_name          = "loopbreaker: JobSet restarting"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "A JobSet restarted in the last 10 minutes"
    condition_prometheus_query_language {
      query               = "increase(kube_jobset_restarts[10m]) > 0"
      duration            = "0s"
      evaluation_interval = "60s"
      rule_group          = "loopbreaker"
      alert_rule          = "JobSetRestarting"
      labels = {
        severity = "warning"
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A JobSet restarted. loopbreaker groups the node, host and worker signals into one incident and posts its diagnosis to chat; `loopbreaker incidents list --store firestore` lists the open ones."
  }
}

resource "google_monitoring_alert_policy" "dead_letters" {
  project               = var.project_id
  display_name          = "loopbreaker: dead letters"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "The dead-letter subscription holds messages"
    condition_threshold {
      filter          = "resource.type = \"pubsub_subscription\" AND resource.labels.subscription_id = \"${google_pubsub_subscription.dead_letter.name}\" AND metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Deliveries failed ${var.max_delivery_attempts} times. After a fix: `gcloud pubsub subscriptions pull ${google_pubsub_subscription.dead_letter.id} --limit=100 --format=json > dead.json` and `loopbreaker replay dead.json`."
  }
}

resource "google_monitoring_alert_policy" "entries_rejected" {
  project               = var.project_id
  display_name          = "loopbreaker: log entries rejected"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "on_log_entry rejected messages"
    condition_threshold {
      filter          = "resource.type = \"cloud_run_revision\" AND metric.type = \"${time_sleep.log_metrics.triggers["entries_rejected"]}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Messages on the log topic that are not LogEntries were acknowledged and dropped; the ERROR line of each (jsonPayload.event=\"entry_rejected\") names its messageId and reason."
  }

  depends_on = [google_logging_metric.entries_rejected, time_sleep.log_metrics]
}

resource "google_monitoring_alert_policy" "remediation_failed" {
  project               = var.project_id
  display_name          = "loopbreaker: remediation step failed"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "A remediation step failed"
    condition_threshold {
      filter          = "resource.type = \"cloud_run_revision\" AND metric.type = \"${time_sleep.log_metrics.triggers["remediation_steps"]}\" AND metric.labels.outcome = \"failed\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.step"]
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A remediation stopped part-way: the node may be left cordoned. The incident's chat message and `loopbreaker incidents show ID --store firestore` give every step and reason."
  }

  depends_on = [google_logging_metric.remediation_steps, time_sleep.log_metrics]
}

# --- dashboard ----------------------------------------------------------------------------

locals {
  # Tiles in reading order, two a row: the cluster's own metrics (PromQL), then the
  # functions' log-based metrics (summed per 5 minutes).
  dashboard_promql = [
    { title = "JobSet restarts (increase over 10 min)", plot = "LINE", axis = "restarts", query = "max by (cluster, namespace, jobset_name) (increase(kube_jobset_restarts[10m]))" },
    { title = "Node-pool interruptions by type", plot = "STACKED_BAR", axis = "interruptions", query = "sum by (cluster_name, node_pool_name, interruption_type) (avg_over_time(kubernetes_io:node_pool_interruption_count[10m]))" },
    { title = "Unready nodes", plot = "LINE", axis = "nodes", query = "sum by (cluster_name, node_pool_name) (kubernetes_io:node_status_condition{condition=\"Ready\", status=~\"False|Unknown\"})" },
  ]
  dashboard_log_metrics = [
    { title = "Incidents opened", axis = "incidents", metric = local.log_metric_types.incidents_opened, group_by = ["metric.label.cluster"] },
    { title = "Approvals", axis = "approvals", metric = local.log_metric_types.remediation_approvals, group_by = ["metric.label.platform"] },
    { title = "Remediation steps by outcome", axis = "steps", metric = local.log_metric_types.remediation_steps, group_by = ["metric.label.step", "metric.label.outcome"] },
  ]
  dashboard_widgets = concat(
    [for t in local.dashboard_promql : {
      title = t.title
      xyChart = {
        dataSets = [{
          plotType        = t.plot
          targetAxis      = "Y1"
          timeSeriesQuery = { prometheusQuery = t.query }
        }]
        yAxis = { label = t.axis, scale = "LINEAR" }
      }
    }],
    [for t in local.dashboard_log_metrics : {
      title = t.title
      xyChart = {
        dataSets = [{
          plotType   = "STACKED_BAR"
          targetAxis = "Y1"
          timeSeriesQuery = {
            timeSeriesFilter = {
              filter = "metric.type=\"${t.metric}\" resource.type=\"cloud_run_revision\""
              aggregation = {
                alignmentPeriod    = "300s"
                perSeriesAligner   = "ALIGN_SUM"
                crossSeriesReducer = "REDUCE_SUM"
                groupByFields      = t.group_by
              }
            }
          }
        }]
        yAxis = { label = t.axis, scale = "LINEAR" }
      }
    }],
  )
}

resource "google_monitoring_dashboard" "this" {
  project = var.project_id
  dashboard_json = jsonencode({
    displayName = "loopbreaker"
    mosaicLayout = {
      columns = 48
      tiles = [
        for index, widget in local.dashboard_widgets : {
          xPos   = (index % 2) * 24
          yPos   = floor(index / 2) * 16
          width  = 24
          height = 16
          widget = widget
        }
      ]
    }
  })
}
