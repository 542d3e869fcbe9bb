"""`diagnose --prometheus-url` against a Prometheus that wants credentials.

Basic auth: a real Prometheus started with ``--web.config.file`` (``basic_auth_users``, a
bcrypt hash), back-filled from a bundled scenario. Bearer token: the same real Prometheus
behind a token-checking auth proxy (tests/fakeservers/auth_proxy.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fakeservers.auth_proxy import BearerAuthProxy
from harness.fixtures import PrometheusFactory

from loopbreaker.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples" / "telemetry" / "faulty-host"
USER, PASSWORD = "loopbreaker", "s3cret-Pa55word"
TOKEN = "prom-token-0123456789abcdef"


def context_args() -> list[str]:
    spec = json.loads((SCENARIO / "scenario.json").read_text())
    return [
        arg
        for key, value in spec["context"].items()
        if value
        for arg in (f"--{key.replace('_', '-')}", value)
    ]


@pytest.fixture
def no_metrics(tmp_path: Path) -> Path:
    """The scenario without metrics.om: every metric has to come from the Prometheus."""
    target = tmp_path / "telemetry"
    target.mkdir()
    for path in SCENARIO.iterdir():
        if path.name != "metrics.om":
            shutil.copy(path, target / path.name)
    return target


def secret_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def diagnose(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(["diagnose", *context_args(), *argv, "--format", "json", "--offline"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else None, captured.out + captured.err


def offline_verdict(capsys: pytest.CaptureFixture[str]) -> tuple[Any, ...]:
    code, out, _ = diagnose(capsys, "--telemetry", str(SCENARIO))
    assert code == 0
    return verdict(out)


def verdict(out: dict[str, Any]) -> tuple[Any, ...]:
    return (out["root_cause"], out["restart_loop"], out["restart_increase"], out["partial"])


def test_basic_auth_reads_the_prometheus(
    tmp_path: Path,
    no_metrics: Path,
    prometheus_factory: PrometheusFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prom = prometheus_factory([SCENARIO / "metrics.om"], basic_auth=(USER, PASSWORD))
    # Newline-terminated, as `echo ... > file` and most Secret mounts write it.
    password = secret_file(tmp_path, "password", PASSWORD + "\n")
    code, out, text = diagnose(
        capsys,
        "--telemetry",
        str(no_metrics),
        "--prometheus-url",
        prom.url,
        "--prometheus-username",
        USER,
        "--prometheus-password-file",
        str(password),
    )
    assert code == 0, text
    assert verdict(out) == offline_verdict(capsys)
    assert out["root_cause"] == "faulty_host"
    step1 = out["steps"][0]
    assert step1["status"] == "done"
    assert step1["sources"] == [f"prometheus:{prom.url}"]
    assert PASSWORD not in text


def test_wrong_password_marks_the_metrics_unavailable_without_echoing_it(
    tmp_path: Path,
    no_metrics: Path,
    prometheus_factory: PrometheusFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prom = prometheus_factory([SCENARIO / "metrics.om"], basic_auth=(USER, PASSWORD))
    wrong = "not-the-password"
    password = secret_file(tmp_path, "password", wrong)
    base = ["--telemetry", str(no_metrics), "--prometheus-url", prom.url]
    code, out, text = diagnose(
        capsys, *base, "--prometheus-username", USER, "--prometheus-password-file", str(password)
    )
    assert code == 0, text
    assert out["partial"] is True
    missing = " ".join(json.dumps(m) for m in out["missing_evidence"])
    assert "HTTP 401 unauthenticated" in missing
    assert not any(f"prometheus:{prom.url}" in s for st in out["steps"] for s in st["sources"])
    assert wrong not in text and PASSWORD not in text
    # No credentials at all: the same clear refusal.
    code, out, _ = diagnose(capsys, *base)
    assert code == 0 and out["partial"] is True
    assert "HTTP 401 unauthenticated" in json.dumps(out["missing_evidence"])


def test_bearer_token_is_sent_as_authorization_header(
    tmp_path: Path,
    no_metrics: Path,
    prometheus_factory: PrometheusFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prom = prometheus_factory([SCENARIO / "metrics.om"])
    token = secret_file(tmp_path, "token", TOKEN + "\n")
    with BearerAuthProxy(prom.url, TOKEN) as proxy:
        code, out, text = diagnose(
            capsys,
            "--telemetry",
            str(no_metrics),
            "--prometheus-url",
            proxy.url,
            "--prometheus-bearer-token-file",
            str(token),
        )
        assert code == 0, text
        assert proxy.requests, "nothing reached the proxy"
        assert {r.headers.get("authorization") for r in proxy.requests} == {f"Bearer {TOKEN}"}
        assert all(r.path.startswith("/api/v1/") for r in proxy.requests)
        assert out["steps"][0]["sources"] == [f"prometheus:{proxy.url}"]
    assert verdict(out) == offline_verdict(capsys)
    assert TOKEN not in text


def test_a_wrong_token_is_refused_and_not_echoed(
    tmp_path: Path, no_metrics: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = secret_file(tmp_path, "token", "wrong-token-value")
    with BearerAuthProxy("http://127.0.0.1:9", TOKEN) as proxy:
        code, out, text = diagnose(
            capsys,
            "--telemetry",
            str(no_metrics),
            "--prometheus-url",
            proxy.url,
            "--prometheus-bearer-token-file",
            str(token),
        )
        assert code == 0, text
        assert proxy.requests
    assert out["partial"] is True
    assert "HTTP 401 unauthenticated" in json.dumps(out["missing_evidence"])
    assert "wrong-token-value" not in text


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--prometheus-username", USER, "--prometheus-password-file", "{missing}"],
            "--prometheus-password-file {missing}: cannot read it (No such file or directory)",
        ),
        (
            ["--prometheus-username", USER, "--prometheus-password-file", "{empty}"],
            "--prometheus-password-file {empty}: the file is empty",
        ),
        (
            ["--prometheus-bearer-token-file", "{tmp}"],
            "--prometheus-bearer-token-file {tmp}: cannot read it (Is a directory)",
        ),
        (
            ["--prometheus-username", USER],
            "basic auth needs both --prometheus-username and --prometheus-password-file",
        ),
        (
            ["--prometheus-password-file", "{empty}"],
            "basic auth needs both --prometheus-username and --prometheus-password-file",
        ),
        (
            [
                "--prometheus-bearer-token-file",
                "{token}",
                "--prometheus-username",
                USER,
                "--prometheus-password-file",
                "{token}",
            ],
            "--prometheus-bearer-token-file and --prometheus-username/--prometheus-password-file"
            " are exclusive: use one",
        ),
    ],
    ids=["missing", "empty", "directory", "no-password", "no-username", "both"],
)
def test_bad_auth_flags_are_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    paths = {
        "missing": str(tmp_path / "missing"),
        "empty": str(secret_file(tmp_path, "empty", " \n")),
        "token": str(secret_file(tmp_path, "token", TOKEN)),
        "tmp": str(tmp_path),
    }
    argv = [flag.format(**paths) for flag in flags]
    capsys.readouterr()
    code = main(
        ["diagnose", *context_args(), "--telemetry", str(SCENARIO), "--prometheus-url",
         "http://127.0.0.1:9", *argv]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err == f"loopbreaker: error: {message.format(**paths)}\n"
    assert TOKEN not in captured.err


def test_auth_flags_without_a_prometheus_url_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = secret_file(tmp_path, "token", TOKEN)
    capsys.readouterr()
    argv = ["--telemetry", str(SCENARIO), "--prometheus-bearer-token-file", str(token)]
    code = main(["diagnose", *context_args(), *argv])
    assert code == 2
    assert capsys.readouterr().err == (
        "loopbreaker: error: Prometheus auth flags need --prometheus-url\n"
    )


def test_wrong_password_with_no_other_source_is_one_line_naming_the_401(
    tmp_path: Path, prometheus_factory: PrometheusFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    prom = prometheus_factory([SCENARIO / "metrics.om"], basic_auth=(USER, PASSWORD))
    password = secret_file(tmp_path, "password", "not-the-password")
    code, _, text = diagnose(
        capsys,
        "--prometheus-url",
        prom.url,
        "--prometheus-username",
        USER,
        "--prometheus-password-file",
        str(password),
    )
    assert code == 2
    [line] = text.splitlines()
    assert line.startswith("loopbreaker: error: no source yielded any data")
    assert f"prometheus:{prom.url}: HTTP 401 unauthenticated" in line
    assert "not-the-password" not in line


def test_validate_queries_runs_live_behind_basic_auth(
    tmp_path: Path, prometheus_factory: PrometheusFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    from loopbreaker.cli.main import main

    prom = prometheus_factory([SCENARIO / "metrics.om"], basic_auth=(USER, PASSWORD))
    argv = ["validate-queries", "--prometheus-url", prom.url, "--format", "json"]
    good = secret_file(tmp_path, "good", PASSWORD)
    assert (
        main([*argv, "--prometheus-username", USER, "--prometheus-password-file", str(good)]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    live = [r for r in report["results"] if r["check"].startswith("live ")]
    # Every PromQL template, in both vocabularies, ran against the authenticated server.
    assert len(live) >= 40 and all(r["status"] == "pass" for r in live)
    bad = secret_file(tmp_path, "bad", "wrong")
    main([*argv, "--prometheus-username", USER, "--prometheus-password-file", str(bad)])
    refused = json.loads(capsys.readouterr().out)
    skipped = [r for r in refused["results"] if r["check"].startswith("live ")]
    assert skipped and all(r["status"] == "skip" for r in skipped)
    assert "401" in skipped[0]["message"] and "wrong" not in json.dumps(refused)
