"""The module README's Requirements, Inputs and Outputs tables are generated and current.

``python infra/terraform_docs.py`` writes them between the terraform-docs markers from
versions.tf, variables.tf and outputs.tf; ``--check`` fails when they differ.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import hcl2
import test_terraform

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "infra" / "terraform"
sys.path.insert(0, str(ROOT / "infra"))
import terraform_docs  # noqa: E402


def test_the_readme_tables_are_the_generated_ones() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "infra" / "terraform_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    readme = (MODULE / "README.md").read_text()
    assert terraform_docs.render(MODULE) in readme
    assert readme.count(terraform_docs.BEGIN) == 1 and readme.count(terraform_docs.END) == 1


def test_every_variable_and_output_has_its_row() -> None:
    block = terraform_docs.render(MODULE)
    inputs, outputs_table = block.split("### Outputs")
    with open(MODULE / "variables.tf") as handle:
        variables = hcl2.load(handle)["variable"]
    with open(MODULE / "outputs.tf") as handle:
        outputs = hcl2.load(handle)["output"]
    for entry in variables:
        for name, spec in entry.items():
            name = name.strip('"')
            required = "n/a" if "default" not in spec else ""
            [row] = [line for line in inputs.splitlines() if line.startswith(f"| `{name}` |")]
            assert row.endswith("| yes |" if required else "| no |"), row
            if spec.get("sensitive") is True:
                assert "Sensitive." in row, row
    for entry in outputs:
        for name in entry:
            assert f"| `{name.strip(chr(34))}` |" in outputs_table
    assert "| google | `>= 6.1, < 9` |" in block


def test_a_changed_variable_makes_the_check_fail_until_regenerated(tmp_path: Path) -> None:
    copy = tmp_path / "terraform"
    shutil.copytree(MODULE, copy, ignore=shutil.ignore_patterns("examples"))
    variables = copy / "variables.tf"
    source = variables.read_text()
    old = 'description = "Whether to enable the project services the module uses'
    assert old in source
    variables.write_text(source.replace(old, 'description = "Whether to turn on the APIs'))
    assert terraform_docs.main(["--check", str(copy)]) == 1
    assert terraform_docs.main([str(copy)]) == 0
    assert "Whether to turn on the APIs" in (copy / "README.md").read_text()
    assert terraform_docs.main(["--check", str(copy)]) == 0


# --- the IAM the README describes is the module's ----------------------------------------


def _module_blocks() -> tuple[dict[str, Any], dict[str, Any]]:
    """(resources by type and name, locals) of the module, quotes removed."""
    found: dict[str, Any] = {}
    local: dict[str, Any] = {}
    for path in sorted(MODULE.glob("*.tf")):
        parsed = test_terraform.parse(path)
        for block in parsed.get("resource", []):
            for rtype, named in block.items():
                found.setdefault(rtype, {}).update(named)
        for block in parsed.get("locals", []):
            local.update(block)
    return found, local


def _grants_table() -> dict[str, str]:
    """Input => its Grants cell, from the table under <!-- grants-table -->."""
    section = (MODULE / "README.md").read_text().split("<!-- grants-table -->", 1)[1]
    table = section.strip().split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 2, line
        rows[cells[0]] = cells[1]
    return rows


def _roles(value: Any) -> set[str]:
    return set(re.findall(r"roles/[\w.]+", json.dumps(value)))


def test_every_project_level_grant_is_in_the_grants_table_and_nothing_else() -> None:
    found, local = _module_blocks()
    rows = _grants_table()
    diagnosis = set(re.findall(r'"(roles/[\w.]+)"', local["diagnosis_roles"]))
    assert diagnosis and "roles/monitoring.viewer" in diagnosis
    members = found["google_project_iam_member"]
    # Each project-level grant's role(s), and the row that must name them.
    expected = {
        "datastore_user": ("always", _roles(members["datastore_user"]["role"])),
        "support": ('`support_parent = "projects/P"` (with approvers)', _roles(members["support"])),
        "diagnosis": ("`live_sources`", diagnosis),
    }
    custom = {"remediation", "remediation_vm"}
    assert set(members) == set(expected) | custom, "a new project-level grant: document it"
    for name, (row, roles) in expected.items():
        assert roles and roles <= _roles(rows[row]), (name, row)
    # The grants made per workload project say so, in their row and in the module.
    per_project = {"diagnosis": "${local.diagnosis_grants}"}
    per_project |= {name: "${local.remediation_projects}" for name in custom}
    for name, table in per_project.items():
        assert members[name]["for_each"] == table, name
    assert "in each workload project" in rows["`live_sources`"]
    assert "in each workload project: the two custom roles" in rows["`approvers` not empty"]
    # ... and, to read the metrics scope, monitoring.viewer on project_id.
    assert (
        "also `roles/monitoring.viewer` on `project_id` (reading its metrics scope)"
        in (rows["`live_sources`"])
    )
    assert '"${var.project_id}/roles/monitoring.viewer"' in local["diagnosis_grants"]
    # The metrics scope: one monitored project per other workload project, no grant.
    [monitored] = found["google_monitoring_monitored_project"].values()
    assert monitored["for_each"] == "${local.monitored_projects}"
    assert "`google_monitoring_monitored_project`" in rows["`workload_projects`"]
    assert "other than `project_id`" in rows["`workload_projects`"]
    # Every role the table names is granted by the module somewhere.
    granted = set()
    for rtype, named in found.items():
        if rtype.endswith("_iam_member"):
            granted |= {r for spec in named.values() for r in _roles(spec.get("role"))}
    assert set().union(*map(_roles, rows.values())) <= granted | diagnosis


def test_the_custom_roles_are_named_and_made_per_project_as_documented() -> None:
    found, local = _module_blocks()
    readme = (MODULE / "README.md").read_text()
    section = readme.split("**The remediation roles**", 1)[1].split("\n\n", 1)[0]
    assert "created in each workload project" in section
    for name, spec in found["google_project_iam_custom_role"].items():
        role_id = spec["role_id"].replace("${local.role_prefix}", "loopbreaker_")
        assert f"`{role_id}`" in readme, role_id
        assert spec["for_each"] == "${local.remediation_projects}" and spec["project"] == (
            "${each.value}"
        ), name
    assert "projects/WORKLOAD_PROJECT/zones/" in readme
    assert "projects/${project}/zones/" in local["gke_instances_only"]


def test_applying_for_workload_projects_names_the_roles_it_needs_on_them() -> None:
    readme = (MODULE / "README.md").read_text()
    section = readme.split("## IAM roles needed to apply", 1)[1].split("\n## ", 1)[0]
    other = " ".join(
        section.split("On each workload project other than `project_id`", 1)[1].split()
    )
    for role in (
        "roles/resourcemanager.projectIamAdmin",
        "roles/iam.roleAdmin",
        "roles/monitoring.admin",
    ):
        assert f"`{role}`" in other, role
    # Adding a project to a metrics scope needs this permission on both projects.
    assert "`monitoring.metricsScopes.link`" in other and "on both projects" in other


def test_the_upgrade_commands_move_the_grants_to_the_keys_the_module_uses() -> None:
    found, local = _module_blocks()
    readme = (MODULE / "README.md").read_text()
    block = readme.split("**Upgrading** a deployment made before", 1)[1]
    commands = block.split("```sh\n", 1)[1].split("```", 1)[0]
    moved = re.findall(r"(google_\w+)\.(\w+)", commands)
    assert moved
    for rtype, name in moved:
        spec = found[rtype][name]
        assert spec["for_each"] in ("${local.remediation_projects}", "${local.diagnosis_grants}")
    for name in ("remediation", "remediation_vm"):
        assert ("google_project_iam_custom_role", name) in moved
        assert ("google_project_iam_member", name) in moved
    # The diagnosis grants are keyed PROJECT/ROLE, for each of the module's roles.
    assert '"${pair[0]}/${pair[1]}" =>' in local["diagnosis_grants"]
    assert 'diagnosis[\\"$P/roles/$role\\"]' in commands
    loop = re.search(r"for role in ([\w. ]+); do", commands)
    assert loop
    roles = {f"roles/{r}" for r in loop.group(1).split()}
    assert roles == set(re.findall(r'"(roles/[\w.]+)"', local["diagnosis_roles"]))
