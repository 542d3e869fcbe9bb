"""The sink filters catch every signal kind the classifier knows, and no ordinary logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeservers.lqleval import matches

from loopbreaker.diagnosis import lql
from loopbreaker.model import SignalKind
from loopbreaker.signals import sink_filters
from loopbreaker.signals.classify import classify

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "data" / "signals").glob("*.json"))


def load(path: Path) -> tuple[dict[str, object], str]:
    data = json.loads(path.read_text())
    return data["entry"], data["expect"]["kind"]


def test_the_terraform_file_is_generated_from_the_filters() -> None:
    on_disk = (ROOT / sink_filters.TERRAFORM_FILE).read_text()
    assert on_disk == sink_filters.render(), "run python -m loopbreaker.signals.sink_filters"


@pytest.mark.parametrize("name", sorted(sink_filters.FILTERS))
def test_every_filter_parses_as_lql(name: str) -> None:
    assert lql.parse(sink_filters.FILTERS[name]) is not None


def test_every_signal_kind_is_meant_to_be_caught_by_some_filter() -> None:
    covered = set().union(*sink_filters.KINDS.values())
    assert covered == set(SignalKind) - {SignalKind.UNRECOGNIZED, SignalKind.ALERT_RESOLVED}


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_each_golden_entry_reaches_the_responder_exactly_when_it_is_a_signal(path: Path) -> None:
    entry, kind = load(path)
    assert classify(entry).kind.value == kind
    hits = [name for name, q in sink_filters.FILTERS.items() if matches(q, entry)]
    if kind == SignalKind.UNRECOGNIZED.value:
        if path.stem in ("unrecognized_training_step", "unrecognized_nccl_info"):
            assert hits == [], f"ordinary container logs must not be exported: {hits}"
        return
    assert hits, f"no sink filter matches a {kind} entry"
    assert any(SignalKind(kind) in sink_filters.KINDS[h] for h in hits)


def test_ordinary_container_logs_of_a_training_job_are_not_exported() -> None:
    entry, _ = load(ROOT / "tests" / "data" / "signals" / "nccl_timeout_watchdog_coordinator.json")
    for line in ("step 4100 loss 1.92", "NCCL INFO Channel 00/08 : 0[0] -> 1[1] via P2P", ""):
        quiet = {**entry, "textPayload": line}
        assert not any(matches(q, quiet) for q in sink_filters.FILTERS.values()), line
