variable "action_signing_key" {
  type        = string
  description = "HMAC key (at least 16 characters, such as `openssl rand -base64 32`) that signs approval buttons; required with approvers (stored as a secret version, and in the state)."
  default     = null
  sensitive   = true

  validation {
    condition     = var.action_signing_key == null || length(coalesce(var.action_signing_key, "-")) >= 16
    error_message = "action_signing_key must be at least 16 characters long."
  }
}

variable "alert_cluster" {
  type        = string
  description = "Cluster of alerts that carry no cluster label (LOOPBREAKER_ALERT_CLUSTER), for a Prometheus per cluster; null: alerts must name it."
  default     = null
}

variable "alert_webhook_token" {
  type        = string
  description = "Bearer token on_alertmanager_webhook accepts (LOOPBREAKER_ALERT_WEBHOOK_TOKEN, at least 16 characters); required with enable_alertmanager_webhook (stored as a secret version, and in the state)."
  default     = null
  sensitive   = true

  validation {
    condition     = var.alert_webhook_token == null || length(coalesce(var.alert_webhook_token, "-")) >= 16
    error_message = "alert_webhook_token must be at least 16 characters long."
  }
}

variable "approval_ttl" {
  type        = string
  description = "How long an approval request and its buttons stay valid (LOOPBREAKER_APPROVAL_TTL), at most 24h."
  default     = "30m"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d)$", var.approval_ttl))
    error_message = "approval_ttl must be a duration with a unit, such as 30m or 2h."
  }
}

variable "approvers" {
  type        = list(string)
  description = "Slack user ids and/or Google Chat emails who may approve or reject a remediation; empty turns approvals off, and with them on_remediation_request and every remediation grant."
  default     = []

  validation {
    condition     = alltrue([for approver in var.approvers : can(regex("^([UW][A-Z0-9]{2,}|[^@\\s,]+@[^@\\s,]+\\.[^@\\s,]+)$", approver))])
    error_message = "Each approver must be a Slack user id (U0123ABCD) or an email address."
  }
}

variable "build_service_account" {
  type        = string
  description = "Email of the service account Cloud Build builds the functions as; null uses the project's default build service account."
  default     = null

  validation {
    condition     = var.build_service_account == null || can(regex("^[^@\\s]+@[^@\\s]+\\.iam\\.gserviceaccount\\.com$", var.build_service_account))
    error_message = "build_service_account must be a service account email."
  }
}

variable "chat_action_min_instances" {
  type        = number
  description = "Instances of on_chat_action kept warm so a click is answered within Slack's 3 seconds; 0 accepts a cold start now and then."
  default     = 0

  validation {
    condition     = var.chat_action_min_instances >= 0 && var.chat_action_min_instances <= 10 && floor(var.chat_action_min_instances) == var.chat_action_min_instances
    error_message = "chat_action_min_instances must be a whole number between 0 and 10."
  }
}

variable "clusters" {
  type        = list(string)
  description = "GKE clusters whose entries the log sinks take (by resource.labels.cluster_name; Compute Engine entries by the node VM name prefix gke-<cluster>-); empty takes every cluster the sinks see."
  default     = []

  validation {
    condition     = alltrue([for cluster in var.clusters : can(regex("^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$", cluster))])
    error_message = "Each cluster must be a GKE cluster name: 1-40 lowercase letters, digits and hyphens, starting with a letter."
  }
}

variable "create_firestore_database" {
  type        = bool
  description = "Whether to create the Firestore database; false when it exists already."
  default     = true
}

variable "dedup_retention" {
  type        = string
  description = "How long delivery dedup keys are kept before their Firestore TTL deletes them (LOOPBREAKER_DEDUP_RETENTION), at least 1d."
  default     = "8d"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d)$", var.dedup_retention))
    error_message = "dedup_retention must be a duration with a unit, such as 8d."
  }
}

