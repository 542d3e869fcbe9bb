"""``loopbreaker replay`` on the live timeline: event-time order, settling at on_schedule's
minutes, and directories read for their log files only (issues 30 and 31)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopbreaker.cli.main import main
from loopbreaker.timeutil import parse_rfc3339

ROOT = Path(__file__).resolve().parents[2]
FAULTY = ROOT / "examples" / "telemetry" / "faulty-host"
STORM = ROOT / "examples" / "events" / "storm.jsonl"
POOL_KEY = "customer-ai-project-123/-/pool/gke-tpu-cluster-prod-tpu-pool"
#: LOOPBREAKER_SETTLE_TIME's default.
SETTLE = timedelta(seconds=60)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _replay(capsys: pytest.CaptureFixture[str], logs: Path, store: Path) -> dict[str, Any]:
    """The replay summary, and per incident its diagnosis trail from the store."""
    summary = _cli(
        capsys, "replay", str(logs), "--telemetry", str(FAULTY), "--store", str(store),
        "--format", "json",
    )  # fmt: skip
    trails = {}
    for incident in summary["incidents"]:
        shown = _cli(capsys, "incidents", "show", incident["id"], "--store", str(store),
                     "--format", "json")  # fmt: skip
        # Approval requests are dated by the wall clock: only the replay's own timeline.
        trails[incident["key"]] = [
            (a["at"], a["from"], a["to"], a["note"])
            for a in shown["audit"]
            if a["actor"] in ("system", "system:diagnosis", "system:link")
        ]
    return {"summary": summary, "trails": trails}


def _entries() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((FAULTY / "logs.json").read_text())
    return entries


def _write(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(entries, indent=2))
    return path


def _verdicts(trail: list[tuple[str, str, str, str]]) -> list[tuple[str, str]]:
    """(at, root cause) of each diagnosis in the trail."""
    out = []
    for at, _, to, note in trail:
        if to in ("diagnosed", "awaiting_approval") and " -> " in note:
            out.append((at, note.removeprefix("re-diagnosed: ").split(" -> ")[0]))
    return out


def test_a_newest_first_export_replays_as_the_same_entries_oldest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ordered = sorted(_entries(), key=lambda e: parse_rfc3339(e["timestamp"]))
    # gcloud logging read writes newest first.
    newest = _replay(capsys, _write(tmp_path / "newest.json", ordered[::-1]), tmp_path / "a.db")
    oldest = _replay(capsys, _write(tmp_path / "oldest.json", ordered), tmp_path / "b.db")
    assert newest["trails"] == oldest["trails"]
    assert len(_verdicts(newest["trails"][POOL_KEY])) >= 2  # not a trivially empty trail
    keep = ("id", "key", "state", "counts", "first_event", "last_event", "root_cause")
    pick = [{k: i[k] for k in keep} for i in newest["summary"]["incidents"]]
    assert pick == [{k: i[k] for k in keep} for i in oldest["summary"]["incidents"]]
    assert newest["summary"]["accepted"] == oldest["summary"]["accepted"] == len(ordered)


def test_two_failures_of_one_host_are_host_error_then_faulty_host_at_live_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = sorted(_entries(), key=lambda e: parse_rfc3339(e["timestamp"]))
    # The scenario's failure chain opens with kernel lines in the node's journal and ends
    # with Compute Engine's automaticRestart: one chain per failure, 25 minutes apart.
    restarts = [
        parse_rfc3339(e["timestamp"])
        for e in entries
        if e.get("protoPayload", {}).get("methodName") == "compute.instances.automaticRestart"
    ]
    journal = [parse_rfc3339(e["timestamp"]) for e in entries if "node-journal" in e["logName"]]
    assert len(restarts) == 2 and timedelta(minutes=24) < restarts[1] - restarts[0]
    first_signal = journal[0]
    second_opens = min(t for t in journal if t > restarts[0])
    assert timedelta(minutes=24) < second_opens - first_signal < timedelta(minutes=26)
    # Live: each signal puts the settle time a minute after it; on_schedule, which waits
    # within its minute for each settle time, diagnoses at the chain's last signal plus the
    # settle time what had happened by then (not at the next minute after that).
    first_at = restarts[0] + SETTLE
    second_at = restarts[1] + SETTLE
    assert first_at < second_opens  # diagnosed before the second failure began

    replayed = _replay(capsys, FAULTY / "logs.json", tmp_path / "store.db")
    verdicts = _verdicts(replayed["trails"][POOL_KEY])
    assert [(parse_rfc3339(at), cause) for at, cause in verdicts] == [
        (first_at, "host_error"),
        (second_at, "faulty_host"),
    ]
    [pool] = [i for i in replayed["summary"]["incidents"] if i["key"] == POOL_KEY]
    assert parse_rfc3339(pool["first_event"]) == first_signal
    # From the first signal: under 4 minutes to host_error, under half an hour to
    # faulty_host; not the 56 minutes of a clock that jumped to the newest entry.
    to_first = (first_at - first_signal).total_seconds()
    to_second = (second_at - first_signal).total_seconds()
    assert to_first < 240 and to_second < 1800
    shown = _cli(capsys, "incidents", "show", pool["id"], "--store", str(tmp_path / "store.db"),
                 "--format", "json")  # fmt: skip
    assert parse_rfc3339(shown["diagnosis"]["at"]) == second_at


def test_a_directory_is_read_for_its_log_files_and_names_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "storm.jsonl").write_bytes(STORM.read_bytes())
    (tmp_path / "README.md").write_text("# not a log\n\nsome prose\n")
    (tmp_path / "generate.py").write_text("print('hello')\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("{}\n")
    summary = _cli(capsys, "replay", str(tmp_path), "--format", "json")
    alone = _cli(capsys, "replay", str(STORM), "--format", "json")
    # The same replay as the log file alone: nothing of the others was read.
    for key in ("read", "accepted", "duplicates", "rejected_total"):
        assert summary[key] == alone[key]
    assert sorted(Path(s).name for s in summary["skipped"]) == [
        "README.md",
        "generate.py",
        "todo.txt",
    ]
    assert alone["skipped"] == []
    capsys.readouterr()
    assert main(["replay", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    [line] = [s for s in text.splitlines() if s.startswith("Skipped")]
    assert "3 file(s)" in line and "README.md" in line and "generate.py" in line


def test_a_file_named_on_its_own_is_read_whatever_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "export.log"
    log.write_bytes(STORM.read_bytes())
    summary = _cli(capsys, "replay", str(log), "--format", "json")
    assert summary["read"] == 353 and summary["skipped"] == []


def test_the_clock_never_runs_back_for_entries_without_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = sorted(_entries(), key=lambda e: parse_rfc3339(e["timestamp"]))
    untimed = dict(entries[-1], insertId="no-time")
    del untimed["timestamp"]
    untimed.pop("receiveTimestamp", None)
    mixed = [untimed, *entries[::-1]]
    summary = _cli(capsys, "replay", str(_write(tmp_path / "m.json", mixed)), "--format", "json")
    assert summary["read"] == len(mixed) and summary["rejected_total"] == 0
    # Every incident opened at an entry's own time, not the wall clock.
    now = datetime.now(UTC)
    assert all(parse_rfc3339(i["first_event"]) < now - timedelta(days=1)
               for i in summary["incidents"])  # fmt: skip
