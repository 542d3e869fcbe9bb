locals {
  # Secret (id after the prefix) => the LOOPBREAKER_* variable its value is given as.
  secret_variables = {
    "action-signing-key"   = "LOOPBREAKER_ACTION_SIGNING_KEY"
    "alert-webhook-token"  = "LOOPBREAKER_ALERT_WEBHOOK_TOKEN"
    "slack-bot-token"      = "LOOPBREAKER_SLACK_BOT_TOKEN"
    "slack-signing-secret" = "LOOPBREAKER_SLACK_SIGNING_SECRET"
  }
  secret_values = {
    "action-signing-key"   = var.action_signing_key
    "alert-webhook-token"  = var.alert_webhook_token
    "slack-bot-token"      = var.slack_bot_token
    "slack-signing-secret" = var.slack_signing_secret
  }
  # Which values were given. Only whether a value is null is revealed, never the value.
  secret_versions = toset([
    for secret in keys(local.secret_variables) : secret if nonsensitive(local.secret_values[secret] != null)
  ])
}

# The secrets always exist; their values are added either here (the *_token / *_secret /
# *_key variables: the value is then kept in the Terraform state) or out of band with
# `gcloud secrets versions add` (README, "Secret values").
resource "google_secret_manager_secret" "this" {
  for_each = local.secret_variables

  project   = var.project_id
  secret_id = "${local.name_prefix}${each.key}"
  labels    = local.labels

  replication {
    auto {}
  }

  depends_on = [google_project_service.this]
}

resource "google_secret_manager_secret_version" "this" {
  for_each = local.secret_versions

  secret      = google_secret_manager_secret.this[each.key].id
  secret_data = local.secret_values[each.key]
}
