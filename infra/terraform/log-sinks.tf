# One sink per filter of log-filters.json, at the scope var.sink_scope names; all publish
# to the log_events topic. Folder and organization sinks include their children, so one
# deployment sees every project below them; diagnosis and remediation permissions are
# granted in the workload projects only (projects.tf), and the responder ignores entries
# of any other project (README, "Workload projects"). Project sinks are created in
# project_id alone, so they serve a deployment whose only workload project is project_id.

locals {
  # var.clusters narrows every filter, which log-filters.json keeps cluster-blind. Entries
  # of GKE resources (k8s_container, k8s_pod, k8s_node, k8s_cluster, gke_nodepool) carry
  # resource.labels.cluster_name. Compute Engine audit entries (gce_instance) name no
  # cluster, only the VM (protoPayload.resourceName = projects/P/zones/Z/instances/NAME),
  # and GKE names node VMs gke-<cluster>-<pool>-<hash>-<suffix>, shortening the cluster
  # part of long names to at least its first 14 characters: a cluster of up to 14
  # characters is matched by "/instances/gke-<cluster>-", a longer one by its first 14
  # (which another cluster sharing them would match too).
  cluster_clause = join(" OR ", [for cluster in var.clusters : "\"${cluster}\""])
  vm_prefixes = [
    for cluster in var.clusters : length(cluster) <= 14 ? "/instances/gke-${cluster}-" : "/instances/gke-${substr(cluster, 0, 14)}"
  ]
  vm_clause = join(" OR ", [for prefix in local.vm_prefixes : "protoPayload.resourceName:\"${prefix}\""])

  # Sink name => the filter it uses: the generated one whole (empty clusters), or in
  # parentheses AND the clause for its resource types.
  sink_filters = {
    for name, filter in local.log_filters : name => (
      length(var.clusters) == 0 ? filter : (
        strcontains(filter, "gce_instance")
        ? "(${filter})\nAND (${local.vm_clause})"
        : "(${filter})\nAND resource.labels.cluster_name=(${local.cluster_clause})"
      )
    )
  }

  sinks = merge(
    google_logging_project_sink.this,
    google_logging_folder_sink.this,
    google_logging_organization_sink.this,
  )
}

resource "google_logging_project_sink" "this" {
  for_each = var.sink_scope == "project" ? local.sink_filters : {}

  project                = var.project_id
  name                   = "${local.name_prefix}${each.key}"
  description            = "loopbreaker: ${each.key} entries to Pub/Sub (generated filter)."
  destination            = "pubsub.googleapis.com/${google_pubsub_topic.log_events.id}"
  filter                 = each.value
  unique_writer_identity = true

  lifecycle {
    # Entries of the other workload projects would never arrive: fail the plan instead.
    precondition {
      condition     = alltrue([for project in local.workload_projects : project == var.project_id])
      error_message = "sink_scope = \"project\" takes entries of project_id only: with other workload_projects, use sink_scope = \"folder\" or \"organization\" (a sink above them all)."
    }
  }
}

resource "google_logging_folder_sink" "this" {
  for_each = var.sink_scope == "folder" ? local.sink_filters : {}

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
  for_each = var.sink_scope == "organization" ? local.sink_filters : {}

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

# A sink's writer identity is a Google-managed account that IAM may not know for a moment
# after the sink is created. The grant reads each identity from here, so it waits; a new
# sink (another scope) waits again, an unchanged one never.
resource "time_sleep" "sink_writers" {
  create_duration = "60s"

  triggers = { for name, sink in local.sinks : name => sink.writer_identity }
}

# Each active sink's own writer identity may publish to log_events, and to nothing else.
resource "google_pubsub_topic_iam_member" "sink_writer" {
  for_each = local.sink_filters

  project = var.project_id
  topic   = google_pubsub_topic.log_events.id
  role    = "roles/pubsub.publisher"
  member  = time_sleep.sink_writers.triggers[each.key]
}
