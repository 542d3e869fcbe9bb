"""The module's self-run Prometheus inputs: on_schedule alone reads them, with the secrets
the team already keeps (issue 28)."""

from __future__ import annotations

import re
from typing import Any

from test_terraform import chosen, module, resources, text

__all__ = ["module"]  # the fixture, shared with test_terraform


def test_a_self_run_prometheus_is_on_schedules_alone_with_its_existing_secrets(
    module: dict[str, Any],
) -> None:
    function = resources(module, "google_cloudfunctions2_function")["this"]
    environment = text(function["service_config"][0]["environment_variables"])
    # The plain settings sit in the on_schedule-only part of the environment.
    schedule_part = environment[environment.index('each.key == \\"on_schedule\\"') :]
    schedule_part = schedule_part[: schedule_part.index("} : {}")]
    for variable, input_name in (
        ("LOOPBREAKER_PROMETHEUS_URL", "var.prometheus_url"),
        ("LOOPBREAKER_PROMETHEUS_CLUSTER_LABEL", "var.prometheus_cluster_label"),
        ("LOOPBREAKER_PROMETHEUS_USERNAME", "var.prometheus_username"),
    ):
        assert f"{variable} = {input_name}" in schedule_part, variable
    _, dynamic = function["service_config"][0]["dynamic"]
    secrets = dynamic["secret_environment_variables"]
    assert 'each.key == "on_schedule" ? local.prometheus_secrets : {}' in secrets["for_each"]
    [content] = secrets["content"]
    assert content["key"] == "${secret_environment_variables.key}"
    assert content["secret"] == "${secret_environment_variables.value.secret}"
    assert content["project_id"] == "${secret_environment_variables.value.project}"
    # The table maps exactly the two secret settings to the two inputs naming the secrets.
    table = text(module["locals"]["prometheus_secrets"])
    for variable, input_name in (
        ("LOOPBREAKER_PROMETHEUS_BEARER_TOKEN", "var.prometheus_bearer_token_secret"),
        ("LOOPBREAKER_PROMETHEUS_PASSWORD", "var.prometheus_password_secret"),
    ):
        assert f"{variable} = {input_name}" in table
    assert "if ref != null" in table
    # Read access to those secrets only, for on_schedule's account only, granted before
    # the deploy resolves them.
    grant = resources(module, "google_secret_manager_secret_iam_member")["prometheus"]
    assert grant["for_each"] == "${local.prometheus_secrets}"
    assert grant["role"] == "roles/secretmanager.secretAccessor"
    assert grant["member"] == (
        'serviceAccount:${google_service_account.functions["on_schedule"].email}'
    )
    assert grant["secret_id"] == "${each.value.secret}"
    assert "${google_secret_manager_secret_iam_member.prometheus}" in function["depends_on"]
    # Exclusive auth, and nothing without the URL, already at plan time.
    conditions = text(function["lifecycle"][0]["precondition"])
    assert "exclusive" in conditions and "needs both prometheus_username" in conditions
    # Secret Manager's API is enabled for a Prometheus secret even with no module secret.
    assert "secretmanager.googleapis.com" in chosen(
        module, "services", notifier="log", approvers=[], prometheus_password_secret="pw"
    )
    # The library knows every variable the module sets.
    from loopbreaker.settings.load import VARIABLES

    documented = {v.name for v in VARIABLES}
    for variable in re.findall(r"LOOPBREAKER_PROMETHEUS_[A-Z_]+", environment + table):
        assert variable in documented, variable
