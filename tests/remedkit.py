"""Test kit for remediation: the faulty-host incident approved in chat, and its cluster.

``approve_faulty`` replays the bundled faulty-host scenario and approves it through the
on_chat_action service, returning the store and the remediation request exactly as it
would be published. ``Lab`` serves the scenario's nodes and pods (plus a DaemonSet and a
mirror pod on the suspect node), its VM and the Support API on 127.0.0.1, and builds the
executor with the real adapters pointed at them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import chatkit as K
from fakes import FakeClock, FakeNotifier, FakeQueue, RecordingSleep
from fakeservers.cluster import ClusterServer
from fakeservers.compute_ops import ComputeOpsServer
from fakeservers.gke_repair import GkeClusterServer
from fakeservers.kube import write_kubeconfig
from fakeservers.support import SupportServer
from google.auth.credentials import AnonymousCredentials

from loopbreaker.app.bootstrap import build_actuators, build_chat_actions, build_remediator
from loopbreaker.approval.requests import Target
from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.remediation.executor import Remediator
from loopbreaker.remediation.rules import RemediationPolicy
from loopbreaker.settings.load import Settings

NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"
PROJECT = "customer-ai-project-123"
ZONE = "us-east5-a"
INSTANCE_ID = "5464165239889847435"
HOST = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
#: An A3 High JobSet whose GPU reports an uncorrectable ECC error twice (Xid 48 then 63): a
#: node GKE's report-and-replace takes (a3-highgpu-8g, GKE v1.32.4-gke.1767000).
A3 = K.ROOT / "examples" / "telemetry" / "gpu-xid-hardware-twice"


def approve_faulty(
    path: Path, scenario: Path = K.FAULTY, **env: str
) -> tuple[Incident, dict[str, Any]]:
    """A store at ``path`` with the approved faulty-host incident; its remediation request."""
    incident = K.make_faulty_store(path, scenario, **env)
    store = SqliteStore(path)
    queue = FakeQueue()
    clock = FakeClock(K.click_time(incident))
    service = build_chat_actions(
        K.chat_settings(), store=store, queue=queue, notifier=FakeNotifier(), clock=clock
    )
    reply = service.handle(*K.slack_request(K.slack_payload(K.token_of(incident)), clock()))
    assert reply.status == 200, reply.body
    approved = store.get(incident.id)
    store.close()
    assert approved is not None
    [request] = queue.published
    return approved, request


def cluster_objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = json.loads((K.FAULTY / "nodes.json").read_text())["items"]
    pods = json.loads((K.FAULTY / "pods.json").read_text())["items"]
    daemon = copy.deepcopy(next(p for p in pods if p["spec"].get("nodeName") == NODE))
    daemon["metadata"].update(
        name="fluentbit-gke-x7k2",
        namespace="kube-system",
        # An owner reference always carries the owner's uid (V1OwnerReference.uid, required).
        ownerReferences=[
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": "fluentbit-gke",
                "uid": "3b1f0c2e-7d4a-4e59-9a61-0c5e2f8d4b17",
            }
        ],
    )
    mirror = copy.deepcopy(daemon)
    mirror["metadata"].update(
        name=f"kube-proxy-{NODE}",
        ownerReferences=[
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": NODE,
                "uid": "9c2d7e41-5f0b-4a8e-b3d6-1f2a3b4c5d6e",
            }
        ],
        annotations={"kubernetes.io/config.mirror": "abc123"},
    )
    return nodes, [*pods, daemon, mirror]


@dataclass
class Lab:
    kube: ClusterServer
    compute: ComputeOpsServer
    support: SupportServer
    kubeconfig: Path
    store: SqliteStore
    clock: FakeClock
    notifier: FakeNotifier
    sleep: RecordingSleep

    def remediator(self, policy: RemediationPolicy, *, support: bool = True) -> Remediator:
        settings = Settings()
        remediation = replace(
            settings.remediation,
            policy=policy,
            kubeconfig=self.kubeconfig,
            compute_endpoint=self.compute.url,
            support_parent=f"projects/{PROJECT}" if support else None,
            support_endpoint=self.support.url,
        )
        settings = replace(settings, remediation=remediation)
        credentials = GoogleCredentials(AnonymousCredentials())
        return build_remediator(
            settings,
            store=self.store,
            notifier=self.notifier,
            clock=self.clock,
            actuators=build_actuators(settings, credentials),
            sleep=self.sleep,
        )

    def node(self) -> dict[str, Any]:
        return next(n for n in self.kube.nodes if n["metadata"]["name"] == NODE)

    def pods_on_node(self) -> list[str]:
        return sorted(
            p["metadata"]["name"] for p in self.kube.pods if p["spec"].get("nodeName") == NODE
        )

    def incident(self, incident_id: str) -> Incident:
        found = self.store.get(incident_id)
        assert found is not None
        return found


def handle_until_done(remediator: Remediator, request: dict[str, Any], deliveries: int = 20) -> Any:
    """Deliver like Pub/Sub: again after every TransientError (bounded)."""
    from loopbreaker.errors import TransientError

    for _ in range(deliveries):
        try:
            return remediator.handle(request)
        except TransientError:
            continue
    raise AssertionError(f"still retrying after {deliveries} deliveries")


def steps_of(incident: Incident) -> dict[str, str]:
    """Each recorded step's outcome, by step name."""
    assert incident.remediation is not None
    return {s.step.value: s.outcome.value for s in incident.remediation.steps}


