"""Outcome verification from ``on_schedule``, on SQLite, the Firestore emulator and the fake.

The faulty-host incident is remediated for real (the executor against the local
Kubernetes, Compute Engine and Support servers), then watched by ``settle``: restarts
that stop make it ``verified``; restarts that resume with the workload on the same host,
or the recreated VM reported on the same host, make it ``recurred``; a restart elsewhere
opens a new incident linked to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import chatkit as K
import pytest
import remedkit as R
from fakes import FakeClock, FakeEvidence, FakeNotifier, StoreFactory

from loopbreaker import incidents
from loopbreaker.app.bootstrap import build_responder
from loopbreaker.approval.repair import RepairPath
from loopbreaker.incidents import Arrival, Incident, Policy, State, Verdict
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.model import (
    Evidence,
    EvidenceKind,
    NodeInfo,
    PodInfo,
    Sample,
    Series,
    Signal,
    SignalKind,
    SourceStatus,
)
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import RemediationPolicy
from loopbreaker.responder.service import Responder

WORKLOAD = "llama3-70b-training"
OTHER_NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-p2m4"
OTHER_HOST = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"


@pytest.fixture(scope="module")
def remediated(tmp_path_factory: pytest.TempPathFactory) -> Incident:
    """The faulty-host incident after a live remediation through the real clients."""
    tmp = tmp_path_factory.mktemp("remediated")
    incident, request = R.approve_faulty(tmp / "incidents.sqlite")
    assert incident.approval is not None
    clock = FakeClock(incident.approval.at + timedelta(minutes=1))
    with R.lab(tmp / "incidents.sqlite", clock, tmp) as lab:
        report = lab.remediator(RemediationPolicy(dry_run=False)).handle(dict(request))
        assert report.result is Result.REMEDIATED, report
        done = lab.incident(incident.id)
    assert done.verification is not None and done.verification.host == R.HOST
    return done


def seed(store: IncidentStore, template: Incident) -> Incident:
    """Put the remediated incident into ``store`` (ingest one signal, then write it)."""
    signal = Signal(
        SignalKind.HOST_ERROR,
        template.first_event,
        project=R.PROJECT,
        cluster="tpu-cluster-prod",
        location="us-east5",
        node=R.NODE,
        insert_id="seed",
    )
    arrival = Arrival(
        key=template.key,
        signal=signal,
        event_time=template.first_event,
        now=template.opened_at,
        entry_id=incidents.digest(f"seed/{template.id}"),
        message_id=None,
        policy=Policy(),
    )
    result = store.ingest(arrival)
    assert result.joined is not None
    copied = replace(template, id=result.joined)
    store.update(result.joined, lambda _: copied)
    found = store.get(result.joined)
    assert found is not None and found.state is State.REMEDIATED
    return found


def restarts(since: datetime, values: list[tuple[int, float]]) -> Series:
    """kube_jobset_restarts of the workload: (minutes after ``since``, value)."""
    return Series(
        "kube_jobset_restarts",
        {"cluster": "tpu-cluster-prod", "namespace": "default", "jobset_name": WORKLOAD},
        tuple(Sample(since + timedelta(minutes=m), float(v)) for m, v in values),
    )


def evidence(
    series: Series, *, pod_node: str = OTHER_NODE, vm_id: str = "7001", vm_host: str = OTHER_HOST
) -> Evidence:
    nodes = (
        # The recreated VM: same name, a new id, wherever Compute placed it.
        NodeInfo(R.NODE, "tpu-pool", vm_host, R.ZONE, R.NODE, R.PROJECT, True, instance_id=vm_id),
        NodeInfo(OTHER_NODE, "tpu-pool", OTHER_HOST, R.ZONE, OTHER_NODE, R.PROJECT, True),
    )
    pods = (PodInfo(f"{WORKLOAD}-workers-0-0", "default", "Running", pod_node, WORKLOAD),)
    ok = SourceStatus("test", True)
    return Evidence(
        restarts=(series,),
        nodes=nodes,
        pods=pods,
        signals=(),
        sources={EvidenceKind.RESTARTS: ok, EvidenceKind.NODES: ok, EvidenceKind.PODS: ok},
    )


class Watch:
    def __init__(self, store: IncidentStore, incident: Incident, found: Evidence) -> None:
        check = incident.verification
        assert check is not None
        self.store, self.incident, self.since = store, incident, check.since
        self.clock = FakeClock(check.since)
        self.notifier = FakeNotifier()
        self.evidence = FakeEvidence(found)
        self.responder: Responder = build_responder(
            K.chat_settings(),
            store=store,
            notifier=self.notifier,
            evidence=self.evidence,
            clock=self.clock,
        )

    def at(self, minutes: float) -> Any:
        self.clock.now = self.since + timedelta(minutes=minutes)
        return self.responder.settle(self.clock())

    def current(self) -> Incident:
        found = self.store.get(self.incident.id)
        assert found is not None
        return found


@pytest.fixture
def store(store_factory: StoreFactory) -> Iterator[IncidentStore]:
    yield store_factory()


def test_restarts_that_stop_make_it_verified(store: IncidentStore, remediated: Incident) -> None:
    incident = seed(store, remediated)
    check = incident.verification
    assert check is not None
    flat = restarts(check.since, [(-30, 8), (-1, 8), (20, 8), (60, 8), (119, 8), (125, 8)])
    watch = Watch(store, incident, evidence(flat))
    assert watch.at(5).checked == []  # not due before the first check
    first = watch.at(10)
    assert first.checked == [incident.id] and first.verified == []
    looked = watch.current()
    assert looked.state is State.REMEDIATED and looked.verification is not None
    assert looked.verification.checks == 1
    assert looked.settle_at == check.since + timedelta(minutes=20)
    # The check looked at the workload from the remediation on: step-1 evidence, scoped.
    context = watch.evidence.contexts[-1]
    assert context.start_time == check.since and context.end_time == watch.clock()
    # A second schedule at the same minute finds nothing due: checked once, not twice.
    assert watch.at(10).checked == []
    done = watch.at(121)
    assert done.verified == [incident.id]
    final = watch.current()
    assert final.state is State.VERIFIED and final.settle_at is None
    assert final.verification is not None and final.verification.verdict is Verdict.VERIFIED
    assert final.audit[-1].to_state is State.VERIFIED
    assert final.audit[-1].note.startswith("loop broken: no restart in 2 h since")
    message = watch.notifier.messages[incident.id]
    assert message.verification[0].startswith("Loop broken: no restart in 2 h since")
    assert watch.at(200).checked == []  # verified is final: never checked again


def test_restarts_on_the_same_host_make_it_recurred(
    store: IncidentStore, remediated: Incident
) -> None:
    incident = seed(store, remediated)
    check = incident.verification
    assert check is not None
    rising = restarts(check.since, [(-30, 8), (-1, 8), (15, 9), (25, 10)])
    # The workload's pod is back on the node, which is still on the same host.
    found = evidence(rising, pod_node=R.NODE, vm_id=R.INSTANCE_ID, vm_host=R.HOST)
    watch = Watch(store, incident, found)
    report = watch.at(30)
    assert report.recurred == [incident.id]
    final = watch.current()
    assert final.state is State.RECURRED
    assert final.verification is not None
    assert any(R.NODE in f for f in final.verification.findings)
    # The host stays in the host memory, as a repeat offender.
    history = store.host_history([R.HOST])
    assert any(r.incident_id == incident.id and r.at == watch.clock() for r in history)
    assert watch.notifier.messages[incident.id].verification[0].startswith("RECURRED")


def test_the_new_vm_on_the_same_host_recurs_without_waiting(
    store: IncidentStore, remediated: Incident
) -> None:
    incident = seed(store, remediated)
    check = incident.verification
    assert check is not None
    flat = restarts(check.since, [(-30, 8), (5, 8)])
    watch = Watch(store, incident, evidence(flat, vm_id="7001", vm_host=f"/b1/sb2/{R.HOST}"))
    report = watch.at(10)
    assert report.recurred == [incident.id]
    final = watch.current()
    assert final.state is State.RECURRED
    assert final.verification is not None
    assert "recreated VM" in final.audit[-1].note and R.HOST in final.audit[-1].note


def test_a_restart_elsewhere_opens_a_new_linked_incident(
    store: IncidentStore, remediated: Incident
) -> None:
    incident = seed(store, remediated)
    check = incident.verification
    assert check is not None
    rising = restarts(check.since, [(-30, 8), (-1, 8), (15, 9)])
    watch = Watch(store, incident, evidence(rising, pod_node=OTHER_NODE))
    first = watch.at(20)
    assert first.recurred == [] and first.verified == []
    looked = watch.current()
    assert looked.state is State.REMEDIATED and looked.verification is not None
    other = looked.verification.other_incident
    assert other is not None and other != incident.id and other in looked.linked
    opened = store.get(other)
    assert opened is not None and opened.state is State.OPEN
    assert str(opened.key).endswith(f"/workload/default/{WORKLOAD}")
    # Checked again: the same new incident, not another one.
    watch.at(30)
    again = watch.current().verification
    assert again is not None and again.other_incident == other
    assert len(store.list_incidents()) == 2
    done = watch.at(125)
    assert done.verified == [incident.id]
    assert watch.current().verification.other_incident == other  # type: ignore[union-attr]
    json.dumps(watch.current().to_dict())


def test_gke_repairing_the_host_in_place_is_the_outcome_not_a_recurrence(
    store: IncidentStore, remediated: Incident
) -> None:
    """A3 Mega and A3 High come back on the same, repaired host ("Report faulty hosts"): on
    the gke path that is the repair itself, and the verdict rests on the restarts since."""
    approval = remediated.approval
    assert approval is not None
    gke = replace(approval, target=replace(approval.target, repair_path=RepairPath.GKE))
    assert remediated.remediation is not None
    # Remediated by the gke branch: what the re-check settled on is what the check reads.
    record = replace(remediated.remediation, path=RepairPath.GKE)
    incident = seed(store, replace(remediated, approval=gke, remediation=record))
    check = incident.verification
    assert check is not None
    flat = restarts(check.since, [(-30, 8), (5, 8), (125, 8)])
    # The same VM (its id unchanged), on the same host, restarted by GKE after the repair.
    same = evidence(flat, vm_id=R.INSTANCE_ID, vm_host=f"/b1/sb2/{R.HOST}")
    watch = Watch(store, incident, same)
    assert watch.at(10).recurred == []
    minutes = (check.until - check.since).total_seconds() / 60 + 1
    assert watch.at(minutes).verified == [incident.id]
    final = watch.current()
    assert final.state is State.VERIFIED
    assert f"after GKE's report-and-replace, node {R.NODE} runs on host {R.HOST} again" in (
        final.audit[-1].note
    )
