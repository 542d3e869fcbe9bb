"""One failure, one approval request: incidents tied by their target are linked, not asked
twice, however they reach the store and however settles race."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeClock, FakeNotifier, StoreFactory

from loopbreaker.incidents import State
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.responder.service import Approvals, Responder
from loopbreaker.settings.load import Runtime, load_settings
from loopbreaker.signals.classify import classify
from loopbreaker.timeutil import parse_rfc3339

ROOT = Path(__file__).resolve().parents[2]
FAULTY = ROOT / "examples" / "telemetry" / "faulty-host"
CLI = Path(sys.executable).with_name("loopbreaker")
KEY = "one-approval-signing-key-0123456789"
ENV = {"LOOPBREAKER_ACTION_SIGNING_KEY": KEY, "LOOPBREAKER_APPROVERS": "U024BE7LH"}
NCCL = (
    "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=118342, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
    "Timeout(ms)=600000) ran for 600027 milliseconds before timing out."
)


def failure_with_the_workloads_own_errors(tmp_path: Path) -> Path:
    """faulty-host's log sink entries (GKE node and Compute VM entries of the failing host)
    plus the JobSet's coordinator logging an NCCL watchdog timeout as the node dies."""
    entries: list[dict[str, Any]] = json.loads((FAULTY / "logs.json").read_text())
    worker = next(
        e
        for e in entries
        if e["resource"]["type"] == "k8s_container"
        and e.get("labels", {}).get("k8s-pod/jobset_sigs_k8s_io/job-index") == "0"
    )
    for n, stamp in enumerate(("2026-05-20T08:20:40Z", "2026-05-20T08:20:41Z")):
        line = copy.deepcopy(worker)
        line.update(insertId=f"nccl-{n}", timestamp=stamp, severity="ERROR", textPayload=NCCL)
        line["logName"] = line["logName"].replace("stdout", "stderr")
        entries.append(line)
    path = tmp_path / "failure.json"
    path.write_text(json.dumps(entries))
    return path


def replay(path: Path, store: Path) -> dict[str, Any]:
    env = {**os.environ, **ENV}
    out = subprocess.run(
        [str(CLI), "replay", str(path), "--telemetry", str(FAULTY), "--store", str(store)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return {"stdout": out.stdout, "stderr": out.stderr}


def test_a_replayed_failure_with_its_workload_errors_asks_for_one_approval(tmp_path: Path) -> None:
    store_path = tmp_path / "incidents.sqlite"
    replay(failure_with_the_workloads_own_errors(tmp_path), store_path)
    store = SqliteStore(store_path)
    try:
        found = store.list_incidents()
    finally:
        store.close()
    assert len(found) >= 2, [i.key for i in found]  # the pool and the workload
    asking = [i for i in found if i.state is State.AWAITING_APPROVAL and i.approval_request]
    assert len(asking) == 1
    [holder] = asking
    linked = [i for i in found if i.linked_to is not None]
    assert linked and all(i.linked_to == holder.id for i in linked)
    assert {i.id for i in linked} == set(holder.linked)
    for other in linked:
        assert other.approval_request is None and other.chat is None  # silenced
        assert other.diagnosis is not None and other.diagnosis.root_cause == "faulty_host"
        assert any(f"merged {other.id}" in a.note for a in holder.audit)
        assert any(f"linked to {holder.id}" in a.note for a in other.audit)


@pytest.mark.parametrize("settles", [1, 4])
def test_racing_settles_never_open_two_requests_for_one_instance(
    tmp_path: Path, settles: int, store_factory: StoreFactory
) -> None:
    entries = json.loads(failure_with_the_workloads_own_errors(tmp_path).read_text())
    evidence_dir = FAULTY
    from loopbreaker.diagnosis.evidence import TelemetryDirEvidence

    first = parse_rfc3339(min(e["timestamp"] for e in entries))
    clock = FakeClock(first)
    stores: list[IncidentStore] = [store_factory() for _ in range(settles)]
    notifier = FakeNotifier()
    settings = load_settings(ENV, runtime=Runtime.LOCAL)
    responders = [
        Responder(
            settings=settings,
            store=s,
            evidence=TelemetryDirEvidence(evidence_dir),
            notifier=notifier,
            clock=clock,
            approvals=Approvals.of(settings),
        )
        for s in stores
    ]
    for n, entry in enumerate(entries):
        classify(entry)  # every entry is a LogEntry the classifier takes
        responders[0].handle_entry(f"m{n}", entry)
    clock.advance(seconds=7200)
    start = threading.Barrier(settles)

    def settle(r: Responder) -> None:
        start.wait()
        r.settle()

    threads = [threading.Thread(target=settle, args=(r,)) for r in responders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    found = stores[0].list_incidents()
    requests = [i.approval_request.target.instance_id for i in found if i.approval_request]
    assert len(requests) == 1, [(i.id, i.state) for i in found]
    posted = {m.incident_id for m in notifier.posted if m.approval is not None}
    assert len(posted) == 1
