output "bundle_object" {
  description = "The uploaded function source bundle: bucket, object name and MD5 of the zip."
  value = {
    bucket = google_storage_bucket_object.bundle.bucket
    name   = google_storage_bucket_object.bundle.name
    md5    = data.archive_file.bundle.output_md5
  }
}

output "chat_action_uri" {
  description = "Stable URL of on_chat_action (https://REGION-PROJECT.cloudfunctions.net/NAME): the Slack interactivity request URL and the Google Chat app's HTTP endpoint."
  value       = google_cloudfunctions2_function.this["on_chat_action"].url
}

output "dead_letter_subscription" {
  description = "Id of the pull subscription on the dead-letter topic, to watch and drain."
  value       = google_pubsub_subscription.dead_letter.id
}

output "dead_letter_topic" {
  description = "Id of the dead-letter topic the push subscriptions forward undeliverable messages to."
  value       = google_pubsub_topic.dead_letter.id
}

output "firestore_database" {
  description = "Firestore database id of the incident store."
  value       = local.firestore_database
}

output "function_service_accounts" {
  description = "Runtime service account email of each function."
  value       = { for name, account in google_service_account.functions : name => account.email }
}

output "function_uris" {
  description = "run.app URL of each deployed function (the push endpoint of the pushed ones)."
  value       = { for name, fn in google_cloudfunctions2_function.this : name => fn.service_config[0].uri }
}

output "log_events_topic" {
  description = "Id of the topic the log sinks publish to and on_log_entry is pushed from."
  value       = google_pubsub_topic.log_events.id
}

output "push_subscriptions" {
  description = "Id of the push subscription of each pushed function (with its retry and dead-letter policies)."
  value       = { for name, subscription in google_pubsub_subscription.push : name => subscription.id }
}

output "remediation_topic" {
  description = "Id of the topic approved remediation requests are published to."
  value       = google_pubsub_topic.remediation.id
}

output "scheduler_service_account" {
  description = "Email of the service account Cloud Scheduler invokes on_schedule as."
  value       = google_service_account.scheduler.email
}

output "secret_ids" {
  description = "Secret Manager secret id of each secret in use."
  value       = { for name, secret in google_secret_manager_secret.this : name => secret.secret_id }
}

output "sink_filters" {
  description = "The filter of each log sink: the generated one, narrowed to var.clusters."
  value       = local.sink_filters
}

output "sink_writer_identities" {
  description = "Writer identity of each log sink (publisher on the log_events topic only)."
  value       = { for name, sink in local.sinks : name => sink.writer_identity }
}

output "slack_app_manifest" {
  description = "With notifier = slack: deploy/slack/manifest.yaml with this deployment's interactivity request URL, to paste into the Slack app's App Manifest page."
  value       = var.notifier == "slack" ? yamlencode(local.slack_app_manifest) : null
}

output "trigger_service_account" {
  description = "Email of the service account the push subscriptions invoke the pushed functions as."
  value       = google_service_account.trigger.email
}