variable "drain_mode" {
  type        = string
  description = "What a drain does with pods a PodDisruptionBudget keeps: wait, or delete-after-timeout (LOOPBREAKER_DRAIN_MODE; only this grants container.pods.delete)."
  default     = "wait"

  validation {
    condition     = contains(["wait", "delete-after-timeout"], var.drain_mode)
    error_message = "drain_mode must be wait or delete-after-timeout."
  }
}

variable "drain_timeout" {
  type        = string
  description = "How long a drain may take in all, across redeliveries (LOOPBREAKER_DRAIN_TIMEOUT)."
  default     = "10m"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d)$", var.drain_timeout))
    error_message = "drain_timeout must be a duration with a unit, such as 10m."
  }
}

variable "dry_run" {
  type        = bool
  description = "Whether remediation only records the calls it would make (LOOPBREAKER_DRY_RUN); set false to let it cordon, drain and delete VMs."
  default     = true
}

variable "enable_alertmanager_webhook" {
  type        = bool
  description = "Whether to deploy on_alertmanager_webhook, the HTTP endpoint for Alertmanager (deploy/prometheus/alertmanager-config.yaml, docs/prometheus.md) and Cloud Monitoring webhook channels; it accepts the alert-webhook-token secret as a bearer token."
  default     = false
}

variable "enable_apis" {
  type        = bool
  description = "Whether to enable the project services the module uses (never disabled on destroy)."
  default     = true
}

variable "firestore_database" {
  type        = string
  description = "Firestore database id of the incident store (LOOPBREAKER_FIRESTORE_DATABASE)."
  default     = "(default)"

  validation {
    condition     = var.firestore_database == "(default)" || can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", var.firestore_database))
    error_message = "firestore_database must be (default) or 4-63 lowercase letters, digits and hyphens."
  }
}

variable "firestore_location" {
  type        = string
  description = "Location of a created Firestore database, such as nam5 or us-central1; null uses var.region."
  default     = null
}

variable "foreign_remediation_markers" {
  type        = list(string)
  description = "Labels, annotations and taints other remediators leave on a node they handle, as [SYSTEM:]label|annotation|taint:KEY[=VALUE] (LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS); remediation refuses such a node."
  default     = []

  validation {
    condition     = alltrue([for marker in var.foreign_remediation_markers : can(regex("^([A-Za-z0-9][A-Za-z0-9_ .-]*:)?(label|annotation|taint):[^\\s,:=]+(=[^,]+)?$", marker))])
    error_message = "Each foreign_remediation_markers entry must be [SYSTEM:]label|annotation|taint:KEY[=VALUE], such as NVSentinel:label:dgxc.nvidia.com/nvsentinel-state."
  }
}

variable "google_chat_audience" {
  type        = string
  description = "Audience of Google Chat's bearer tokens: the Chat app's project number, when its Authentication Audience is Project Number; null uses the on_chat_action URL (Authentication Audience: HTTP endpoint URL)."
  default     = null
}

variable "google_chat_space" {
  type        = string
  description = "Google Chat space (spaces/NAME) the Chat app posts incident cards to, with notifier = google-chat."
  default     = null

  validation {
    condition     = var.google_chat_space == null || can(regex("^spaces/[A-Za-z0-9_-]+$", var.google_chat_space))
    error_message = "google_chat_space must look like spaces/AAAA1234."
  }
}

variable "grouping_window" {
  type        = string
  description = "Signals of one key within this gap of an incident join it (LOOPBREAKER_GROUPING_WINDOW)."
  default     = "30m"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d)$", var.grouping_window))
    error_message = "grouping_window must be a duration with a unit, such as 30m."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels added to every resource that takes labels."
  default     = {}
}

variable "live_sources" {
  type        = bool
  description = "Whether diagnoses query Managed Prometheus, Cloud Logging and the GKE API (LOOPBREAKER_LIVE_SOURCES), with read-only roles for on_schedule."
  default     = true
}

