# Least privilege, one service account per function:
#
#   function                 store  remediation topic  diagnosis (read)  nodes and VMs
#   on_log_entry             yes    -                  -                 -
#   on_schedule              yes    publish            yes               -
#   on_chat_action           yes    publish            -                 -
#   on_remediation_request   yes    -                  -                 custom role
#   on_alertmanager_webhook  yes    -                  -                 -
#
# No basic role (owner, editor, viewer) is granted anywhere.

resource "google_service_account" "functions" {
  for_each = { for name, fn in local.functions : name => fn if fn.deploy }

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

# The Eventarc triggers of on_log_entry and on_remediation_request push as this account.
resource "google_service_account" "trigger" {
  project      = var.project_id
  account_id   = "${local.name_prefix}trigger"
  display_name = "loopbreaker Eventarc triggers"
  description  = "Identity of the Eventarc Pub/Sub triggers; may only invoke the event functions."

  depends_on = [google_project_service.this]
}

# Pub/Sub mints the trigger account's OIDC tokens for the push to the function.
resource "google_service_account_iam_member" "trigger_token_creator" {
  service_account_id = google_service_account.trigger.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:${local.pubsub_service_agent}"
}

# --- the incident store ------------------------------------------------------------------

# Every function reads and writes incidents; the grant is limited to the one database.
resource "google_project_iam_member" "datastore_user" {
  for_each = { for name, fn in local.functions : name => fn if fn.deploy }

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

# What on_remediation_request needs, and nothing more: re-check the node and VM, cordon,
# evict or delete pods, delete the VM (or report its host) and wait for the operation.
resource "google_project_iam_custom_role" "remediation" {
  project     = var.project_id
  role_id     = "${local.role_prefix}remediation"
  title       = "loopbreaker remediation"
  description = "Cordon, drain and delete one approved GKE node VM (loopbreaker on_remediation_request)."
  stage       = "GA"
  permissions = [
    "compute.instances.delete",
    "compute.instances.get",
    "compute.instances.reportHostAsFaulty",
    "compute.zoneOperations.get",
    "container.clusters.get",
    "container.nodes.get",
    "container.nodes.list",
    "container.nodes.update",
    "container.pods.delete",
    "container.pods.evict",
    "container.pods.list",
  ]
}

# The only holder of the custom role: the remediation function's own account.
resource "google_project_iam_member" "remediation" {
  project = var.project_id
  role    = google_project_iam_custom_role.remediation.id
  member  = "serviceAccount:${google_service_account.functions["on_remediation_request"].email}"
}

# Filing the support case (LOOPBREAKER_SUPPORT_PARENT = projects/P). For an organization
# parent, grant roles/cloudsupport.techSupportEditor on the organization by hand.
resource "google_project_iam_member" "support" {
  for_each = startswith(coalesce(var.support_parent, "-"), "projects/") ? toset([trimprefix(coalesce(var.support_parent, "-"), "projects/")]) : toset([])

  project = each.value
  role    = "roles/cloudsupport.techSupportEditor"
  member  = "serviceAccount:${google_service_account.functions["on_remediation_request"].email}"
}

# Approved requests (on_chat_action) and requests whose publish failed (on_schedule, once
# 30 s later) go to the remediation topic: publisher there, nowhere else.
resource "google_pubsub_topic_iam_member" "remediation_publisher" {
  for_each = { for name, fn in local.functions : name => fn if fn.deploy && fn.approvals }

  project = var.project_id
  topic   = google_pubsub_topic.remediation.id
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.functions[each.key].email}"
}

# --- diagnosis (read only) ---------------------------------------------------------------

# on_schedule diagnoses with live sources: Managed Prometheus (monitoring.viewer), Cloud
# Logging (logging.viewer), the GKE API for nodes and pods (container.viewer: read-only,
# no Secrets), and the VM's physical host (compute.viewer).
resource "google_project_iam_member" "diagnosis" {
  for_each = var.live_sources ? toset([
    "roles/compute.viewer",
    "roles/container.viewer",
    "roles/logging.viewer",
    "roles/monitoring.viewer",
  ]) : toset([])

  project = var.project_id
  role    = each.value
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
