# A self-run Prometheus (kube-prometheus-stack) as on_schedule's metric source: the URL
# and cluster label as plain LOOPBREAKER_* variables, bearer token or basic-auth password
# from secrets the team already keeps in Secret Manager (their values never pass through
# this module or its state). on_schedule is the only function that diagnoses, so it is
# the only one that gets them, and may read those secrets only.
locals {
  # LOOPBREAKER_* variable => {project, secret} of the existing secret that holds it.
  prometheus_secrets = {
    for variable, ref in {
      LOOPBREAKER_PROMETHEUS_BEARER_TOKEN = var.prometheus_bearer_token_secret
      LOOPBREAKER_PROMETHEUS_PASSWORD     = var.prometheus_password_secret
      } : variable => {
      project = startswith(ref, "projects/") ? split("/", ref)[1] : var.project_id
      secret  = reverse(split("/", ref))[0]
    } if ref != null
  }
}

resource "google_secret_manager_secret_iam_member" "prometheus" {
  for_each = local.prometheus_secrets

  project   = each.value.project
  secret_id = each.value.secret
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.functions["on_schedule"].email}"

  lifecycle {
    precondition {
      condition     = var.prometheus_url != null
      error_message = "prometheus_bearer_token_secret and prometheus_password_secret need prometheus_url."
    }
  }
}