variable "log_entry_max_instances" {
  type        = number
  description = "Most instances of on_log_entry at once, which bounds concurrent Firestore writes during a storm."
  default     = 20

  validation {
    condition     = var.log_entry_max_instances >= 1 && var.log_entry_max_instances <= 1000 && floor(var.log_entry_max_instances) == var.log_entry_max_instances
    error_message = "log_entry_max_instances must be a whole number between 1 and 1000."
  }
}

variable "log_level" {
  type        = string
  description = "Log level of every function (LOOPBREAKER_LOG_LEVEL)."
  default     = "INFO"

  validation {
    condition     = contains(["DEBUG", "INFO", "WARNING", "ERROR"], var.log_level)
    error_message = "log_level must be DEBUG, INFO, WARNING or ERROR."
  }
}

variable "max_deletions_per_hour" {
  type        = number
  description = "VM deletions per cluster in any hour before remediation refuses (LOOPBREAKER_MAX_DELETIONS_PER_HOUR)."
  default     = 2

  validation {
    condition     = var.max_deletions_per_hour >= 0 && var.max_deletions_per_hour <= 100 && floor(var.max_deletions_per_hour) == var.max_deletions_per_hour
    error_message = "max_deletions_per_hour must be a whole number between 0 and 100."
  }
}

variable "max_delivery_attempts" {
  type        = number
  description = "Deliveries of one message to on_log_entry or on_remediation_request before Pub/Sub moves it to the dead-letter topic."
  default     = 10

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100 && floor(var.max_delivery_attempts) == var.max_delivery_attempts
    error_message = "max_delivery_attempts must be a whole number between 5 and 100 (Pub/Sub's limits)."
  }
}

variable "max_signals" {
  type        = number
  description = "Signals kept verbatim per incident (LOOPBREAKER_MAX_SIGNALS); counts stay exact beyond it."
  default     = 500

  validation {
    condition     = var.max_signals >= 1 && var.max_signals <= 10000 && floor(var.max_signals) == var.max_signals
    error_message = "max_signals must be a whole number between 1 and 10000."
  }
}

variable "max_unready_share" {
  type        = number
  description = "Circuit breaker: remediation refuses when more than this share (0-1) of the node pool is NotReady (LOOPBREAKER_MAX_UNREADY_SHARE)."
  default     = 0.3

  validation {
    condition     = var.max_unready_share >= 0 && var.max_unready_share <= 1
    error_message = "max_unready_share must be between 0 and 1."
  }
}

variable "message_retention_duration" {
  type        = string
  description = "How long the topics and the dead-letter subscription keep messages, in seconds such as 604800s (7 days, the most a subscription keeps)."
  default     = "604800s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.message_retention_duration)) && try(tonumber(trimsuffix(var.message_retention_duration, "s")) >= 600 && tonumber(trimsuffix(var.message_retention_duration, "s")) <= 604800, false)
    error_message = "message_retention_duration must be between 600s and 604800s."
  }
}

variable "metric_propagation_wait" {
  type        = string
  description = "How long the alert policies on the log-based metrics wait after the metrics are created, on the first apply only (Cloud Monitoring may take up to 10 minutes to know a new metric)."
  default     = "10m"

  validation {
    condition     = can(regex("^[0-9]+(s|m)$", var.metric_propagation_wait))
    error_message = "metric_propagation_wait must be a duration in seconds or minutes, such as 10m or 90s."
  }
}

variable "node_pools" {
  type        = list(string)
  description = "Node pools remediation may touch (LOOPBREAKER_NODE_POOLS); empty means all."
  default     = []
}

