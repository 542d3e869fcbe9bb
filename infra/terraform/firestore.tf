locals {
  # The database id the functions use (LOOPBREAKER_FIRESTORE_DATABASE); a reference to
  # the created database, so nothing that uses it is created before it.
  firestore_database = try(google_firestore_database.this[0].name, var.firestore_database)
}

# The incident store. Skip it (create_firestore_database = false) when the project's
# database already exists: a project has one "(default)" database, created once.
resource "google_firestore_database" "this" {
  count = var.create_firestore_database ? 1 : 0

  project     = var.project_id
  name        = var.firestore_database
  location_id = coalesce(var.firestore_location, var.region)
  type        = "FIRESTORE_NATIVE"
  # The store never holds transaction locks: every write is one commit with update-time
  # preconditions, re-made on a conflict.
  concurrency_mode                  = "OPTIMISTIC"
  app_engine_integration_mode       = "DISABLED"
  point_in_time_recovery_enablement = "POINT_IN_TIME_RECOVERY_ENABLED"
  delete_protection_state           = "DELETE_PROTECTION_ENABLED"
  # terraform destroy leaves the incidents (and their audit trails) in place.
  deletion_policy = "ABANDON"

  depends_on = [google_project_service.this]
}

# Delivery dedup keys carry expire_at (now + LOOPBREAKER_DEDUP_RETENTION); Firestore
# deletes them after it. The field needs no index: nothing queries it, and an index on a
# steadily increasing timestamp would only slow the writes of a storm.
resource "google_firestore_field" "dedup_ttl" {
  project    = var.project_id
  database   = local.firestore_database
  collection = "${local.collection_prefix}_dedup"
  field      = "expire_at"

  ttl_config {}

  index_config {}
}
