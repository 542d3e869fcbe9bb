"""One responder for several projects (issue 40): ``workload_projects`` and ``routes``.

What the module plans per workload project lives in the tables of projects.tf (locals
only), which the grants of iam.tf and the monitored projects of monitoring.tf take as
their ``for_each``. ``plan`` below states what those tables hold for given inputs; where
Terraform is installed, the tables are also evaluated by Terraform itself (``terraform
console`` on a copy of variables.tf and projects.tf, which need no provider) and must agree.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_terraform import MODULE, inputs, module, parse, resources, text

__all__ = ["module"]  # the fixture, shared with test_terraform

HOST = "gpu-platform-ops"
THREE = ["team-vision-train", "team-speech-train", "team-nlp-train"]
SCHEDULE = 'serviceAccount:${google_service_account.functions[\\"on_schedule\\"].email}'
REMEDIATE = 'serviceAccount:${google_service_account.functions[\\"on_remediation_request\\"].email}'
TERRAFORM = shutil.which("terraform")


def terraform() -> str:
    """The terraform binary: a test that needs it fails without it (make test installs the
    tools first), never skips."""
    assert TERRAFORM is not None, "terraform is not on PATH: run make tools"
    return TERRAFORM


def diagnosis_roles(module: dict[str, Any]) -> list[str]:
    table = module["locals"]["diagnosis_roles"]
    assert table.startswith("${var.live_sources ? [") and table.endswith("] : []}"), table
    return re.findall(r'"(roles/[\w.]+)"', table)


def plan(module: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """What projects.tf's tables hold for the module's defaults plus ``overrides``."""
    var, local = inputs(module, project_id=HOST, region="us-central1", **overrides)
    projects = list(var["workload_projects"]) or [var["project_id"]]
    roles = diagnosis_roles(module) if var["live_sources"] else []
    monitored = sorted(p for p in projects if p != var["project_id"])
    reader = bool(var["live_sources"] and monitored and var["project_id"] not in projects)
    grants = {f"{p}/{r}": {"project": p, "role": r} for p in projects for r in roles}
    if reader:  # the metrics scope is read on project_id
        role = "roles/monitoring.viewer"
        grants[f"{var['project_id']}/{role}"] = {"project": var["project_id"], "role": role}
    return {
        "workload_projects": projects,
        "diagnosis_grants": grants,
        "remediation_projects": sorted(projects) if local["approvals"] else [],
        "monitored_projects": monitored,
        "metrics_scope_reader": reader,
        "project_sinks_allowed": all(p == var["project_id"] for p in projects),
        "environment": ",".join(projects),
    }


# --- Terraform's own evaluation of the same tables ---------------------------------------


def console(tmp_path: Path, expression: str, **variables: Any) -> subprocess.CompletedProcess[str]:
    """``terraform console`` on variables.tf and projects.tf (no provider is needed)."""
    work = tmp_path / "projects"
    if not work.exists():
        work.mkdir()
        shutil.copy(MODULE / "variables.tf", work)
        shutil.copy(MODULE / "projects.tf", work)
        blocks = {k for k in parse(work / "projects.tf") if not k.startswith("__")}
        assert blocks == {"locals"}, "projects.tf holds locals only"
        # The one local of main.tf the tables read, as main.tf writes it.
        main_locals = {k: v for b in parse(MODULE / "main.tf")["locals"] for k, v in b.items()}
        approvals = main_locals["approvals"].removeprefix("${").removesuffix("}")
        (work / "stub.tf").write_text(f"locals {{\n  approvals = {approvals}\n}}\n")
    arguments = [f"-var=project_id={HOST}", "-var=region=us-central1"]
    for name, value in variables.items():
        rendered = value if isinstance(value, str) else json.dumps(value)
        arguments.append(f"-var={name}={rendered}")
    return subprocess.run(
        [terraform(), f"-chdir={work}", "console", *arguments],
        input=expression + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )


def evaluated(module: dict[str, Any], tmp_path: Path, **variables: Any) -> dict[str, Any]:
    sinks = resources(module, "google_logging_project_sink")["this"]
    [lifecycle] = sinks["lifecycle"]
    [precondition] = lifecycle["precondition"]
    condition = precondition["condition"].removeprefix("${").removesuffix("}")
    expression = (
        "jsonencode({"
        "workload_projects = local.workload_projects, "
        "diagnosis_grants = local.diagnosis_grants, "
        "remediation_projects = sort(local.remediation_projects), "
        "monitored_projects = sort(local.monitored_projects), "
        "metrics_scope_reader = local.metrics_scope_reader, "
        f"project_sinks_allowed = {condition}, "
        'environment = join(",", local.workload_projects)})'
    )
    result = console(tmp_path, expression, **variables)
    assert result.returncode == 0, result.stderr
    # The console prints the JSON as an HCL string literal, which JSON reads the same.
    value: dict[str, Any] = json.loads(json.loads(result.stdout.strip()))
    return value


CASES = {
    "default": {},
    "three": {"workload_projects": THREE, "approvers": ["U0123ABCD"]},
    "three and the host": {"workload_projects": [HOST, *THREE], "approvers": ["U0123ABCD"]},
    "no live sources": {"workload_projects": THREE, "live_sources": False},
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_terraform_evaluates_the_tables_as_the_plan_model_says(
    module: dict[str, Any], tmp_path: Path, case: str
) -> None:
    assert evaluated(module, tmp_path, **CASES[case]) == plan(module, **CASES[case])


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"workload_projects": ["Team-Vision"]}, "must be a project id"),
        ({"workload_projects": ["123456789012"]}, "must be a project id"),
        ({"workload_projects": [THREE[0], THREE[0]]}, "lists a project twice"),
        ({"routes": "routes.yaml"}, "not its path"),
    ],
)
def test_terraform_refuses_bad_inputs(
    tmp_path: Path, variables: dict[str, Any], message: str
) -> None:
    result = console(tmp_path, "local.workload_projects", **variables)
    # The console reports a failed validation but, for some, still exits 0.
    refused = " ".join(result.stderr.replace("│", " ").split())
    assert "Invalid value for variable" in refused and message in refused


def test_terraform_takes_a_route_file_given_as_its_yaml(tmp_path: Path) -> None:
    routes = (
        "routes:\n  - name: vision\n    slack_channel: C0VISION01\ndefault:\n  name: platform\n"
    )
    result = console(tmp_path, "var.routes", routes=routes)
    assert result.returncode == 0 and "Error" not in result.stderr, result.stderr


# --- the plan for three projects ---------------------------------------------------------


def test_three_workload_projects_plan_the_per_project_grants_and_monitored_projects(
    module: dict[str, Any],
) -> None:
    planned = plan(module, workload_projects=THREE, approvers=["U0123ABCD"])
    roles = set(diagnosis_roles(module))
    assert roles == {
        "roles/compute.viewer",
        "roles/container.viewer",
        "roles/logging.viewer",
        "roles/monitoring.viewer",
    }
    grants = planned["diagnosis_grants"]
    assert len(grants) == 3 * len(roles) + 1
    for project in THREE:
        assert {g["role"] for g in grants.values() if g["project"] == project} == roles
    # project_id hosts the responder but is not served: nothing is granted there but
    # reading its metrics scope, under the key a workload project's grant would have.
    host = {key: g["role"] for key, g in grants.items() if g["project"] == HOST}
    assert host == {f"{HOST}/roles/monitoring.viewer": "roles/monitoring.viewer"}
    assert planned["remediation_projects"] == sorted(THREE)
    assert planned["monitored_projects"] == sorted(THREE)
    assert planned["metrics_scope_reader"] is True
    assert planned["environment"] == ",".join(THREE)
    # Project sinks would only ever see project_id: the plan stops.
    assert planned["project_sinks_allowed"] is False


def test_the_host_project_listed_is_granted_once_and_not_monitored_by_itself(
    module: dict[str, Any],
) -> None:
    planned = plan(module, workload_projects=[HOST, *THREE], approvers=["U0123ABCD"])
    assert sum(g["project"] == HOST for g in planned["diagnosis_grants"].values()) == 4
    assert HOST in planned["remediation_projects"]
    assert planned["monitored_projects"] == sorted(THREE)
    # monitoring.viewer on project_id is already a diagnosis grant: no second binding.
    assert planned["metrics_scope_reader"] is False


def test_the_default_is_project_id_alone_as_before(module: dict[str, Any]) -> None:
    planned = plan(module, approvers=["U0123ABCD"])
    assert planned["workload_projects"] == [HOST] and planned["environment"] == HOST
    assert {g["project"] for g in planned["diagnosis_grants"].values()} == {HOST}
    assert planned["remediation_projects"] == [HOST]
    assert planned["monitored_projects"] == [] and planned["metrics_scope_reader"] is False
    assert planned["project_sinks_allowed"] is True
    assert module["variable"]["workload_projects"]["default"] == []
    assert module["locals"]["workload_projects"] == (
        "${coalescelist(var.workload_projects, [var.project_id])}"
    )


def test_each_grant_follows_its_switch_in_every_project(module: dict[str, Any]) -> None:
    bare = plan(module, workload_projects=THREE, approvers=[], live_sources=False)
    assert bare["diagnosis_grants"] == {} and bare["remediation_projects"] == []
    assert bare["metrics_scope_reader"] is False
    # The metrics scope is not a grant: it is planned whatever the switches.
    assert bare["monitored_projects"] == sorted(THREE)
    assert module["locals"]["remediation_projects"] == (
        "${local.approvals ? toset(local.workload_projects) : toset([])}"
    )


# --- the resources take those tables -----------------------------------------------------


def test_every_per_project_resource_iterates_over_its_table(module: dict[str, Any]) -> None:
    members = resources(module, "google_project_iam_member")
    diagnosis = members["diagnosis"]
    assert diagnosis["for_each"] == "${local.diagnosis_grants}"
    assert diagnosis["project"] == "${each.value.project}"
    assert diagnosis["role"] == "${each.value.role}"
    assert text(diagnosis["member"]) == f'"{SCHEDULE}"'
    # The metrics scope reader is one more entry of that table, keyed as the grant of a
    # listed project_id would be.
    table = module["locals"]["diagnosis_grants"]
    assert "local.metrics_scope_reader ? {" in table
    assert '"${var.project_id}/roles/monitoring.viewer" = {project = var.project_id' in table
    roles = resources(module, "google_project_iam_custom_role")
    for name in ("remediation", "remediation_vm"):
        # Custom roles are project resources: one per workload project, in it, and the
        # grant in a project names that project's role (so it is created first).
        assert roles[name]["for_each"] == "${local.remediation_projects}"
        assert roles[name]["project"] == "${each.value}"
        assert members[name]["for_each"] == "${local.remediation_projects}"
        assert members[name]["project"] == "${each.value}"
        assert members[name]["role"] == (f"${{google_project_iam_custom_role.{name}[each.key].id}}")
        assert text(members[name]["member"]) == f'"{REMEDIATE}"'
    # Only these, the store grant and the support grant are project-level.
    assert set(members) == {
        "datastore_user",
        "diagnosis",
        "remediation",
        "remediation_vm",
        "support",
    }
    for name in ("datastore_user",):
        assert members[name]["project"] == "${var.project_id}"


def test_each_other_workload_project_joins_project_ids_metrics_scope(
    module: dict[str, Any],
) -> None:
    [(name, monitored)] = resources(module, "google_monitoring_monitored_project").items()
    assert monitored["for_each"] == "${local.monitored_projects}"
    # The provider's arguments: the scope's resource name, and the monitored project.
    assert monitored["metrics_scope"] == "locations/global/metricsScopes/${var.project_id}"
    assert monitored["name"] == "${each.value}"
    # First apply: the scope is project_id's Cloud Monitoring, enabled by this module.
    assert "${google_project_service.this}" in monitored["depends_on"]
    assert "monitoring.googleapis.com" in module["locals"]["services"]


def test_every_function_is_told_the_projects_and_the_posting_ones_the_routes(
    module: dict[str, Any],
) -> None:
    function = resources(module, "google_cloudfunctions2_function")["this"]
    environment = text(function["service_config"][0]["environment_variables"])
    common = environment[: environment.index("each.value.notifies ?")]
    assert 'LOOPBREAKER_PROJECTS = join(\\",\\", local.workload_projects)' in common
    posting = environment[environment.index("each.value.notifies ?") :]
    posting = posting[: posting.index("} : {}")]
    assert "LOOPBREAKER_ROUTES = var.routes" in posting
    assert environment.count("LOOPBREAKER_ROUTES") == environment.count("LOOPBREAKER_PROJECTS")
    assert environment.count("LOOPBREAKER_PROJECTS") == 1
    # Unset (not empty) while routes is null: the filter drops nulls and empty strings.
    assert 'if value != null && value != \\"\\"' in environment
    assert module["variable"]["routes"]["default"] is None


def test_the_project_id_pattern_is_the_one_workload_projects_are_checked_by(
    module: dict[str, Any],
) -> None:
    """Checked in Python too, where Terraform is not installed."""
    [id_check] = module["variable"]["project_id"]["validation"]
    pattern = re.search(r'regex\("([^"]+)"', id_check["condition"].replace('\\"', '"'))
    assert pattern
    first, twice = module["variable"]["workload_projects"]["validation"]
    assert pattern.group(1) in first["condition"].replace('\\"', '"')
    assert "distinct(var.workload_projects)" in twice["condition"]
    expression = re.compile(pattern.group(1).replace("\\\\", "\\"))
    for good in (HOST, *THREE):
        assert expression.fullmatch(good), good
    for bad in ("Team-Vision", "123456789012", "team-", "a" * 31):
        assert not expression.fullmatch(bad), bad