variable "notification_channels" {
  type        = list(string)
  description = "Cloud Monitoring notification channel ids (projects/P/notificationChannels/N) the alert policies notify."
  default     = []

  validation {
    condition     = alltrue([for channel in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", channel))])
    error_message = "Each notification channel must be projects/PROJECT/notificationChannels/ID."
  }
}

variable "notifier" {
  type        = string
  description = "Where incident messages go: slack, google-chat (a space, through the Chat API) or log (LOOPBREAKER_NOTIFIER)."
  default     = "log"

  validation {
    condition     = contains(["slack", "google-chat", "log"], var.notifier)
    error_message = "notifier must be slack, google-chat or log."
  }
}

variable "prefix" {
  type        = string
  description = "Prefix of every resource name and of the Firestore collections; null for none."
  default     = "loopbreaker"
  nullable    = true

  validation {
    condition     = var.prefix == null || can(regex("^[a-z]([a-z0-9-]{0,15}[a-z0-9])?$", var.prefix))
    error_message = "prefix must be 1-17 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (service account ids are at most 30 characters)."
  }
}

variable "project_id" {
  type        = string
  description = "Project that hosts the functions, topics and store, and the GKE clusters to watch unless workload_projects names others."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project id (6-30 lowercase letters, digits and hyphens)."
  }
}

variable "prometheus_bearer_token_secret" {
  type        = string
  description = "Existing Secret Manager secret (its id in project_id, or projects/P/secrets/S) whose latest version on_schedule sends to prometheus_url as a bearer token (LOOPBREAKER_PROMETHEUS_BEARER_TOKEN); the module grants it secretAccessor on that secret only. Not with prometheus_password_secret."
  default     = null

  validation {
    condition     = var.prometheus_bearer_token_secret == null || can(regex("^(projects/[^/]+/secrets/)?[A-Za-z0-9_-]{1,255}$", coalesce(var.prometheus_bearer_token_secret, "-")))
    error_message = "prometheus_bearer_token_secret must be a secret id or projects/P/secrets/S."
  }
}

variable "prometheus_cluster_label" {
  type        = string
  description = "The label that names the cluster on prometheus_url's series (cluster, cluster_name, ...), or none for a Prometheus of one cluster (LOOPBREAKER_PROMETHEUS_CLUSTER_LABEL); null: found out from the server."
  default     = null

  validation {
    condition     = var.prometheus_cluster_label == null || can(regex("^(none|[a-zA-Z][a-zA-Z0-9_]*|_[a-zA-Z0-9][a-zA-Z0-9_]*)$", coalesce(var.prometheus_cluster_label, "-")))
    error_message = "prometheus_cluster_label must be a Prometheus label name (not starting with __) or none."
  }
}

variable "prometheus_password_secret" {
  type        = string
  description = "Existing Secret Manager secret (its id in project_id, or projects/P/secrets/S) whose latest version is the basic-auth password of prometheus_username (LOOPBREAKER_PROMETHEUS_PASSWORD); the module grants on_schedule secretAccessor on that secret only."
  default     = null

  validation {
    condition     = var.prometheus_password_secret == null || can(regex("^(projects/[^/]+/secrets/)?[A-Za-z0-9_-]{1,255}$", coalesce(var.prometheus_password_secret, "-")))
    error_message = "prometheus_password_secret must be a secret id or projects/P/secrets/S."
  }
}

variable "prometheus_url" {
  type        = string
  description = "Base URL of a self-run Prometheus (kube-prometheus-stack) that on_schedule reads metrics from instead of Managed Prometheus (LOOPBREAKER_PROMETHEUS_URL); it must be reachable through vpc_connector (an internal load balancer, not a cluster-local Service name). null: Managed Prometheus."
  default     = null

  validation {
    condition     = var.prometheus_url == null || can(regex("^https?://[^/?#@[:space:]]+(/[^?#[:space:]]*)?$", coalesce(var.prometheus_url, "-")))
    error_message = "prometheus_url must be an http(s) base URL without credentials, query or fragment."
  }
}

variable "prometheus_username" {
  type        = string
  description = "Basic-auth user for prometheus_url (LOOPBREAKER_PROMETHEUS_USERNAME), with prometheus_password_secret."
  default     = null
}

variable "query_budget" {
  type        = number
  description = "PromQL and Logging queries one diagnosis of one incident may run (LOOPBREAKER_QUERY_BUDGET)."
  default     = 16

  validation {
    condition     = var.query_budget >= 0 && var.query_budget <= 1000 && floor(var.query_budget) == var.query_budget
    error_message = "query_budget must be a whole number between 0 and 1000."
  }
}

variable "region" {
  type        = string
  description = "Region of the functions, the scheduler job and the source bucket."

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a region such as us-central1."
  }
}

