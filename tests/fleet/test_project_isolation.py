"""One project's evidence never joins another's verdict. A physical host may run VMs of
several projects; the failures that incidents of another project remember stay out of this
project's diagnosis, while its own project's history still counts."""

from __future__ import annotations

import json
from datetime import timedelta

import chatkit as K
import pytest
from fakes import FakeStore

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.diagnosis.evidence import TelemetryDirEvidence
from loopbreaker.incidents import Incident, IncidentKey, Scope, State
from loopbreaker.model import HostFailureRecord
from loopbreaker.timeutil import parse_rfc3339

# The bundled faulty host fails twice on 2026-05-20 from 08:4x (project
# customer-ai-project-123); earlier the same physical host failed three more times.
HOST = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
EARLIER = parse_rfc3339("2026-05-20T08:10:00Z")


def pool_verdict(remembered_by: str) -> str:
    store = FakeStore()
    key = IncidentKey(remembered_by, "tpu-cluster-prod", Scope.POOL, "gke-tpu-pool")
    store.incidents["inc-earlier"] = Incident(
        "inc-earlier", key, State.DIAGNOSED, EARLIER, EARLIER, EARLIER, EARLIER, EARLIER, None
    )
    for n in range(3):
        at = EARLIER - timedelta(minutes=40 * n)
        store.hosts[f"h-{n}"] = HostFailureRecord(HOST, f"gke-old-node-{n}", at, "inc-earlier")
    settings = K.chat_settings(LOOPBREAKER_SETTLE_TIME="0s")
    responder = build_responder(settings, store=store, evidence=TelemetryDirEvidence(K.FAULTY))
    for n, entry in enumerate(json.loads((K.FAULTY / "logs.json").read_text())):
        responder.handle_entry(f"m-{n}", entry)
    responder.settle()
    [pool] = [
        i for i in store.incidents.values() if i.id != "inc-earlier" and i.key.scope is Scope.POOL
    ]
    assert pool.diagnosis is not None and pool.diagnosis.root_cause == "faulty_host"
    return pool.diagnosis.summary


@pytest.mark.parametrize(
    ("remembered_by", "failures"),
    [("customer-ai-project-123", 4), ("other-team-4567", 2)],
    ids=["same-project-history-counts", "another-projects-history-does-not"],
)
def test_a_hosts_history_counts_only_within_its_project(remembered_by: str, failures: int) -> None:
    assert f"physical host {HOST} failed {failures} times" in pool_verdict(remembered_by)
