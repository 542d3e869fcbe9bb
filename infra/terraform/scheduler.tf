# Every minute: diagnose settled incidents, expire stale approval requests, publish
# approvals whose request is not on the topic yet.
resource "google_cloud_scheduler_job" "settle" {
  project     = var.project_id
  region      = var.region
  name        = "${local.name_prefix}settle"
  description = "loopbreaker: calls on_schedule every minute."
  schedule    = "* * * * *"
  time_zone   = "Etc/UTC"
  # A little longer than on_schedule's own timeout.
  attempt_deadline = "320s"

  # No retries: each minute's call picks up whatever the last one missed.
  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = google_cloudfunctions2_function.this["on_schedule"].service_config[0].uri

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = google_cloudfunctions2_function.this["on_schedule"].service_config[0].uri
    }
  }

  depends_on = [google_cloud_run_service_iam_member.scheduler_invoker]
}