variable "repair_path" {
  type        = string
  description = "How an approved bad host is repaired (LOOPBREAKER_REPAIR_PATH): auto (GKE's report-and-replace where the node qualifies, else delete), gke, report (reportHostAsFaulty) or delete. Grants compute.instances.delete for auto and delete, compute.instances.reportHostAsFaulty for report, neither for gke; gke needs no pods.evict either."
  default     = "auto"

  validation {
    condition     = contains(["auto", "gke", "report", "delete"], var.repair_path)
    error_message = "repair_path must be auto, gke, report or delete."
  }
}

variable "report_disruption_schedule" {
  type        = string
  description = "reportHostAsFaulty's disruption schedule on the report path; Compute accepts only immediate today (LOOPBREAKER_REPORT_DISRUPTION_SCHEDULE)."
  default     = "immediate"

  validation {
    condition     = contains(["immediate"], var.report_disruption_schedule)
    error_message = "report_disruption_schedule must be immediate: Compute's reportHostAsFaulty allows only IMMEDIATE."
  }
}

variable "routes" {
  type        = string
  description = "A route file's YAML content, read with file() (LOOPBREAKER_ROUTES, to the functions that post to chat): which channel or space each incident goes to and who may approve its repairs, by project, cluster, namespace, workload and cause; null: every incident goes to slack_channel or google_chat_space and approvers. A route's approvers replace approvers for its repairs, but approvals (and the remediation path) are deployed only with approvers set."
  default     = null

  validation {
    condition     = var.routes == null || can(keys(yamldecode(coalesce(var.routes, "{}"))))
    error_message = "routes must be the YAML content of a route file (a mapping), not its path: the functions cannot read a file of the machine that applies."
  }
}

variable "settle_batch" {
  type        = number
  description = "Incidents diagnosed per on_schedule call (LOOPBREAKER_SETTLE_BATCH)."
  default     = 25

  validation {
    condition     = var.settle_batch >= 1 && var.settle_batch <= 1000 && floor(var.settle_batch) == var.settle_batch
    error_message = "settle_batch must be a whole number between 1 and 1000."
  }
}

variable "settle_time" {
  type        = string
  description = "An incident is diagnosed once no signal arrived for this long (LOOPBREAKER_SETTLE_TIME)."
  default     = "60s"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d)$", var.settle_time))
    error_message = "settle_time must be a duration with a unit, such as 60s."
  }
}

variable "sink_folder" {
  type        = string
  description = "Folder (folders/ID or ID) whose log sinks feed the responder, with sink_scope = folder."
  default     = null

  validation {
    condition     = var.sink_folder == null || can(regex("^(folders/)?[0-9]+$", var.sink_folder))
    error_message = "sink_folder must be folders/ID or a numeric folder id."
  }
}

variable "sink_organization" {
  type        = string
  description = "Numeric organization id whose log sinks feed the responder, with sink_scope = organization."
  default     = null

  validation {
    condition     = var.sink_organization == null || can(regex("^[0-9]+$", var.sink_organization))
    error_message = "sink_organization must be a numeric organization id."
  }
}

