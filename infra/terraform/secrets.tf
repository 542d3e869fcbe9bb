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
  secret_given = {
    for secret, value in local.secret_values : secret => nonsensitive(value != null)
  }
}

# The secrets in use (local.secrets_in_use) and one version each, from the sensitive
# *_token / *_secret / *_key variables: every function that reads a secret is deployed
# after its version exists (functions.tf), so the first apply deploys in one pass. The
# values are kept in the Terraform state: keep the state in an encrypted backend with
# restricted access. Rotate by changing the variable: a new version, and a new revision
# of each function that reads it.
resource "google_secret_manager_secret" "this" {
  for_each = { for secret, variable in local.secret_variables : secret => variable if local.secrets_in_use[secret] }

  project   = var.project_id
  secret_id = "${local.name_prefix}${each.key}"
  labels    = local.labels

  replication {
    auto {}
  }

  lifecycle {
    # Planned before anything is created: the setting that needs a value names it.
    precondition {
      condition     = each.key != "slack-bot-token" || local.secret_given["slack-bot-token"]
      error_message = "notifier = \"slack\" needs slack_bot_token: the Slack app's bot token (xoxb-...), deploy/slack/README.md."
    }
    precondition {
      condition     = each.key != "slack-signing-secret" || local.secret_given["slack-signing-secret"]
      error_message = "notifier = \"slack\" with approvers needs slack_signing_secret: the Slack app's signing secret, deploy/slack/README.md."
    }
    precondition {
      condition     = each.key != "action-signing-key" || local.secret_given["action-signing-key"]
      error_message = "approvers needs action_signing_key: at least 16 random characters, such as the output of `openssl rand -base64 32`."
    }
    precondition {
      condition     = each.key != "alert-webhook-token" || local.secret_given["alert-webhook-token"]
      error_message = "enable_alertmanager_webhook needs alert_webhook_token: the bearer token Alertmanager sends, such as the output of `openssl rand -hex 32`."
    }
  }

  depends_on = [google_project_service.this]
}

resource "google_secret_manager_secret_version" "this" {
  for_each = google_secret_manager_secret.this

  secret      = each.value.id
  secret_data = local.secret_values[each.key]
}
