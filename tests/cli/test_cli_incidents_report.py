"""``loopbreaker incidents report|show|list`` on stores built through the real store API."""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopbreaker import incidents
from loopbreaker.approval.requests import Target
from loopbreaker.cli.main import main
from loopbreaker.incidents import Arrival, DiagnosisRecord, IncidentKey, Policy, Scope
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.model import HostFailureRecord, Signal, SignalKind

POLICY = Policy(grouping_window=timedelta(minutes=30), settle_time=timedelta(seconds=60))
NOW = datetime.now(UTC)
H100 = "nvidia-h100-80gb"
TPU = "tpu-v5p-slice"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cost(hours: float | None, accelerator: str | None = H100) -> dict[str, Any]:
    """A cost object in the documented diagnosis schema."""
    return {
        "accelerator": accelerator,
        "accelerators": 32,
        "restarts": 3,
        "downtime_s": 840.0,
        "lost_progress_s": None,
        "accelerator_hours": hours,
        "ettr": None,
        "basis": ["test"],
        "missing": [],
    }


def open_incident(
    store: SqliteStore,
    name: str,
    *,
    opened: datetime,
    signals: tuple[timedelta, ...] = (timedelta(0),),
) -> str:
    """One workload incident, its signals at ``opened + offset`` (event time)."""
    key = IncidentKey("proj", "prod", Scope.WORKLOAD, f"default/{name}")
    incident_id = ""
    for n, offset in enumerate(signals):
        at = opened + offset
        signal = Signal(
            kind=SignalKind.HOST_ERROR,
            timestamp=at,
            project="proj",
            cluster="prod",
            node=f"gke-{name}-{n}",
            insert_id=f"{name}-{n}",
            log_name="projects/proj/logs/events",
        )
        entry = {"insertId": signal.insert_id, "logName": signal.log_name}
        got = store.ingest(
            Arrival(key, signal, at, at, incidents.entry_id(entry), None, POLICY)
        ).joined
        assert got is not None
        incident_id = got
    return incident_id


def diagnose(
    store: SqliteStore,
    incident_id: str,
    *,
    at: datetime,
    root_cause: str,
    hosts: tuple[str, ...],
    workload: str,
    cost_object: dict[str, Any] | None,
) -> None:
    document: dict[str, Any] = {
        "context": {"cluster": "prod", "namespace": "default", "workload": workload},
        "suspect_hosts": [{"host": h, "failures": 1} for h in hosts],
    }
    if cost_object is not None:
        document["cost"] = cost_object
    record = DiagnosisRecord(
        at=at,
        root_cause=root_cause,
        remediation_path="inspect_application",
        requires_approval=False,
        summary="",
        suspect_hosts=hosts,
        signal_revision=0,
        queries=0,
        document=document,
    )
    changed = store.update(
        incident_id, lambda i: incidents.apply_diagnosis(i, record, now=at, policy=POLICY)
    )
    assert changed.changed


# (name, days ago, root cause, suspect hosts, workload, accelerator-hours, accelerator)
CASES = [
    ("a", 1, "faulty_host", ("host-x",), "llama", 41.2, H100),
    ("b", 2, "faulty_host", ("host-x",), "llama", 120.0, H100),
    ("c", 3, "faulty_host", ("host-x", "host-y"), "mistral", 150.8, H100),
    ("d", 4, "application", ("host-y",), "mistral", None, H100),  # cost unknown
    ("e", 5, "application", (), "gemma", 10.0, TPU),
    ("f", 6, "faulty_host", ("host-x",), "llama", None, None),  # no cost object at all
]


