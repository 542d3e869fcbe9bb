"""One failure, two sinks: GKE entries name the cluster, Compute Engine audit entries do not.

D6: a Spot storm on one node pool reported by ``gke_nodepool`` PreemptionEvents and by
``compute.instances.preempted`` audit entries for the same nodes is one incident.
D7: ``compute.instances.hostError`` twice, then NodeNotReady for the same node, is one
incident and one approval request, and it learns its cluster from the NodeNotReady.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import FakeClock, FakeEvidence, FakeNotifier

from loopbreaker import incidents
from loopbreaker.chat import notify
from loopbreaker.diagnosis import engine
from loopbreaker.incidents import Arrival, Incident, IncidentKey, IndexEntry, Policy, Scope, State
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.model import (
    Context,
    Diagnosis,
    Evidence,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
    SignalKind,
)
from loopbreaker.responder.service import Responder, Status
from loopbreaker.settings.load import Settings
from loopbreaker.signals.classify import classify

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
P = "proj"
ZONE, REGION = "us-east1-d", "us-east1"
SETTINGS = Settings(settle_time=timedelta(seconds=60), stale_after=timedelta(hours=6))

D6_CLUSTER, D6_POOL = "clus-x", "spot-pool"
D6_GROUP = f"gke-{D6_CLUSTER}-{D6_POOL}-aabbccdd"
D6_PREFIX = f"gke-{D6_CLUSTER}-{D6_POOL}"
D7_CLUSTER = "clus-h"
D7_NODE = "gke-clus-h-gpu-pool-11aa22bb-zz9q"
D7_GROUP = "gke-clus-h-gpu-pool-11aa22bb"
D7_PREFIX = "gke-clus-h-gpu-pool"


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def d6_node(i: int) -> str:
    return f"{D6_GROUP}-{i:04x}"


def pool_preemption(node: str, at: datetime, *, pool: str = D6_POOL) -> dict[str, Any]:
    """A GKE node-pool event: names the cluster, the pool and (in its text) the node."""
    return {
        "insertId": f"pool-{node}",
        "logName": f"projects/{P}/logs/container.googleapis.com%2Fnode-pool-events",
        "resource": {
            "type": "gke_nodepool",
            "labels": {
                "project_id": P,
                "location": REGION,
                "cluster_name": D6_CLUSTER,
                "node_pool_name": pool,
            },
        },
        "severity": "INFO",
        "timestamp": ts(at),
        "textPayload": f"PreemptionEvent: Node '{node}' in node pool '{pool}' was preempted.",
    }


def audit(method: str, node: str, at: datetime, zone: str = ZONE) -> dict[str, Any]:
    """A Compute Engine system-event audit entry: names only the VM and its zone."""
    return {
        "insertId": f"audit-{method}-{node}-{at.timestamp()}",
        "logName": f"projects/{P}/logs/cloudaudit.googleapis.com%2Fsystem_event",
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "methodName": f"compute.instances.{method}",
            "resourceName": f"projects/{P}/zones/{zone}/instances/{node}",
            "serviceName": "compute.googleapis.com",
            "status": {"message": "Instance terminated by Compute Engine."},
        },
        "resource": {
            "type": "gce_instance",
            "labels": {"project_id": P, "zone": zone, "instance_id": "5464165239889847435"},
        },
        "severity": "INFO",
        "timestamp": ts(at),
    }


def node_not_ready(node: str, at: datetime, cluster: str = D7_CLUSTER) -> dict[str, Any]:
    """The Kubernetes Event on the k8s_node resource: names the cluster and the node."""
    return {
        "insertId": f"nnr-{node}-{at.timestamp()}",
        "logName": f"projects/{P}/logs/events",
        "resource": {
            "type": "k8s_node",
            "labels": {
                "project_id": P,
                "location": REGION,
                "cluster_name": cluster,
                "node_name": node,
            },
        },
        "jsonPayload": {
            "involvedObject": {"kind": "Node", "name": node},
            "reason": "NodeNotReady",
            "message": f"Node {node} status is now: NodeNotReady",
        },
        "severity": "INFO",
        "timestamp": ts(at),
    }


def d6_entries() -> list[dict[str, Any]]:
    """50 PreemptionEvents and 50 audit entries for the same 50 nodes, interleaved."""
    out = []
    for i in range(50):
        at = T0 + timedelta(seconds=3 * i)
        out.append(pool_preemption(d6_node(i), at))
        out.append(audit("preempted", d6_node(i), at - timedelta(seconds=1)))
    return out


def d7_entries() -> list[tuple[datetime, dict[str, Any]]]:
    return [
        (T0, audit("hostError", D7_NODE, T0)),
        (T0 + timedelta(minutes=20), audit("hostError", D7_NODE, T0 + timedelta(minutes=20))),
        (T0 + timedelta(minutes=21), node_not_ready(D7_NODE, T0 + timedelta(minutes=21))),
    ]


# --- keys and grouping, pure ---------------------------------------------------------


def group(entries: Iterable[dict[str, Any]]) -> dict[str, Incident]:
    """What the store does, in memory: key, choose a candidate, absorb."""
    policy = Policy()
    by_id: dict[str, Incident] = {}
    for n, entry in enumerate(entries):
        signal = classify(entry)
        key = incidents.key_for(signal)
        assert key is not None and signal.timestamp is not None
        candidates = [IndexEntry.of(i) for i in by_id.values() if i.key == key]
        target = incidents.choose(candidates, signal.timestamp, policy.grouping_window)
        now = T0 + timedelta(hours=1, seconds=n)
        arrival = Arrival(key, signal, signal.timestamp, now, f"e{n}", None, policy)
        absorbed = incidents.absorb(by_id.get(target) if target else None, arrival)
        by_id[absorbed.incident.id] = absorbed.incident
    return by_id


def test_d6_both_sinks_key_a_pool_storm_by_its_pool_prefix() -> None:
    keys = {incidents.key_for(classify(e)) for e in d6_entries()}
    assert keys == {IncidentKey(P, None, Scope.POOL, D6_PREFIX)}


@pytest.mark.parametrize("audit_first", [True, False], ids=["audit-first", "gke-first"])
def test_d6_is_one_incident_that_learns_its_cluster(audit_first: bool) -> None:
    entries = d6_entries()
    pool_events, audits = entries[0::2], entries[1::2]
    ordered = audits + pool_events if audit_first else pool_events + audits
    [incident] = group(ordered).values()
    assert incident.key.cluster is None
    assert incident.cluster == D6_CLUSTER and incident.clusters == (D6_CLUSTER,)
    # The cluster's location, not the zone an audit entry names, whichever came first.
    assert incident.location == REGION
    assert incident.signal_count == 100 and incident.counts == {"preemption": 100}
    assert incident.node_pools == (D6_POOL,) and len(incident.nodes) == 50
    context = incidents.context_for(incident)
    assert (context.cluster, context.location, context.project) == (D6_CLUSTER, REGION, P)
    assert incident.labels()["cluster"] == D6_CLUSTER


@pytest.mark.parametrize("audit_first", [True, False], ids=["audit-first", "gke-first"])
def test_a_regional_pool_is_one_incident_across_its_zones(audit_first: bool) -> None:
    # GKE names one managed instance group per zone; all share the pool's prefix.
    groups = [f"{D6_PREFIX}-{h}" for h in ("aabbccdd", "11223344", "55667788", "99aabbcc")]
    zones = ["us-east1-b", "us-east1-c", "us-east1-d", "us-east1-d"]
    gke = [pool_preemption(f"{g}-{i:04x}", T0) for i, g in enumerate(groups)]
    compute = [
        audit("preempted", f"{g}-{i:04x}", T0, zone=z)
        for i, (g, z) in enumerate(zip(groups, zones, strict=True))
    ]
    [incident] = group(compute + gke if audit_first else gke + compute).values()
    assert incident.key == IncidentKey(P, None, Scope.POOL, D6_PREFIX)
    assert incident.cluster == D6_CLUSTER and incident.signal_count == 8
    assert len(incident.nodes) == 4


def test_a_managed_instance_group_name_resolves_to_its_pool() -> None:
    assert incidents.pool_prefix(f"{D6_GROUP}-grp") == D6_PREFIX
    assert incidents.pool_prefix(f"{D6_GROUP}-x7k2") == D6_PREFIX
    assert incidents.pool_prefix("my-vm-1a2b") is None


def test_a_pool_event_naming_no_node_is_keyed_by_the_pools_prefix() -> None:
    entry = pool_preemption("x", T0)
    entry["textPayload"] = f"PreemptionEvent: a node in node pool '{D6_POOL}' was preempted."
    key = incidents.key_for(classify(entry))
    assert key == IncidentKey(P, None, Scope.POOL, D6_PREFIX)


def test_d7_host_errors_and_node_not_ready_are_one_incident() -> None:
    entries = [e for _, e in d7_entries()]
    kinds = [classify(e).kind for e in entries]
    assert kinds == [SignalKind.HOST_ERROR, SignalKind.HOST_ERROR, SignalKind.NODE_NOT_READY]
    keys = {incidents.key_for(classify(e)) for e in entries}
    assert keys == {IncidentKey(P, None, Scope.POOL, D7_PREFIX)}
    [incident] = group(entries).values()
    assert incident.cluster == D7_CLUSTER and incident.location == REGION
    assert incidents.context_for(incident).cluster == D7_CLUSTER
    assert incident.nodes == (D7_NODE,)


def test_an_incident_that_never_hears_of_its_cluster_has_none() -> None:
    [incident] = group([audit("hostError", D7_NODE, T0)]).values()
    assert incident.cluster is None and incident.clusters == ()
    assert incident.location == ZONE
    assert incidents.context_for(incident).cluster == ""
    assert "unknown cluster" in notify.render(incident).title


def test_the_first_cluster_named_stays_the_incidents_cluster() -> None:
    # Two clusters' VMs on one physical host: the key names neither, the first one wins.
    host = "/blk/sub/host-7"
    signals = [
        classify(node_not_ready(D7_NODE, T0)),
        classify(node_not_ready("gke-clus-a-p-12345678-abcd", T0, "clus-a")),
    ]
    incident = None
    for n, signal in enumerate(signals):
        signal = replace(signal, physical_host=host)
        key = incidents.key_for(signal)
        assert key == IncidentKey(P, None, Scope.HOST, host)
        arrival = Arrival(key, signal, T0, T0, f"e{n}", None, Policy())
        incident = incidents.absorb(incident, arrival).incident
    assert incident is not None
    assert incident.clusters == (D7_CLUSTER, "clus-a") and incident.cluster == D7_CLUSTER


def test_workload_keys_keep_their_cluster() -> None:
    signal = classify(node_not_ready(D7_NODE, T0))
    signal = replace(signal, kind=SignalKind.NCCL_TIMEOUT, workload="train")
    assert incidents.key_for(signal) == IncidentKey(P, D7_CLUSTER, Scope.WORKLOAD, "train")


def test_a_record_stored_before_clusters_were_learned_still_loads() -> None:
    [incident] = group([pool_preemption(d6_node(1), T0)]).values()
    data = incident.to_dict()
    assert data["clusters"] == [D6_CLUSTER]
    assert Incident.from_dict(data) == incident
    del data["clusters"]
    old = Incident.from_dict(data)
    assert old.clusters == () and old.cluster is None  # its key names none
    pool_key = IncidentKey(P, D6_CLUSTER, Scope.NODE_POOL, D6_POOL)
    legacy = Incident.from_dict({**data, "key": str(pool_key)})
    assert legacy.cluster == D6_CLUSTER


# --- through the Responder -----------------------------------------------------------


def responder(
    store: IncidentStore,
    clock: FakeClock,
    notifier: FakeNotifier,
    evidence: FakeEvidence,
    diagnose: Any = engine.diagnose,
) -> Responder:
    return Responder(
        settings=SETTINGS,
        store=store,
        notifier=notifier,
        evidence=evidence,
        clock=clock,
        diagnose=diagnose,
    )


def test_d6_storm_from_both_sinks_is_one_incident_one_diagnosis_one_notification(
    store: IncidentStore,
) -> None:
    clock = FakeClock(T0)
    notifier, evidence = FakeNotifier(), FakeEvidence()
    service = responder(store, clock, notifier, evidence)
    for n, entry in enumerate(d6_entries()):
        clock.set(T0 + timedelta(seconds=1.5 * n + 2))
        assert service.handle_entry(f"m{n}", entry).status is Status.ACCEPTED
    report = service.settle(clock.advance(seconds=61))
    assert service.settle(clock.advance(minutes=5)).diagnosed == []
    [incident] = store.list_incidents()
    assert report.diagnosed == [incident.id]
    assert incident.key == IncidentKey(P, None, Scope.POOL, D6_PREFIX)
    assert incident.cluster == D6_CLUSTER and incident.signal_count == 100
    assert incident.diagnoses == 1 and incident.notifications == 1
    assert incident.diagnosis is not None
    assert incident.diagnosis.root_cause == RootCause.SPOT_PREEMPTION.value
    assert D6_CLUSTER in incident.diagnosis.summary
    [context] = evidence.contexts
    assert (context.cluster, context.location) == (D6_CLUSTER, REGION)
    [message] = notifier.posted
    assert message.fields["cluster"] == D6_CLUSTER and D6_CLUSTER in message.title


def faulty_host(context: Context, evidence: Evidence) -> Diagnosis:
    """The diagnosis QA saw for D7: the host failed repeatedly, isolate it (approval)."""
    return replace(
        engine.diagnose(context, evidence),
        root_cause=RootCause.FAULTY_HOST,
        remediation=Remediation(RemediationPath.ISOLATE_HOST, Risk.HIGH, True, ("cordon",)),
    )


@pytest.mark.parametrize("diagnose", [engine.diagnose, faulty_host], ids=["engine", "faulty"])
def test_d7_one_host_is_one_incident_and_at_most_one_approval_request(
    store: IncidentStore, diagnose: Any
) -> None:
    clock = FakeClock(T0)
    notifier, evidence = FakeNotifier(), FakeEvidence()
    service = responder(store, clock, notifier, evidence, diagnose)
    for n, (at, entry) in enumerate(d7_entries()):
        clock.set(at + timedelta(seconds=2))
        assert service.handle_entry(f"m{n}", entry).status is Status.ACCEPTED
        service.settle(clock.advance(seconds=61))  # each is diagnosed before the next
    [incident] = store.list_incidents()
    assert incident.key == IncidentKey(P, None, Scope.POOL, D7_PREFIX)
    assert incident.signal_count == 3 and incident.diagnoses == 3
    assert incident.cluster == D7_CLUSTER and incident.location == REGION
    assert incident.diagnosis is not None
    # The latest diagnosis ran with the learned cluster; the first two could not.
    assert [c.cluster for c in evidence.contexts] == ["", "", D7_CLUSTER]
    assert D7_CLUSTER in incident.diagnosis.summary
    assert {n.incident_id for n in notifier.posted} == {incident.id}
    assert notifier.posted[-1].fields["cluster"] == D7_CLUSTER
    # One approval request, re-stated by each re-diagnosis, never a second one.
    assert incident.state is State.AWAITING_APPROVAL
    assert incident.diagnosis.root_cause == RootCause.FAULTY_HOST.value
    opened = [a for a in incident.audit if a.to_state is State.AWAITING_APPROVAL]
    assert opened[0].from_state is State.DIAGNOSED
    assert all(a.from_state is State.AWAITING_APPROVAL for a in opened[1:])
