output "bundle_object" {
  description = "The uploaded function source bundle: bucket, object name and MD5 of the zip."
  value = {
    bucket = google_storage_bucket_object.bundle.bucket
    name   = google_storage_bucket_object.bundle.name
    md5    = data.archive_file.bundle.output_md5
  }
}

output "chat_action_uri" {
  description = "URL of on_chat_action: the Slack interactivity request URL or the Google Chat app endpoint."
  value       = google_cloudfunctions2_function.this["on_chat_action"].service_config[0].uri
}

output "dead_letter_subscription" {
  description = "Id of the pull subscription on the dead-letter topic, to watch and drain."
  value       = google_pubsub_subscription.dead_letter.id
}

output "dead_letter_topic" {
  description = "Id of the dead-letter topic to set on the Eventarc-created subscriptions."
  value       = google_pubsub_topic.dead_letter.id
}

output "event_triggers" {
  description = "Eventarc trigger of each event function, whose Pub/Sub subscription gets the dead-letter policy."
  value = {
    for name, fn in google_cloudfunctions2_function.this : name => fn.event_trigger[0].trigger if length(fn.event_trigger) > 0
  }
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
  description = "URL of each deployed function."
  value       = { for name, fn in google_cloudfunctions2_function.this : name => fn.service_config[0].uri }
}

output "log_events_topic" {
  description = "Id of the topic the log sinks publish to and on_log_entry is triggered by."
  value       = google_pubsub_topic.log_events.id
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
  description = "Secret Manager secret id of each secret, for adding versions out of band."
  value       = { for name, secret in google_secret_manager_secret.this : name => secret.secret_id }
}

output "sink_writer_identities" {
  description = "Writer identity of each log sink (publisher on the log_events topic only)."
  value = {
    for name, sink in merge(
      google_logging_project_sink.this,
      google_logging_folder_sink.this,
      google_logging_organization_sink.this,
    ) : name => sink.writer_identity
  }
}

output "trigger_service_account" {
  description = "Email of the service account the Eventarc triggers invoke the event functions as."
  value       = google_service_account.trigger.email
}
