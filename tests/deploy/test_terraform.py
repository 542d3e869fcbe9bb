"""Offline checks of the Terraform module: parsing and the wiring that matters.

``terraform fmt -check`` and checkov run in ``make terraform`` (part of ``make test``).

No google provider is reachable here, so ``terraform validate`` cannot run; the module is
parsed with python-hcl2 and its wiring asserted: sinks publish to the topic that triggers
``on_log_entry``, each writer identity may publish to it and nothing more, only the
remediation service account holds the destructive permissions, no basic roles, and only
the chat and webhook endpoints (which verify requests themselves) are public.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hcl2
import pytest

from loopbreaker.signals import sink_filters

MODULE = Path(__file__).resolve().parents[2] / "infra" / "terraform"
DESTRUCTIVE = {
    "compute.instances.delete",
    "compute.instances.reportHostAsFaulty",
    "container.nodes.update",
    "container.pods.evict",
    "container.pods.delete",
}
BASIC_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}


def unquote(value: Any) -> Any:
    """python-hcl2 8 keeps the quotes of string literals; compare values without them."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, dict):
        return {unquote(k): unquote(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unquote(v) for v in value]
    return value


def parse(path: Path) -> dict[str, Any]:
    with open(path) as handle:
        parsed: dict[str, Any] = unquote(hcl2.load(handle))
        return parsed


@pytest.fixture(scope="module")
def module() -> dict[str, Any]:
    merged: dict[str, Any] = {"resource": {}, "data": {}, "locals": {}, "variable": {}}
    for path in sorted(MODULE.glob("*.tf")):
        parsed = parse(path)
        for block in parsed.get("resource", []):
            for rtype, named in block.items():
                merged["resource"].setdefault(rtype, {}).update(named)
        for block in parsed.get("data", []):
            for dtype, named in block.items():
                merged["data"].setdefault(dtype, {}).update(named)
        for block in parsed.get("locals", []):
            merged["locals"].update(block)
        for block in parsed.get("variable", []):
            merged["variable"].update(block)
    return merged


def resources(module: dict[str, Any], rtype: str) -> dict[str, Any]:
    found: dict[str, Any] = module["resource"].get(rtype, {})
    return found


def text(value: Any) -> str:
    return json.dumps(value)


def walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


@pytest.mark.parametrize(
    "path", sorted(MODULE.rglob("*.tf")), ids=lambda p: str(p.relative_to(MODULE))
)
def test_every_file_parses(path: Path) -> None:
    assert parse(path) is not None


def test_conventional_files_and_alphabetical_typed_described_variables(
    module: dict[str, Any],
) -> None:
    for name in ("versions.tf", "variables.tf", "outputs.tf", "README.md"):
        assert (MODULE / name).is_file(), name
    assert (MODULE / "examples" / "minimal" / "main.tf").is_file()
    names = [next(iter(v)) for v in parse(MODULE / "variables.tf")["variable"]]
    assert names == sorted(names), "variables.tf is not alphabetical"
    for name, spec in module["variable"].items():
        assert spec.get("type") and spec.get("description"), f"variable {name}"
    outputs = [next(iter(o)) for o in parse(MODULE / "outputs.tf")["output"]]
    assert outputs == sorted(outputs), "outputs.tf is not alphabetical"
    readme = (MODULE / "README.md").read_text()
    for name in [*names, *outputs]:
        assert f"`{name}`" in readme, f"{name} is missing from the module README"


def test_the_google_provider_range_is_bounded() -> None:
    versions = text(parse(MODULE / "versions.tf"))
    google = re.search(r'"google".*?"version": "([^"]+)"', versions)
    assert google is not None and ">=" in google.group(1) and "<" in google.group(1)


def test_the_sink_filters_come_from_the_generated_file(module: dict[str, Any]) -> None:
    assert "log-filters.json" in text(module["locals"].get("log_filters"))
    on_disk = json.loads((MODULE / "log-filters.json").read_text())
    assert on_disk == sink_filters.FILTERS


def test_every_sink_publishes_to_the_topic_that_triggers_on_log_entry(
    module: dict[str, Any],
) -> None:
    sinks = {
        rtype: spec
        for rtype in (
            "google_logging_project_sink",
            "google_logging_folder_sink",
            "google_logging_organization_sink",
        )
        for spec in resources(module, rtype).values()
    }
    assert set(sinks) == {
        "google_logging_project_sink",
        "google_logging_folder_sink",
        "google_logging_organization_sink",
    }
    for spec in sinks.values():
        assert "google_pubsub_topic.log_events" in text(spec["destination"])
        assert "local.log_filters" in text(spec.get("for_each")) and "each.value" in text(
            spec["filter"]
        )
    functions = resources(module, "google_cloudfunctions2_function")["this"]
    assert "google_pubsub_topic.log_events.id" in text(functions)
    assert "google_pubsub_topic.remediation.id" in text(functions)
    assert "RETRY_POLICY_RETRY" in text(functions)


def test_the_writer_identity_may_publish_to_that_topic_only(module: dict[str, Any]) -> None:
    writers = resources(module, "google_pubsub_topic_iam_member")["sink_writer"]
    assert writers["role"] == "roles/pubsub.publisher"
    assert "google_pubsub_topic.log_events" in text(writers["topic"])
    assert "writer_identity" in text(writers["member"])
    for name, spec in resources(module, "google_pubsub_topic_iam_member").items():
        if "writer_identity" in text(spec.get("member")):
            assert name == "sink_writer"
    for rtype in ("google_project_iam_member", "google_project_iam_binding"):
        for spec in resources(module, rtype).values():
            assert "writer_identity" not in text(spec)


def test_only_the_remediation_account_holds_the_destructive_permissions(
    module: dict[str, Any],
) -> None:
    roles = resources(module, "google_project_iam_custom_role")
    [custom] = roles.values()
    permissions = set(custom["permissions"])
    assert permissions >= DESTRUCTIVE
    assert permissions <= DESTRUCTIVE | {
        "compute.instances.get",
        "compute.zoneOperations.get",
        "container.clusters.get",
        "container.nodes.get",
        "container.nodes.list",
        "container.pods.list",
    }
    holders = [
        spec
        for spec in resources(module, "google_project_iam_member").values()
        if "google_project_iam_custom_role" in text(spec.get("role"))
    ]
    assert len(holders) == 1
    assert "on_remediation_request" in text(holders[0]["member"])
    # No predefined role that can delete VMs or update nodes goes to anyone.
    for spec in resources(module, "google_project_iam_member").values():
        role = text(spec.get("role"))
        assert "compute.instanceAdmin" not in role and "container.admin" not in role


def test_no_basic_roles_anywhere(module: dict[str, Any]) -> None:
    for value in walk(module["resource"]):
        if isinstance(value, str):
            assert value not in BASIC_ROLES, value


def test_only_the_self_verifying_endpoints_are_public(module: dict[str, Any]) -> None:
    public = [
        (name, spec)
        for rtype in (
            "google_cloud_run_service_iam_member",
            "google_cloudfunctions2_function_iam_member",
        )
        for name, spec in resources(module, rtype).items()
        if "allUsers" in text(spec.get("member"))
        or "allAuthenticatedUsers" in text(spec.get("member"))
    ]
    assert public, "the chat endpoint must be callable by Slack and Google Chat"
    for _, spec in public:
        scope = text(spec.get("for_each")) + text(spec.get("service")) + text(spec.get("name"))
        assert "on_chat_action" in scope or "public" in scope
        for other in ("on_log_entry", "on_schedule", "on_remediation_request"):
            assert other not in scope, other


def test_one_service_account_per_function(module: dict[str, Any]) -> None:
    accounts = resources(module, "google_service_account")["functions"]
    assert "local.functions" in text(accounts["for_each"])
    functions = module["locals"]["functions"]
    assert {
        "on_log_entry",
        "on_schedule",
        "on_chat_action",
        "on_remediation_request",
        "on_alertmanager_webhook",
    } <= set(functions)
    service = text(resources(module, "google_cloudfunctions2_function")["this"])
    assert "google_service_account.functions[each.key].email" in service
