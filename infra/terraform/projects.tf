# The projects the responder serves (var.workload_projects, issue 40) and what each is
# granted. Locals only: the grants themselves are in iam.tf, the metrics scope in
# monitoring.tf, and each resource takes one of these tables as its for_each. A test
# (tests/deploy/test_terraform_projects.py) evaluates them for chosen inputs.

locals {
  # LOOPBREAKER_PROJECTS: the listed projects, or project_id alone; nothing else. Each
  # gets the same grants below; project_id gets them only as one of these.
  workload_projects = coalescelist(var.workload_projects, [var.project_id])

  # What on_schedule reads with in each workload project, all read-only (live_sources):
  # Managed Prometheus (monitoring.viewer), Cloud Logging (logging.viewer), the GKE API
  # for nodes and pods (container.viewer: no Secrets) and the VM's physical host and
  # provisioning model (compute.viewer: instances.get).
  diagnosis_roles = var.live_sources ? [
    "roles/compute.viewer",
    "roles/container.viewer",
    "roles/logging.viewer",
    "roles/monitoring.viewer",
  ] : []
  # "PROJECT/ROLE" => {project, role}: one grant to on_schedule each. With the metrics
  # scope reader below, monitoring.viewer on project_id too, under the key it would have
  # as a workload project's grant (so listing project_id later changes no binding).
  diagnosis_grants = merge(
    {
      for pair in setproduct(local.workload_projects, local.diagnosis_roles) :
      "${pair[0]}/${pair[1]}" => { project = pair[0], role = pair[1] }
    },
    local.metrics_scope_reader ? {
      "${var.project_id}/roles/monitoring.viewer" = { project = var.project_id, role = "roles/monitoring.viewer" }
    } : {},
  )

  # Where on_remediation_request may act: every workload project, with approvers only.
  # Custom roles are project resources, so each of these projects gets its own two
  # (iam.tf), held by that account alone.
  remediation_projects = local.approvals ? toset(local.workload_projects) : toset([])

  # project_id's metrics scope (the scoping project of Managed Prometheus queries made
  # there) takes in every other workload project, so their series are visible from it.
  monitored_projects = toset([for project in local.workload_projects : project if project != var.project_id])
  # Reading through a metrics scope is authorized on the scoping project: on_schedule
  # needs monitoring.viewer on project_id itself, which diagnosis_grants hold anyway when
  # project_id is a workload project.
  metrics_scope_reader = var.live_sources && length(local.monitored_projects) > 0 && !contains(local.workload_projects, var.project_id)
}
