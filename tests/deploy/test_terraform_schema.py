"""The module and examples/minimal against the provider schemas they claim to support.

``make provider-schema`` (part of ``make terraform``, so of ``make test``) extracts the
schemas of the oldest and the newest version each constraint of versions.tf admits from
the prebuilt CDK bindings (infra/provider_schema.py); infra/terraform_check.py checks
every resource and data block's arguments, blocks, required arguments and attribute
references against them. A missing schema fails these tests: nothing is skipped.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import hcl2
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "infra" / "terraform"
EXAMPLE = MODULE / "examples" / "minimal"
sys.path.insert(0, str(ROOT / "infra"))
import provider_schema  # noqa: E402
import terraform_check  # noqa: E402


def version_tuple(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


@pytest.fixture(scope="module")
def schema_sets() -> dict[str, dict[str, Any]]:
    try:
        return terraform_check.schema_sets()
    except provider_schema.SchemaError as exc:
        pytest.fail(str(exc))


def constraints() -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    with open(MODULE / "versions.tf") as handle:
        versions = hcl2.load(handle)["terraform"][0]["required_providers"][0]
    found = {}
    for name, spec in versions.items():
        if name.startswith("__"):
            continue
        match = re.fullmatch(r'"?>= ([\d.]+), < ([\d.]+)"?', spec["version"])
        assert match, f"{name}: {spec['version']} is not '>= LOW, < HIGH'"
        found[name] = (version_tuple(match.group(1)), version_tuple(match.group(2)))
    return found


def test_the_pinned_schemas_are_the_oldest_and_newest_the_constraints_admit() -> None:
    bounds = constraints()
    pinned: dict[str, list[tuple[int, ...]]] = {}
    for pin in provider_schema.PINS:
        pinned.setdefault(pin.provider, []).append(version_tuple(pin.version))
    assert set(pinned) == set(bounds)
    for provider, (low, high) in bounds.items():
        versions = sorted(pinned[provider])
        assert versions[0] == low, f"{provider}: the oldest schema checked is not {low}"
        assert versions[-1] < high, provider
        assert len(versions) == 2 and versions[0] < versions[-1], provider
    # google: the constraint admits 6.x through 8.x, and 8.x is what is checked newest.
    assert bounds["google"] == ((6, 1, 0), (9, 0, 0))
    assert max(pinned["google"])[0] == 8


def test_the_installed_schemas_carry_the_pinned_versions(
    schema_sets: dict[str, dict[str, Any]],
) -> None:
    for label, schemas in schema_sets.items():
        for provider, schema in schemas.items():
            [pin] = [
                p
                for p in provider_schema.PINS
                if p.provider == provider and p.version == schema["version"]
            ]
            assert schema["package"] == f"{pin.package}@{pin.package_version}", label
    # What the extraction must get right, on facts of the google provider.
    for schemas in schema_sets.values():
        subscription = schemas["google"]["resources"]["google_pubsub_subscription"]
        assert subscription["attributes"]["topic"]["required"]
        assert subscription["attributes"]["name"]["required"]
        assert not subscription["attributes"]["ack_deadline_seconds"]["required"]
        assert "dead_letter_policy" in subscription["blocks"]
        oidc = subscription["blocks"]["push_config"]["block"]["blocks"]["oidc_token"]
        assert oidc["block"]["attributes"]["service_account_email"]["required"]
        sink = schemas["google"]["resources"]["google_logging_project_sink"]
        assert sink["attributes"]["writer_identity"]["computed"]
        function = schemas["google"]["resources"]["google_cloudfunctions2_function"]
        service = function["blocks"]["service_config"]["block"]["attributes"]
        assert service["uri"]["computed"] and function["attributes"]["url"]["computed"]
        alert = schemas["google"]["resources"]["google_monitoring_alert_policy"]
        assert alert["blocks"]["conditions"]["required"]
        monitored = schemas["google"]["resources"]["google_monitoring_monitored_project"]
        assert monitored["attributes"]["metrics_scope"]["required"]
        assert monitored["attributes"]["name"]["required"]
        assert "google_project_service_identity" not in schemas["google"]["resources"]
        assert "google_project_service_identity" in schemas["google-beta"]["resources"]


@pytest.mark.parametrize("label", ["oldest", "newest"])
@pytest.mark.parametrize("directory", [MODULE, EXAMPLE], ids=["module", "examples/minimal"])
def test_the_configuration_is_clean_against_the_schema(
    schema_sets: dict[str, dict[str, Any]], label: str, directory: Path
) -> None:
    schemas = schema_sets[label]
    called = MODULE if directory == EXAMPLE else None
    problems = terraform_check.check(directory, schemas, called)
    versions = ", ".join(f"{p} {s['version']}" for p, s in sorted(schemas.items()))
    assert problems == [], f"against {versions}:\n" + "\n".join(problems)


def test_every_block_of_the_module_was_checked(schema_sets: dict[str, dict[str, Any]]) -> None:
    config = terraform_check.load(MODULE)
    kinds = {(b.kind, b.type) for b in config.blocks.values()}
    # The resource types the issue is about are all there, so all were checked.
    for needed in (
        ("resource", "google_pubsub_subscription"),
        ("resource", "google_pubsub_subscription_iam_member"),
        ("resource", "google_project_service_identity"),
        ("resource", "time_sleep"),
        ("resource", "google_secret_manager_secret_version"),
        ("resource", "google_monitoring_alert_policy"),
        # One responder for several projects (issue 40).
        ("resource", "google_monitoring_monitored_project"),
        ("resource", "google_project_iam_custom_role"),
        ("data", "archive_file"),
        ("data", "google_project"),
    ):
        assert needed in kinds, needed
    for label, schemas in schema_sets.items():
        checker = terraform_check.Checker(config, schemas)
        for block in config.blocks.values():
            assert checker.schema_of(block) is not None, (label, block.address)


# (file, text, replacement, the problem expected)
MISTAKES = [
    (
        "pubsub.tf",
        "ack_deadline_seconds       = each.value.ack_deadline",
        "ack_deadline_second        = each.value.ack_deadline",
        "no argument named 'ack_deadline_second'",
    ),
    (
        "pubsub.tf",
        "  topic                      = each.value.trigger",
        "  labelz                     = each.value.trigger",
        "the required argument 'topic' is missing",
    ),
    (
        "pubsub.tf",
        "service_config[0].uri\n\n",
        "service_config[0].urls\n\n",
        "service_config[0].urls: no such attribute",
    ),
    (
        "iam.tf",
        "  provider = google-beta\n",
        "",
        "has no resource type google_project_service_identity",
    ),
    (
        "outputs.tf",
        "name => fn.service_config[0].uri",
        "name => fn.service_config[0].ur",
        "fn.service_config[0].ur: no such attribute",
    ),
    (
        "pubsub.tf",
        "subscription = each.value.name",
        "subscription = each.value.nam",
        "each.value.nam: no such attribute",
    ),
    (
        "functions.tf",
        'dynamic "secret_environment_variables"',
        'dynamic "secret_env"',
        "dynamic 'secret_env': no such block",
    ),
    (
        "log-sinks.tf",
        "unique_writer_identity = true",
        'writer_identity        = "x"',
        "writer_identity is read-only",
    ),
    (
        "scheduler.tf",
        "google_service_account.scheduler.email",
        "google_service_account.schedule.email",
        "google_service_account.schedule is not declared",
    ),
    (
        "pubsub.tf",
        "  retry_policy {",
        "  retry_policy = {",
        "retry_policy is a block, not an argument",
    ),
    (
        "monitoring.tf",
        "local.log_metric_types",
        "local.log_metric_typez",
        "local.log_metric_typez is not declared",
    ),
    (
        "iam.tf",
        '${google_service_account.functions[each.key].email}"\n\n  condition',
        '${google_service_account.functions.email}"\n\n  condition',
        "has count or for_each, index it",
    ),
    (
        "monitoring.tf",
        '  metrics_scope = "locations/global/metricsScopes/${var.project_id}"',
        '  metric_scope  = "locations/global/metricsScopes/${var.project_id}"',
        "the required argument 'metrics_scope' is missing",
    ),
    (
        "iam.tf",
        "google_project_iam_custom_role.remediation_vm[each.key].id",
        "google_project_iam_custom_role.remediation_vm[each.key].role",
        "remediation_vm[each.key].role: no such attribute",
    ),
]


@pytest.mark.parametrize("mistake", MISTAKES, ids=[f"{m[0]}:{m[3][:40]}" for m in MISTAKES])
def test_the_check_finds_each_kind_of_mistake(
    schema_sets: dict[str, dict[str, Any]], tmp_path: Path, mistake: tuple[str, str, str, str]
) -> None:
    file, old, new, expected = mistake
    copy = tmp_path / "module"
    shutil.copytree(MODULE, copy, ignore=shutil.ignore_patterns("examples"))
    source = (copy / file).read_text()
    assert old in source, f"{file} no longer contains {old!r}: update this mistake"
    (copy / file).write_text(source.replace(old, new, 1))
    config = terraform_check.load(copy)
    for schemas in schema_sets.values():
        problems = terraform_check.check_config(config, schemas)
        assert any(expected in p for p in problems), problems


def test_the_check_finds_a_bad_module_call(
    schema_sets: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    copy = tmp_path / "minimal"
    shutil.copytree(EXAMPLE, copy)
    source = (copy / "main.tf").read_text()
    source = source.replace("  project_id = var.project_id\n", "  projectid = var.project_id\n")
    source = source.replace("module.loopbreaker.chat_action_uri", "module.loopbreaker.chat_url")
    (copy / "main.tf").write_text(source)
    problems = terraform_check.check(copy, schema_sets["newest"], MODULE)
    assert "module loopbreaker: 'projectid' is not a variable of the module" in problems
    assert "module loopbreaker: the required variable 'project_id' is missing" in problems
    assert any("module.loopbreaker.chat_url: the module has no such output" in p for p in problems)


def test_make_test_installs_the_schemas_before_the_tests_run() -> None:
    makefile = (ROOT / "Makefile").read_text()
    terraform = re.search(r"^terraform: (.*)$", makefile, re.M)
    assert terraform and "$(PROVIDER_SCHEMA_STAMP)" in terraform.group(1)
    stamp = re.search(r"^\$\(PROVIDER_SCHEMA_STAMP\): (.*)$", makefile, re.M)
    assert stamp and "infra/provider_schema.py" in stamp.group(1), "pins changed: re-extract"
    test = re.search(r"^test: (.*)$", makefile, re.M)
    assert test
    steps = test.group(1).split()
    assert steps.index("terraform") < steps.index("unit")
