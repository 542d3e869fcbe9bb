"""The reading half of a replay, in-process and in a child process: the same records."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from loopbreaker import incidents
from loopbreaker.replay import reader as replay_reader
from loopbreaker.replay import run as replay
from loopbreaker.replay.reader import DELIVERY, ERROR, QUIET
from loopbreaker.settings.load import Runtime, load_settings
from loopbreaker.signals import files
from loopbreaker.signals.envelope import Delivery

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "examples" / "events"


def read_all(paths: list[Path], *, child: bool) -> list[tuple[object, ...]]:
    with replay_reader.read(files.expand(paths), child=child) as records:
        return list(records)


@pytest.fixture
def mixed(tmp_path: Path) -> list[Path]:
    """The bundled storms, and a file with a broken line and an array cut short."""
    broken = tmp_path / "broken.jsonl"
    lines = (EVENTS / "storm.jsonl").read_text().splitlines()[:20]
    broken.write_text("\n".join([*lines[:5], "{not json", *lines[5:]]) + "\n")
    cut = tmp_path / "cut.json"
    cut.write_text("[" + ",".join(lines[:3]) + ",{")
    return [EVENTS / "storm.jsonl", EVENTS / "storm.pubsub.json", broken, cut]


def test_a_child_process_reads_what_this_process_reads(mixed: list[Path]) -> None:
    here = read_all(mixed, child=False)
    there = read_all(mixed, child=True)
    assert there == here
    kinds = {r[0] for r in here}
    assert kinds == {QUIET, DELIVERY, ERROR}  # every kind of record is compared
    unreadable = [r[5] for r in here if r[0] == ERROR and r[5]]
    assert len(unreadable) == 1 and "cut.json" in unreadable[0]


def test_a_replay_read_by_a_child_process_is_the_same_replay(mixed: list[Path]) -> None:
    settings = load_settings({"LOOPBREAKER_PROJECT": "example-project"}, runtime=Runtime.LOCAL)
    summaries = [
        replay.run(mixed, settings=settings, reader_process=child).to_dict()
        for child in (False, True)
    ]
    assert summaries[0]["read"] > 700 and summaries[0]["incidents"]
    assert json.dumps(summaries[0], sort_keys=True) == json.dumps(summaries[1], sort_keys=True)


def test_a_reader_process_that_dies_is_an_error_naming_why(tmp_path: Path) -> None:
    # Killed half way (the OOM killer, a signal): the replay fails and says so, never
    # ends as if the input were shorter.
    path = tmp_path / "many.jsonl"
    entry = json.dumps({"resource": {"type": "global"}, "textPayload": "x"})
    # More records than the pipe holds: the child is still there when it is killed.
    path.write_text((entry + "\n") * 100_000)
    with (
        pytest.raises(RuntimeError) as caught,
        replay_reader.read([path], child=True) as records,
    ):
        next(records)
        me = os.getpid()
        children = Path(f"/proc/{me}/task/{me}/children").read_text().split()
        # Other tests' servers may be children too: the reader is the one running it.
        [child] = [
            c
            for c in children
            if b"loopbreaker.replay.reader" in Path(f"/proc/{c}/cmdline").read_bytes()
        ]
        os.kill(int(child), signal.SIGKILL)
        list(records)
    assert "reader process failed" in str(caught.value)
    assert "status -9" in str(caught.value)


def test_a_file_gone_after_the_check_is_unreadable_in_either_reader(tmp_path: Path) -> None:
    # The replay checks its paths first; a file that goes meanwhile is reported where it
    # would have been read, and the rest is read.
    gone, kept = tmp_path / "gone.jsonl", tmp_path / "kept.jsonl"
    kept.write_text('{"a": 1}\n')
    for child in (False, True):
        with replay_reader.read([gone, kept], child=child) as records:
            got = list(records)
        assert got[0][0] == ERROR and "cannot read" in got[0][5] and "gone.jsonl" in got[0][5]
        assert [r[0] for r in got[1:]] == [DELIVERY]


def test_the_default_reads_small_inputs_in_process(mixed: list[Path]) -> None:
    with replay_reader.read(files.expand(mixed)) as records:
        assert not hasattr(records, "pid") and type(records).__name__ == "generator"
        assert records.gi_code is replay_reader.records.__code__  # type: ignore[attr-defined]


def test_event_time_prefers_the_entry_then_the_sink_then_pubsub() -> None:
    sink = {"logging.googleapis.com/timestamp": "2026-05-20T08:00:02Z"}
    entry = {"timestamp": "2026-05-20T08:00:01Z", "receiveTimestamp": "2026-05-20T08:00:09Z"}
    times = [
        replay_reader.event_time(Delivery(None, entry, "2026-05-20T08:00:03Z", sink)),
        replay_reader.event_time(
            Delivery(None, {"timestamp": "bad"}, "2026-05-20T08:00:03Z", sink)
        ),
        replay_reader.event_time(Delivery(None, {}, "2026-05-20T08:00:03Z")),
        replay_reader.event_time(Delivery(None, {})),
    ]
    assert [t.second if t else None for t in times] == [1, 2, 3, None]


def test_a_quiet_record_makes_the_entry_s_own_dedup_id(tmp_path: Path) -> None:
    # The reader leaves hashing an id with an insertId to the replay; either way the id
    # is the one the functions give the same entry.
    base = {
        "logName": "projects/p/logs/stdout",
        "resource": {"type": "k8s_container", "labels": {"cluster_name": "c"}},
        "timestamp": "2026-05-20T08:00:01.123456789Z",
        "textPayload": "step 7 | loss 2.1",
    }
    entries = [
        {**base, "insertId": "a1"},
        {**base, "insertId": "a1", "timestamp": "2026-05-20T08:00:02Z"},
        base,  # no insertId: the whole entry is hashed
        {**base, "insertId": ""},
    ]
    path = tmp_path / "quiet.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    records = read_all([path], child=False)
    assert [r[0] for r in records] == [QUIET] * len(entries)
    ids = [replay_reader.entry_id(r[3], r[6]) for r in records]
    assert ids == [incidents.entry_id(e) for e in entries]
    assert len(set(ids)) == len(entries)
