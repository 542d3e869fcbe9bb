"""loopbreaker replay reads the same hostile mixtures from a file to the end."""

from __future__ import annotations

import random
import sys
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostile.payloads import (
    ENTRY_PATHS,
    ENVELOPE_PATHS,
    host_error_entry,
    hostile_template,
    pubsub_message,
)
from hostile.servers import (
    HOSTILE,
    JSON_VALUES,
    PROFILE,
    PROJECT,
    render,
    set_path,
)
from loopbreaker.replay import run as replay
from loopbreaker.settings.load import load_settings

# --- replay: the same mixtures from a file ---------------------------------------------------


@st.composite
def replay_items(draw: st.DrawFn, run: str) -> bytes:
    """One line of a dead-letter file: a hostile item (anything a file can hold)."""
    kind = draw(st.sampled_from(["text", "json", "entry", "message"]))
    if kind == "text":
        # Never blank, never JSON: "#" starts no JSON text.
        return b"#" + draw(st.binary(max_size=40)).replace(b"\n", b" ")
    if kind == "json":
        return render(draw(st.one_of(JSON_VALUES, HOSTILE)))
    insert_id = f"hostile-{run}-{draw(st.integers(0, 10**9))}"
    entry = set_path(
        draw(hostile_template(insert_id, run)), draw(st.sampled_from(ENTRY_PATHS)), draw(HOSTILE)
    )
    if kind == "entry":
        return render(entry)
    message = set_path(
        {"message": pubsub_message(render(entry), str(draw(st.integers(0, 10**9))))},
        draw(st.sampled_from(ENVELOPE_PATHS)),
        draw(HOSTILE),
    )
    return render(message)


def valid_replay_item(run: str, number: int, as_message: bool) -> bytes:
    entry = host_error_entry(
        f"valid-{run}-{number}", f"gke-valid{run}-p-1a2b3c4d-{number:04x}", number
    )
    if as_message:
        return render(
            {"ackId": f"ack-{number}", "message": pubsub_message(render(entry), f"{number + 1}")}
        )
    return render(entry)


@PROFILE
@given(data=st.data(), as_array=st.booleans(), seed=st.integers(0, 2**32))
def test_replay_reads_every_mixture_to_the_end(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    as_array: bool,
    seed: int,
) -> None:
    rng = random.Random(seed)
    run = uuid.uuid4().hex[:8]
    bad = data.draw(st.lists(replay_items(run), min_size=1, max_size=6))
    good = [
        valid_replay_item(run, n, data.draw(st.booleans()))
        for n in range(data.draw(st.integers(1, 4)))
    ]
    lines = list(bad)
    for item in good:
        lines.insert(data.draw(st.integers(0, len(lines))), item)
    folder = tmp_path_factory.mktemp("replay")
    path = folder / ("dead.json" if as_array else "dead.jsonl")
    if as_array:
        # An array only holds JSON: the raw-text items become strings.
        items = [
            render(line.decode("utf-8", "replace")) if line[:1] == b"#" else line for line in lines
        ]
        path.write_bytes(b"[" + b",\n".join(items) + b"]")
    else:
        path.write_bytes(b"\n".join(lines) + b"\n")
    settings = load_settings({"LOOPBREAKER_PROJECT": PROJECT})
    store = folder / "incidents.sqlite"
    first = replay.run([path], settings=settings, store_path=store)
    assert first.read == len(lines) and first.unreadable == []
    assert first.accepted + first.duplicates + first.rejected_total == first.read
    [incident] = [i for i in first.incidents if str(i.key) == f"{PROJECT}/-/pool/gke-valid{run}-p"]
    assert incident.signal_count == len(good)
    assert {r["index"] for r in first.rejected} <= set(range(len(lines)))
    # The same items again, shuffled, into the same store: every valid one a duplicate.
    rng.shuffle(lines)
    again = folder / "again.jsonl"
    again.write_bytes(b"\n".join(lines) + b"\n")
    second = replay.run([again], settings=settings, store_path=store)
    [incident] = [i for i in second.incidents if str(i.key) == f"{PROJECT}/-/pool/gke-valid{run}-p"]
    assert incident.signal_count == len(good)


if __name__ == "__main__":  # pragma: no cover - a convenience for running one profile
    sys.exit(pytest.main([__file__, "-q"]))