variable "sink_scope" {
  type        = string
  description = "Where the log sinks are created: project (var.project_id, when it is the only workload project), folder (var.sink_folder, with children) or organization (var.sink_organization, with children)."
  default     = "project"

  validation {
    condition     = contains(["project", "folder", "organization"], var.sink_scope)
    error_message = "sink_scope must be project, folder or organization."
  }
}

variable "slack_bot_token" {
  type        = string
  description = "Slack app bot token (xoxb-...); required with notifier = slack (stored as a secret version, and in the state)."
  default     = null
  sensitive   = true

  validation {
    condition     = var.slack_bot_token == null || startswith(coalesce(var.slack_bot_token, "-"), "xoxb-")
    error_message = "slack_bot_token must be a bot token (xoxb-...), not a user or app-level token."
  }
}

variable "slack_channel" {
  type        = string
  description = "Slack channel id incident messages go to, with notifier = slack (LOOPBREAKER_SLACK_CHANNEL)."
  default     = null

  validation {
    condition     = var.slack_channel == null || can(regex("^[A-Z0-9]+$", var.slack_channel))
    error_message = "slack_channel must be a channel id such as C0123456789, not a #name."
  }
}

variable "slack_signing_secret" {
  type        = string
  description = "Slack app signing secret that verifies button clicks; required with notifier = slack and approvers (stored as a secret version, and in the state)."
  default     = null
  sensitive   = true
}

variable "stale_after" {
  type        = string
  description = "An incident awaiting approval longer than this expires (LOOPBREAKER_STALE_AFTER)."
  default     = "6h"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d)$", var.stale_after))
    error_message = "stale_after must be a duration with a unit, such as 6h."
  }
}

variable "support_classification" {
  type        = string
  description = "Cloud Support case classification id (LOOPBREAKER_SUPPORT_CLASSIFICATION); null takes the first Compute Engine one."
  default     = null
}

variable "support_parent" {
  type        = string
  description = "projects/P or organizations/O to file Cloud Support cases under (LOOPBREAKER_SUPPORT_PARENT); null keeps the ticket draft on the incident."
  default     = null

  validation {
    condition     = var.support_parent == null || can(regex("^(projects|organizations)/[A-Za-z0-9_.:-]+$", var.support_parent))
    error_message = "support_parent must be projects/P or organizations/O."
  }
}

variable "vpc_connector" {
  type        = string
  description = "Serverless VPC Access connector (projects/P/locations/R/connectors/C) for on_schedule and on_remediation_request to reach private GKE control planes; null for none."
  default     = null

  validation {
    condition     = var.vpc_connector == null || can(regex("^projects/[^/]+/locations/[^/]+/connectors/[^/]+$", var.vpc_connector))
    error_message = "vpc_connector must be projects/PROJECT/locations/REGION/connectors/NAME."
  }
}

variable "workload_kind" {
  type        = string
  description = "Kind of a workload whose signals do not say (LOOPBREAKER_WORKLOAD_KIND): jobset, tfjob or pytorchjob."
  default     = "jobset"

  validation {
    condition     = contains(["jobset", "tfjob", "pytorchjob"], var.workload_kind)
    error_message = "workload_kind must be jobset, tfjob or pytorchjob."
  }
}

variable "workload_projects" {
  type        = list(string)
  description = "Projects whose GKE workloads the responder serves (LOOPBREAKER_PROJECTS); an entry from any other project opens no incident and takes no action. In each: the diagnosis roles for on_schedule (live_sources) and, with approvers, the remediation roles for on_remediation_request; each one other than project_id joins project_id's Monitoring metrics scope. Entries of projects other than project_id arrive through folder or organization sinks (sink_scope). Empty: project_id alone."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for project in var.workload_projects : can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", project))])
    error_message = "Each workload project must be a project id (6-30 lowercase letters, digits and hyphens), not a name or number."
  }

  validation {
    condition     = length(distinct(var.workload_projects)) == length(var.workload_projects)
    error_message = "workload_projects lists a project twice."
  }
}
