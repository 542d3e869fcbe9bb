"""``loopbreaker pause|resume`` and ``loopbreaker incidents report`` through the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import chatkit as K
import pytest
import remedkit as R
from fakes import FakeClock, FakeEvidence, FakeNotifier

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.cli.main import main
from loopbreaker.incidents import State
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.model import Evidence, EvidenceKind, PodInfo, Sample, Series, SourceStatus
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import RemediationPolicy


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "incidents.sqlite"
    SqliteStore(path).close()
    return path


def test_pause_resume_round_trip(capsys: pytest.CaptureFixture[str], store_path: Path) -> None:
    code, out, _ = run(
        capsys, "pause", "--reason", "GPU fleet upgrade", "--until", "2h", "--by", "bob",
        "--store", str(store_path), "--format", "json",
    )  # fmt: skip
    assert code == 0
    paused = json.loads(out)["paused"]
    assert (paused["by"], paused["reason"], paused["resumed_at"]) == (
        "bob",
        "GPU fleet upgrade",
        None,
    )
    assert paused["until"] is not None
    # Paused already: nothing changes, exit 1, and it says by whom.
    code, out, _ = run(capsys, "pause", "--reason", "other", "--store", str(store_path))
    assert code == 1 and "already paused by bob" in out
    code, out, _ = run(capsys, "resume", "--by", "carol", "--store", str(store_path))
    assert code == 0 and "resumed by carol" in out and "GPU fleet upgrade" in out
    code, out, _ = run(capsys, "resume", "--store", str(store_path))
    assert code == 1 and "was not paused" in out
    store = SqliteStore(store_path)
    try:
        [period] = store.pauses(datetime(2000, 1, 1, tzinfo=UTC))
    finally:
        store.close()
    assert (period.by, period.resumed_by) == ("bob", "carol")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pause", "--reason", "  "], "needs a reason"),
        (["pause", "--reason", "x", "--until", "tomorrow-ish"], "--until 'tomorrow-ish'"),
        (["pause", "--reason", "x", "--until", "2020-01-01T00:00:00Z"], "is not after now"),
        (["incidents", "report", "--since", "a while"], "--since 'a while'"),
    ],
)
def test_bad_input_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], store_path: Path, argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, *argv, "--store", str(store_path))
    assert code == 2 and message in err, err


def test_report_of_a_verified_remediation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "incidents.sqlite"
    incident, request = R.approve_faulty(path)
    assert incident.approval is not None
    clock = FakeClock(incident.approval.at + timedelta(minutes=1))
    with R.lab(path, clock, tmp_path) as lab:
        report = lab.remediator(RemediationPolicy(dry_run=False)).handle(dict(request))
        assert report.result is Result.REMEDIATED
        done = lab.incident(incident.id)
        assert done.verification is not None
        since = done.verification.since
        flat = Series(
            "kube_jobset_restarts",
            {
                "cluster": "tpu-cluster-prod",
                "namespace": "default",
                "jobset_name": "llama3-70b-training",
            },
            tuple(Sample(since + timedelta(minutes=m), 8.0) for m in (-30, 30, 90, 121)),
        )
        pods = (
            PodInfo("llama3-70b-training-w-0", "default", "Running", R.NODE, "llama3-70b-training"),
        )
        ok = SourceStatus("test", True)
        found = Evidence(
            restarts=(flat,), pods=pods, signals=(), sources={EvidenceKind.RESTARTS: ok}
        )
        responder = build_responder(
            K.chat_settings(), store=lab.store, notifier=FakeNotifier(),
            evidence=FakeEvidence(found), clock=clock,
        )  # fmt: skip
        clock.now = since + timedelta(minutes=125)
        assert responder.settle(clock()).verified == [incident.id]
    code, out, err = run(capsys, "incidents", "show", incident.id, "--store", str(path))
    assert code == 0, err
    assert "verify:   verified" in out
    code, out, _ = run(
        capsys, "incidents", "report", "--since", "366d", "--store", str(path), "--format", "json"
    )
    assert code == 0
    figures = json.loads(out)
    # The host's incident, and the workload's: its pods' FailedScheduling Events (no pod
    # labels) join it by the JobSet's pod naming once the store knows the JobSet.
    assert figures["incidents"] == 2
    assert figures["by_root_cause"] == {
        "faulty_host": {State.VERIFIED.value: 1, State.DIAGNOSED.value: 1}
    }
    assert (figures["remediated"], figures["verified"], figures["recurred"]) == (1, 1, 0)
    assert figures["verified_share"] == 1.0 and figures["recurred_share"] == 0.0
    seconds = figures["seconds"]
    for stage in ("signal_to_diagnosis", "first_signal_to_diagnosis"):
        assert seconds[stage]["count"] == 2  # both incidents were diagnosed
    assert (
        seconds["signal_to_diagnosis"]["median"] <= seconds["first_signal_to_diagnosis"]["median"]
    )
    # The wall-clock steps after the approval, measured apart from the event-time ones.
    wall = figures["wall_clock_seconds"]
    assert done.remediation is not None and done.remediation.finished_at is not None
    assert wall["approval_to_remediated"]["median"] == (
        (done.remediation.finished_at - incident.approval.at).total_seconds()
    )
    assert wall["remediated_to_verified"]["count"] == 1
    assert wall["remediated_to_verified"]["median"] >= timedelta(hours=2).total_seconds()
    # The faulty host failed twice in the scenario: a repeat offender.
    assert figures["repeat_offender_hosts"][0]["host"] == R.HOST
    code, text, _ = run(capsys, "incidents", "report", "--since", "366d", "--store", str(path))
    assert code == 0
    assert "faulty_host" in text and "1 verified" in text and "verified 1 (100%)" in text
    assert R.HOST in text