@pytest.fixture
def cost_store(tmp_path: Path) -> Path:
    path = tmp_path / "incidents.sqlite"
    store = SqliteStore(path)
    try:
        for name, days, cause, hosts, workload, hours, accelerator in CASES:
            opened = NOW - timedelta(days=days)
            incident_id = open_incident(store, name, opened=opened)
            cost_object = None if name == "f" else cost(hours, accelerator)
            diagnose(
                store,
                incident_id,
                at=opened + timedelta(minutes=2),
                root_cause=cause,
                hosts=hosts,
                workload=workload,
                cost_object=cost_object,
            )
        # An incident long before the default window, on a host failing twice then.
        old = NOW - timedelta(days=60)
        old_id = open_incident(store, "old", opened=old)
        diagnose(
            store,
            old_id,
            at=old + timedelta(minutes=2),
            root_cause="faulty_host",
            hosts=("host-old",),
            workload="ancient",
            cost_object=cost(999.0),
        )
        store.record_host_failures(
            [
                HostFailureRecord("host-old", "gke-old-0", old, old_id),
                HostFailureRecord("host-old", "gke-old-1", old + timedelta(minutes=25), old_id),
            ]
        )
    finally:
        store.close()
    return path


def report(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> dict[str, Any]:
    code, out, err = run(
        capsys, "incidents", "report", "--store", str(path), "--format", "json", *extra
    )
    assert code == 0, err
    figures: dict[str, Any] = json.loads(out)
    return figures


def expected(select: Any) -> dict[str | None, list[float]]:
    """Hand-computed from CASES: accelerator -> the hours of the selected incidents."""
    found: dict[str | None, list[float]] = {}
    for _name, _, cause, hosts, workload, hours, accelerator in CASES:
        if hours is not None and select(cause, hosts, workload):
            found.setdefault(accelerator, []).append(hours)
    return found


def units(row: dict[str, Any]) -> dict[str | None, tuple[int, float, float]]:
    return {u["accelerator"]: (u["incidents"], u["total"], u["median"]) for u in row["units"]}


def summary(values: dict[str | None, list[float]]) -> dict[str | None, tuple[int, float, float]]:
    return {
        a: (len(v), round(sum(v), 3), round(statistics.median(v), 3)) for a, v in values.items()
    }


def test_cost_per_host_cause_and_workload_from_the_stored_documents(
    capsys: pytest.CaptureFixture[str], cost_store: Path
) -> None:
    figures = report(capsys, cost_store)
    assert figures["incidents"] == len(CASES)  # the 60-day-old one is outside 30d
    cost = figures["cost"]
    assert units(cost["total"]) == summary(expected(lambda *_: True))
    # Unknown is counted apart, never as zero: d (null hours) and f (no cost object).
    assert cost["total"]["cost_unknown"] == 2
    hosts = {r["host"]: r for r in cost["by_host"]}
    assert set(hosts) == {"host-x", "host-y"}
    for host, row in hosts.items():
        assert units(row) == summary(expected(lambda c, h, w, host=host: host in h))
        assert row["incidents"] == sum(1 for case in CASES if host in case[3])
    assert hosts["host-x"]["cost_unknown"] == 1 and hosts["host-y"]["cost_unknown"] == 1
    # Hours of an H100 and of a TPU are never added: one unit each.
    causes = {r["root_cause"]: r for r in cost["by_root_cause"]}
    assert units(causes["application"]) == {TPU: (1, 10.0, 10.0)}
    assert units(causes["faulty_host"]) == summary(expected(lambda c, *_: c == "faulty_host"))
    workloads = {r["workload"]: r for r in cost["by_workload"]}
    assert set(workloads) == {"prod/default/llama", "prod/default/mistral", "prod/default/gemma"}
    assert units(workloads["prod/default/llama"]) == {H100: (2, 161.2, 80.6)}
    # The costliest host first, in the sentence that gets a host replaced.
    assert cost["by_host"][0]["host"] == "host-x"
    code, text, _ = run(capsys, "incidents", "report", "--store", str(cost_store))
    assert code == 0
    x_total = round(41.2 + 120.0 + 150.8)
    assert f"host-x: {x_total} accelerator-hours ({H100}) over 3 incident(s)" in text
    assert "cost unknown for 2 incident(s)" in text


def test_host_totals_add_up_across_incidents(
    capsys: pytest.CaptureFixture[str], cost_store: Path
) -> None:
    figures = report(capsys, cost_store)
    single_host = [c for c in CASES if len(c[3]) <= 1]
    assert single_host  # hosts of single-host incidents partition their hours
    by_host = {r["host"]: units(r) for r in figures["cost"]["by_host"]}
    shared = sum(c[5] or 0.0 for c in CASES if len(c[3]) > 1)
    counted = sum(t for row in by_host.values() for (_, t, _) in row.values())
    no_host = sum(c[5] or 0.0 for c in CASES if not c[3])
    total = sum(t for (_, t, _) in units(figures["cost"]["total"]).values())
    # Every hour is on a host once, an incident of two suspect hosts on both.
    assert counted == pytest.approx(total - no_host + shared)


def test_every_section_covers_the_same_window(
    capsys: pytest.CaptureFixture[str], cost_store: Path
) -> None:
    figures = report(capsys, cost_store)
    assert figures["repeat_offender_hosts"] == []  # host-old failed 60 days ago
    assert "host-old" not in {r["host"] for r in figures["cost"]["by_host"]}
    wide = report(capsys, cost_store, "--since", "90d")
    assert wide["incidents"] == len(CASES) + 1
    assert wide["repeat_offender_hosts"] == [{"host": "host-old", "failures": 2}]
    assert units(next(r for r in wide["cost"]["by_host"] if r["host"] == "host-old")) == {
        H100: (1, 999.0, 999.0)
    }
    # The report says which window, in JSON and text.
    since = datetime.fromisoformat(figures["since"].replace("Z", "+00:00"))
    until = datetime.fromisoformat(figures["until"].replace("Z", "+00:00"))
    assert until - since == timedelta(days=30)
    code, text, _ = run(capsys, "incidents", "report", "--store", str(cost_store))
    assert code == 0 and text.startswith("Window: ") and "host-old" not in text


def test_time_to_verdict_runs_from_the_signal_that_made_it_possible(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "incidents.sqlite"
    store = SqliteStore(path)
    first = NOW - timedelta(hours=3)
    second = timedelta(minutes=25)
    try:
        incident_id = open_incident(store, "twice", opened=first, signals=(timedelta(0), second))
        diagnose(
            store,
            incident_id,
            at=first + second + timedelta(seconds=90),
            root_cause="faulty_host",
            hosts=("host-z",),
            workload="twice",
            cost_object=None,
        )
    finally:
        store.close()
    figures = report(capsys, path)
    assert figures["seconds"]["signal_to_diagnosis"]["median"] == 90.0
    assert (
        figures["seconds"]["first_signal_to_diagnosis"]["median"]
        == (second + timedelta(seconds=90)).total_seconds()
    )
    # No approval: nothing on the wall clock, and never a diagnosis -> approval span.
    assert set(figures["wall_clock_seconds"]) == {
        "approval_to_remediated",
        "remediated_to_verified",
    }
    assert all(row["count"] == 0 for row in figures["wall_clock_seconds"].values())
    assert not any("approval" in name for name in figures["seconds"])


def test_a_linked_incident_shows_linked_to_and_its_holder_linked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "incidents.sqlite"
    store = SqliteStore(path)
    at = NOW - timedelta(hours=1)
    target = Target("gke-n-1", "gke-n-1", "4242", "us-east5-a", "proj", "host-1")
    try:
        holder = open_incident(store, "holder", opened=at)
        merged = open_incident(store, "merged", opened=at)
        record = DiagnosisRecord(
            at=at,
            root_cause="faulty_host",
            remediation_path="isolate_host",
            requires_approval=True,
            summary="",
            suspect_hosts=("host-1",),
            signal_revision=0,
            queries=0,
            target=target,
        )
        store.update(merged, lambda i: incidents.link(i, holder, record, now=at, policy=POLICY))
        store.update(holder, lambda h: incidents.note_linked(h, merged, 1, at))
    finally:
        store.close()
    code, out, _ = run(
        capsys, "incidents", "show", merged, "--store", str(path), "--format", "json"
    )
    assert code == 0 and json.loads(out)["linked_to"] == holder
    code, out, _ = run(
        capsys, "incidents", "show", holder, "--store", str(path), "--format", "json"
    )
    shown = json.loads(out)
    assert code == 0 and shown["linked"] == [merged] and shown["linked_to"] is None
    code, out, _ = run(capsys, "incidents", "show", merged, "--store", str(path))
    assert code == 0 and f"linked:   to {holder}" in out


@pytest.mark.parametrize("command", [["list"], ["show", "inc-1"], ["report"]])
def test_a_missing_default_store_points_at_the_stores_that_exist(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOOPBREAKER_STORE", raising=False)
    for where in ("demo", "replays/nightly"):
        (tmp_path / ".loopbreaker" / where).mkdir(parents=True)
        SqliteStore(tmp_path / ".loopbreaker" / where / "incidents.sqlite").close()
    code, out, err = run(capsys, "incidents", *command)
    assert code == 2 and out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err  # one line
    assert "no incident store at .loopbreaker/incidents.sqlite" in err
    for where in ("demo", "replays/nightly"):
        assert f".loopbreaker/{where}/incidents.sqlite" in err
    assert f"loopbreaker incidents {' '.join(command)} --store .loopbreaker/" in err
    assert not (tmp_path / ".loopbreaker" / "incidents.sqlite").exists()


def test_one_failure_merged_into_its_approval_is_counted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The A3 scenario replayed: the workload incident (which measured the cost) is merged
    into the node-pool incident that carries the approval, whose card shows the same cost;
    the report counts the failure once."""
    import remedkit as R

    from loopbreaker.cli.incidents.cost import cost_figures

    path = tmp_path / "incidents.sqlite"
    holder, _ = R.approve_faulty(path, R.A3)
    assert holder.diagnosis is not None and holder.diagnosis.document.get("cost_from")
    store = SqliteStore(path)
    try:
        stored = store.list_incidents()
    finally:
        store.close()
    assert len(stored) == 2  # the holder and the workload incident merged into it
    # The scenario is dated 2026-07: the figures, not the wall-clock window, are tested.
    cost = cost_figures(stored)
    [host] = [r for r in cost["by_host"] if r["host"] == "d41c7e9a2b6f08e35a1c9d7f4e2b6a80"]
    assert host["incidents"] == 1
    [unit] = host["units"]
    assert unit["total"] == pytest.approx(holder.diagnosis.document["cost"]["accelerator_hours"])


def test_a_host_failure_two_incidents_remember_counts_once(tmp_path: Path) -> None:
    """The replayed A3 failure: the node-pool incident and the workload's merged into it
    both remember the host's two failures; the report counts two, not four."""
    import remedkit as R

    from loopbreaker.cli.incidents.report import report_figures

    path = tmp_path / "incidents.sqlite"
    R.approve_faulty(path, R.A3)
    store = SqliteStore(path)
    try:
        chosen = store.list_incidents()
        records = list(store.host_history({"d41c7e9a2b6f08e35a1c9d7f4e2b6a80"}))
        assert len(records) == 4 and len({r.incident_id for r in records}) == 2
        opened = [i.opened_at for i in chosen]
        since, now = min(opened) - timedelta(days=1), max(opened) + timedelta(days=1)
        figures = report_figures(chosen, [], records, since=since, now=now)
    finally:
        store.close()
    assert figures["repeat_offender_hosts"] == [
        {"host": "d41c7e9a2b6f08e35a1c9d7f4e2b6a80", "failures": 2}
    ]
