"""LOOPBREAKER_PROMETHEUS_*: parsing, secrets from files, and the deployed wiring that
reads a real (basic-auth) Prometheus through build_evidence."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from harness.fixtures import PrometheusFactory

from loopbreaker.app.bootstrap import build_evidence
from loopbreaker.diagnosis.evidence import QueryBudget, TelemetryDirEvidence
from loopbreaker.diagnosis.readers.sources import LiveEvidence, Mode
from loopbreaker.errors import ConfigError
from loopbreaker.model import Context, EvidenceKind
from loopbreaker.settings.load import PrometheusSource, Runtime, Secret, load_settings
from loopbreaker.timeutil import parse_rfc3339

URL = "http://kube-prometheus-stack-prometheus.monitoring:9090"
NOT_A_URL = r"LOOPBREAKER_PROMETHEUS_URL: not an http\(s\) URL with a host"
SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "telemetry" / "faulty-host"


def env(**values: str) -> dict[str, str]:
    return {f"LOOPBREAKER_PROMETHEUS_{k.upper()}": v for k, v in values.items()}


def test_unset_is_no_self_run_prometheus() -> None:
    assert load_settings({}).prometheus == PrometheusSource()


def test_url_label_and_basic_auth_by_value() -> None:
    settings = load_settings(
        env(url=URL + "/", cluster_label="none", username="lb", password="pw-value")
    )
    prom = settings.prometheus
    assert prom.url == URL  # a trailing slash is dropped: API paths are appended
    assert prom.cluster_label == "none"
    assert prom.username == "lb" and prom.password == Secret(value="pw-value")
    assert prom.bearer_token is None
    assert "pw-value" not in repr(settings)
    assert settings.unknown == ()


def test_bearer_token_and_label_name() -> None:
    prom = load_settings(env(url=URL, cluster_label="cluster_name", bearer_token="t0k")).prometheus
    assert prom.cluster_label == "cluster_name"
    assert prom.bearer_token is not None and prom.bearer_token.get() == "t0k"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"url": "kube-prometheus-stack:9090"}, NOT_A_URL),
        ({"url": "ftp://prom:21"}, NOT_A_URL),
        ({"url": URL + "?x=1"}, "LOOPBREAKER_PROMETHEUS_URL: .* has a query or fragment"),
        ({"url": "http://u:pw@prom:9090"}, "LOOPBREAKER_PROMETHEUS_URL: holds credentials"),
        ({"url": "ftp://u:pw@prom?q#f"}, "LOOPBREAKER_PROMETHEUS_URL: holds credentials"),
        (
            {"url": URL, "cluster_label": "__name__"},
            "LOOPBREAKER_PROMETHEUS_CLUSTER_LABEL: not a label name",
        ),
        (
            {"url": URL, "cluster_label": "cluster-name"},
            "LOOPBREAKER_PROMETHEUS_CLUSTER_LABEL: not a label name",
        ),
        (
            {"url": URL, "bearer_token": "t", "username": "u", "password": "p"},
            "LOOPBREAKER_PROMETHEUS_BEARER_TOKEN and basic auth .* are both set: use one",
        ),
        ({"url": URL, "username": "u"}, "needs LOOPBREAKER_PROMETHEUS_PASSWORD too"),
        ({"url": URL, "password": "p"}, "needs LOOPBREAKER_PROMETHEUS_USERNAME too"),
        (
            {"bearer_token": "t"},
            "LOOPBREAKER_PROMETHEUS_BEARER_TOKEN is set but LOOPBREAKER_PROMETHEUS_URL is not",
        ),
        (
            {"cluster_label": "cluster"},
            "LOOPBREAKER_PROMETHEUS_CLUSTER_LABEL is set but LOOPBREAKER_PROMETHEUS_URL is not",
        ),
    ],
)
def test_bad_values_are_one_clear_error(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_settings(env(**values))
    assert "\n" not in str(caught.value)
    for secret in ("pw", "t", "p"):
        # Neither the password nor the token is ever part of the message.
        assert f"={secret!r}" not in str(caught.value)


def test_password_from_a_mounted_secret_file(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text("from-the-secret\n")  # a Secret key as `kubectl create secret` mounts it
    prom = load_settings(
        {**env(url=URL, username="lb"), "LOOPBREAKER_PROMETHEUS_PASSWORD_FILE": str(path)}
    ).prometheus
    assert prom.password is not None and prom.password.get() == "from-the-secret"
    assert repr(prom.password) == f"Secret(file={str(path)!r})"
    assert "from-the-secret" not in repr(prom)


def test_token_file_and_every_other_secret_take_file_too(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tok-from-file")
    slack = tmp_path / "slack"
    slack.write_text("xoxb-from-file")
    settings = load_settings(
        {
            **env(url=URL),
            "LOOPBREAKER_PROMETHEUS_BEARER_TOKEN_FILE": str(token),
            "LOOPBREAKER_SLACK_BOT_TOKEN_FILE": str(slack),
        }
    )
    assert settings.prometheus.bearer_token is not None
    assert settings.prometheus.bearer_token.get() == "tok-from-file"
    assert settings.chatops.slack_bot_token is not None
    assert settings.chatops.slack_bot_token.get() == "xoxb-from-file"
    assert settings.unknown == ()


@pytest.mark.parametrize("case", ["missing", "empty", "directory"])
def test_unusable_secret_file_names_the_variable(tmp_path: Path, case: str) -> None:
    path = tmp_path / "password"
    if case == "empty":
        path.write_text("\n")
    if case == "directory":
        path.mkdir()
    expected = {
        "missing": "cannot read it (No such file or directory)",
        "empty": "the file is empty",
        "directory": "cannot read it (Is a directory)",
    }[case]
    with pytest.raises(ConfigError) as caught:
        load_settings(
            {**env(url=URL, username="lb"), "LOOPBREAKER_PROMETHEUS_PASSWORD_FILE": str(path)}
        )
    assert str(caught.value) == f"LOOPBREAKER_PROMETHEUS_PASSWORD_FILE={str(path)!r}: {expected}"


def test_value_and_file_together_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text("x")
    with pytest.raises(ConfigError, match="PASSWORD and LOOPBREAKER_PROMETHEUS_PASSWORD_FILE"):
        load_settings(
            {
                **env(url=URL, username="lb", password="p"),
                "LOOPBREAKER_PROMETHEUS_PASSWORD_FILE": str(path),
            }
        )


# --- the deployed wiring -------------------------------------------------------------------


def scenario_context() -> Context:
    c = json.loads((SCENARIO / "scenario.json").read_text())["context"]
    return Context(
        cluster=c["cluster"],
        workload=c["workload"],
        issue_time=parse_rfc3339(c["issue_time"]),
        project=c["project"],
        location=c["location"],
        namespace=c["namespace"],
    )


def without_metrics(tmp_path: Path) -> Path:
    target = tmp_path / "telemetry"
    target.mkdir()
    for path in SCENARIO.iterdir():
        if path.name != "metrics.om":
            shutil.copy(path, target / path.name)
    return target


def test_build_evidence_reads_the_self_run_prometheus(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    prom = prometheus_factory([SCENARIO / "metrics.om"], basic_auth=("lb", "pw-9f3a"))
    password = tmp_path / "password"
    password.write_text("pw-9f3a\n")
    settings = load_settings(
        {
            **env(url=prom.url, username="lb", cluster_label="cluster"),
            "LOOPBREAKER_PROMETHEUS_PASSWORD_FILE": str(password),
            "LOOPBREAKER_TELEMETRY_DIR": str(without_metrics(tmp_path)),
            "LOOPBREAKER_LIVE_SOURCES": "false",
        },
        runtime=Runtime.CLOUD,
    )
    provider = build_evidence(settings)
    assert isinstance(provider, LiveEvidence)
    options = provider.options
    assert options.prometheus_url == prom.url and options.prometheus_cluster_label == "cluster"
    # Live sources off: the named Prometheus only, no fallback to Google's APIs.
    assert options.managed_prometheus is Mode.OFF and options.live_logs is Mode.OFF
    assert "pw-9f3a" not in repr(options)
    evidence = provider.collect(scenario_context(), QueryBudget(16))
    restarts = evidence.sources[EvidenceKind.RESTARTS]
    assert restarts.available, restarts
    assert restarts.source == f"prometheus:{prom.url}"
    assert evidence.sources[EvidenceKind.LOGS].source.startswith("file:")


def test_build_evidence_with_a_wrong_password_marks_metrics_unavailable(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    prom = prometheus_factory([SCENARIO / "metrics.om"], basic_auth=("lb", "pw-9f3a"))
    settings = load_settings(
        {
            **env(url=prom.url, username="lb", password="wrong"),
            "LOOPBREAKER_TELEMETRY_DIR": str(without_metrics(tmp_path)),
        },
        runtime=Runtime.CLOUD,
    )
    evidence = build_evidence(settings).collect(scenario_context(), QueryBudget(16))
    restarts = evidence.sources[EvidenceKind.RESTARTS]
    assert not restarts.available
    assert "HTTP 401 unauthenticated" in (restarts.reason or "")
    assert "wrong" not in (restarts.reason or "")


def test_without_the_url_the_wiring_is_unchanged(tmp_path: Path) -> None:
    local = load_settings({"LOOPBREAKER_TELEMETRY_DIR": str(tmp_path)})
    assert isinstance(build_evidence(local), TelemetryDirEvidence)
    cloud = build_evidence(load_settings({}, runtime=Runtime.CLOUD))
    assert isinstance(cloud, LiveEvidence)
    assert cloud.options.prometheus_url is None
    assert cloud.options.managed_prometheus is Mode.AUTO
