# Least privilege, one service account per function, each grant switched on by the input
# that needs it:
#
#   function                 store  remediation topic        diagnosis (read)  nodes and VMs
#   on_log_entry             yes    -                        -                 -
#   on_schedule              yes    publish (with approvers) live_sources      -
#   on_chat_action           yes    publish (with approvers) -                 -
#   on_remediation_request   yes    -                        -                 custom roles (below)
#   on_alertmanager_webhook  yes    -                        -                 -
#
# The diagnosis roles and the custom roles are granted in every workload project
# (projects.tf), the rest in project_id. on_remediation_request is deployed only with
# approvers. No basic role (owner, editor, viewer) is granted anywhere.

resource "google_service_account" "functions" {
  for_each = local.deployed

  project      = var.project_id
  account_id   = "${local.name_prefix}${each.value.account}"
  display_name = "loopbreaker ${each.key}"
  description  = "Runtime identity of the ${each.key} Cloud Function."

  depends_on = [google_project_service.this]
}

# Cloud Scheduler calls on_schedule with an OIDC token of this account.
resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${local.name_prefix}scheduler"
  display_name = "loopbreaker scheduler"
  description  = "Cloud Scheduler identity that invokes on_schedule every minute."

  depends_on = [google_project_service.this]
}

# The push subscriptions of on_log_entry and on_remediation_request (pubsub.tf) send an
# OIDC token of this account.
resource "google_service_account" "trigger" {
  project      = var.project_id
  account_id   = "${local.name_prefix}trigger"
  display_name = "loopbreaker Pub/Sub push"
  description  = "Identity of the Pub/Sub push subscriptions; may only invoke the pushed functions."

  depends_on = [google_project_service.this]
}

# --- the Pub/Sub service agent -------------------------------------------------------------

# A project's Pub/Sub service agent (service-NUMBER@gcp-sa-pubsub...) may not exist yet on
# a new project: create it, so the grants below never name an account that is not there.
resource "google_project_service_identity" "pubsub" {
  provider = google-beta

  project = var.project_id
  service = "pubsub.googleapis.com"

  depends_on = [google_project_service.this]
}

# IAM is eventually consistent: a grant to a service agent created a moment ago can be
# refused ("does not exist") until it has propagated. The grants read the member from
# here, so they wait; a new agent (another project) waits again.
resource "time_sleep" "pubsub_agent" {
  create_duration = "60s"

  triggers = {
    member = google_project_service_identity.pubsub.member
  }
}

# The agent mints the push account's OIDC tokens (needed in projects created before
# April 2021; harmless in newer ones).
resource "google_service_account_iam_member" "trigger_token_creator" {
  service_account_id = google_service_account.trigger.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = time_sleep.pubsub_agent.triggers["member"]
}

# --- the incident store ------------------------------------------------------------------

# Every function reads and writes incidents; the grant is limited to the one database.
resource "google_project_iam_member" "datastore_user" {
  for_each = local.deployed

  project = var.project_id
  role    = "roles/datastore.user"
  member  = "serviceAccount:${google_service_account.functions[each.key].email}"

  condition {
    title       = "loopbreaker-database"
    description = "Only the loopbreaker Firestore database."
    expression  = "resource.name == \"projects/${var.project_id}/databases/${local.firestore_database}\""
  }
}

# --- remediation -------------------------------------------------------------------------

locals {
  # Permission => whether the settings need it. on_remediation_request re-reads the node
  # and cordons it (nodes), evicts its pods (policy/v1 evictions honour
  # PodDisruptionBudgets) and, with drain_mode = "delete-after-timeout" only, deletes the
  # pods a budget still holds at the timeout; it waits for the VM's zone operation.
  remediation_permissions = {
    "compute.zoneOperations.get" = true
    "container.clusters.get"     = true
    "container.nodes.get"        = true
    "container.nodes.list"       = true
    "container.nodes.update"     = true
    # The gke path leaves the eviction to GKE's report-and-replace.
    "container.pods.evict"  = var.repair_path != "gke"
    "container.pods.list"   = true
    "container.pods.delete" = var.drain_mode == "delete-after-timeout"
    # An events.k8s.io/v1 Event on the node for every step taken or refused.
    "container.events.create" = true
  }
  # On the VM it re-reads it (the gke path: whether it is reservation-bound), then deletes
  # it (repair_path "delete", or "auto" where GKE's report-and-replace does not apply) or
  # reports its host as faulty ("report"), never both; on the gke path GKE reports it.
  remediation_vm_permissions = {
    "compute.instances.get"                = true
    "compute.instances.delete"             = contains(["auto", "delete"], var.repair_path)
    "compute.instances.reportHostAsFaulty" = var.repair_path == "report"
  }
  # IAM conditions see a Compute Engine instance as projects/P/zones/Z/instances/NAME; GKE
  # names every node VM gke-<cluster>-<pool>-<hash>-<suffix>. Per workload project.
  gke_instances_only = {
    for project in local.remediation_projects : project => join(" && ", [
      "resource.type == \"compute.googleapis.com/Instance\"",
      "resource.name.startsWith(\"projects/${project}/zones/\")",
      "resource.name.extract(\"/instances/{name}\").startsWith(\"gke-\")",
    ])
  }
}

