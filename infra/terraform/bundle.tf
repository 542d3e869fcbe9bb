# The function source bundle, built by Terraform from the repository: functions/main.py,
# the pinned functions/requirements.txt and the loopbreaker package as source. Cloud
# Build installs the requirements; nothing else is uploaded. `make bundle`
# (infra/bundle.py) builds the same files by the same patterns, and a test checks both
# agree.
locals {
  functions_dir = "${path.module}/../../functions"
  library_dir   = "${path.module}/../../shared/loopbreaker"
  # Relative to local.library_dir; mirrored by PATTERNS in infra/bundle.py.
  bundle_patterns = ["**/*.py", "py.typed", "signals/catalog/*.toml"]

  library_files = sort(distinct(flatten([
    for pattern in local.bundle_patterns : tolist(fileset(local.library_dir, pattern))
  ])))
  # Path inside the zip => path on disk.
  bundle_files = merge(
    {
      "main.py"          = "${local.functions_dir}/main.py"
      "requirements.txt" = "${local.functions_dir}/requirements.txt"
    },
    { for relative in local.library_files : "loopbreaker/${relative}" => "${local.library_dir}/${relative}" },
  )
}

data "archive_file" "bundle" {
  type = "zip"
  # Under .terraform/ (ignored by git) of the root module that calls this one.
  output_path = "${path.root}/.terraform/loopbreaker/bundle.zip"

  # Every file is text (Python sources, requirements, the empty py.typed marker).
  dynamic "source" {
    for_each = local.bundle_files
    content {
      filename = source.key
      content  = file(source.value)
    }
  }
}

resource "google_storage_bucket" "source" {
  # checkov:skip=CKV_GCP_62: access logs of a bucket that holds only build inputs reproducible from git would add a second bucket for no gain; Cloud Audit Logs record admin access.
  project                     = var.project_id
  name                        = "${local.name_prefix}${var.project_id}-fn-source"
  location                    = var.region
  labels                      = local.labels
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  # Only bundles, each rebuilt from git: nothing here is worth blocking a destroy.
  force_destroy = true

  versioning {
    enabled = true
  }

  # A bundle replaced by a newer one is kept for 30 days, then deleted.
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 30
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.this]
}

# Named by the archive's MD5, so a changed bundle is a new object and rebuilds every
# function, and an unchanged one changes nothing.
resource "google_storage_bucket_object" "bundle" {
  bucket       = google_storage_bucket.source.name
  name         = "loopbreaker-${data.archive_file.bundle.output_md5}.zip"
  source       = data.archive_file.bundle.output_path
  content_type = "application/zip"
}