def mutations(lab: Lab) -> list[str]:
    """Every mutating request the Kubernetes server saw, as ``METHOD path``."""
    return [f"{m} {p}" for m, p in lab.kube.mutations]


def physical_host(nodes: list[dict[str, Any]], name: str = NODE) -> str:
    """``resourceStatus.physicalHost`` as Compute Engine v1 documents it for VMs with a
    topology: ``/blockId/subBlockId/hostId``, the parts GKE copies onto the node labels."""
    labels = next(n for n in nodes if n["metadata"]["name"] == name)["metadata"]["labels"]
    parts = ("block", "subblock", "host")
    return "/" + "/".join(labels[f"cloud.google.com/gce-topology-{p}"] for p in parts)


@contextmanager
def lab(store_path: Path, clock: FakeClock, tmp: Path) -> Iterator[Lab]:
    nodes, pods = cluster_objects()
    with ExitStack() as stack:
        kube = stack.enter_context(ClusterServer(nodes, pods))
        compute = stack.enter_context(
            ComputeOpsServer(
                {(PROJECT, ZONE, NODE): {"id": INSTANCE_ID, "physicalHost": physical_host(nodes)}}
            )
        )
        support = stack.enter_context(SupportServer())
        kubeconfig = write_kubeconfig(tmp / "kubeconfig", kube.url)
        store = SqliteStore(store_path)
        stack.callback(store.close)
        yield Lab(
            kube, compute, support, kubeconfig, store, clock, FakeNotifier(), RecordingSleep()
        )


class ClockSleep(RecordingSleep):
    """A sleep that moves the lab's clock, so waits and timeouts pass as they would."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self._clock = clock

    def __call__(self, seconds: float) -> None:
        super().__call__(seconds)
        self._clock.advance(seconds=seconds)


@contextmanager
def gke_lab(
    store_path: Path,
    clock: FakeClock,
    tmp: Path,
    target: Target,
    *,
    provisioning_model: str = "RESERVATION_BOUND",
    reservation_affinity: str = "SPECIFIC_RESERVATION",
    scenario: Path = A3,
) -> Iterator[Lab]:
    """The scenario's cluster (the A3 one by default), with GKE's report-and-replace, and the
    target's VM as Compute answers it: ``scheduling`` and ``reservationAffinity`` always."""
    nodes = json.loads((scenario / "nodes.json").read_text())["items"]
    pods = json.loads((scenario / "pods.json").read_text())["items"]
    [node] = [n for n in nodes if n["metadata"]["name"] == target.node]
    machine = node["metadata"]["labels"]["node.kubernetes.io/instance-type"]
    record = {
        "id": target.instance_id,
        "physicalHost": physical_host(nodes, target.node),
        "machineType": f"zones/{target.zone}/machineTypes/{machine}",
        "scheduling": {"provisioningModel": provisioning_model},
        "reservationAffinity": {"consumeReservationType": reservation_affinity},
    }
    with ExitStack() as stack:
        compute = stack.enter_context(
            ComputeOpsServer({(target.project, target.zone, target.instance): record})
        )
        kube = stack.enter_context(
            GkeClusterServer(nodes, pods, compute=compute, project=target.project, zone=target.zone)
        )
        support = stack.enter_context(SupportServer())
        kubeconfig = write_kubeconfig(tmp / "kubeconfig", kube.url)
        store = SqliteStore(store_path)
        stack.callback(store.close)
        yield Lab(
            kube, compute, support, kubeconfig, store, clock, FakeNotifier(), ClockSleep(clock)
        )