# What on_remediation_request needs beside the VM: the node, its pods, the VM's operation.
# A custom role is a resource of one project, so each workload project gets its own.
resource "google_project_iam_custom_role" "remediation" {
  for_each = local.remediation_projects

  project     = each.value
  role_id     = "${local.role_prefix}remediation"
  title       = "loopbreaker remediation"
  description = "Cordon and drain one approved GKE node, and wait for its VM's operation (loopbreaker on_remediation_request)."
  stage       = "GA"
  permissions = sort([for permission, needed in local.remediation_permissions : permission if needed])
}

# What it needs on the VM, granted on GKE node VMs only (the condition below).
resource "google_project_iam_custom_role" "remediation_vm" {
  for_each = local.remediation_projects

  project     = each.value
  role_id     = "${local.role_prefix}remediation_vm"
  title       = "loopbreaker remediation (GKE node VMs)"
  description = "Read, and delete or report the host of, one approved GKE node VM (loopbreaker on_remediation_request)."
  stage       = "GA"
  permissions = sort([for permission, needed in local.remediation_vm_permissions : permission if needed])
}

# The only holder of the custom roles: the remediation function's own account, each
# project's roles in that project.
resource "google_project_iam_member" "remediation" {
  for_each = local.remediation_projects

  project = each.value
  role    = google_project_iam_custom_role.remediation[each.key].id
  member  = "serviceAccount:${google_service_account.functions["on_remediation_request"].email}"
}

resource "google_project_iam_member" "remediation_vm" {
  for_each = local.remediation_projects

  project = each.value
  role    = google_project_iam_custom_role.remediation_vm[each.key].id
  member  = "serviceAccount:${google_service_account.functions["on_remediation_request"].email}"

  condition {
    title       = "gke-node-vms"
    description = "Compute Engine instances of this project whose name starts with gke- (GKE node VMs)."
    expression  = local.gke_instances_only[each.key]
  }
}

# Filing the support case (LOOPBREAKER_SUPPORT_PARENT = projects/P). For an organization
# parent, grant roles/cloudsupport.techSupportEditor on the organization by hand. Not per
# workload project: every case is filed under that one parent, whichever project the
# host is in, so P is the only project that needs the role.
resource "google_project_iam_member" "support" {
  for_each = local.approvals && startswith(coalesce(var.support_parent, "-"), "projects/") ? toset([trimprefix(coalesce(var.support_parent, "-"), "projects/")]) : toset([])

  project = each.value
  role    = "roles/cloudsupport.techSupportEditor"
  member  = "serviceAccount:${google_service_account.functions["on_remediation_request"].email}"
}

# Approved requests (on_chat_action) and requests whose publish failed (on_schedule, once
# 30 s later) go to the remediation topic: publisher there, nowhere else, with approvers.
resource "google_pubsub_topic_iam_member" "remediation_publisher" {
  for_each = { for name, fn in local.deployed : name => fn if fn.approvals && local.approvals }

  project = var.project_id
  topic   = google_pubsub_topic.remediation.id
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.functions[each.key].email}"
}

# --- diagnosis (read only) ---------------------------------------------------------------

# on_schedule diagnoses with live sources, in each workload project: the read-only roles of
# local.diagnosis_roles (projects.tf), which also settle the repair path (the VM's host and
# provisioning model) before an approval is asked for; and monitoring.viewer on project_id
# to read its metrics scope (monitoring.tf) when project_id is not a workload project.
resource "google_project_iam_member" "diagnosis" {
  for_each = local.diagnosis_grants

  project = each.value.project
  role    = each.value.role
  member  = "serviceAccount:${google_service_account.functions["on_schedule"].email}"
}

# --- secrets -------------------------------------------------------------------------------

# Each function may read only the secrets it is given (local.function_secrets).
resource "google_secret_manager_secret_iam_member" "accessor" {
  for_each = local.secret_grants

  project   = var.project_id
  secret_id = google_secret_manager_secret.this[each.value.secret].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.functions[each.value.function].email}"
}

# --- build -----------------------------------------------------------------------------------

# A dedicated Cloud Build account (var.build_service_account) must read the bundle; it
# also needs roles/logging.logWriter and roles/artifactregistry.writer (README).
resource "google_storage_bucket_iam_member" "build_source_reader" {
  for_each = var.build_service_account == null ? toset([]) : toset([var.build_service_account])

  bucket = google_storage_bucket.source.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${each.value}"
}
