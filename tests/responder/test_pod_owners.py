"""Events about a pod (no pod labels) reach the workload's incident: the pod-name rules
confirmed by the incident store, else the pods' own labels (pods.json, the Kubernetes
API through the real client), cached and bounded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeStore
from fakeservers import KubernetesServer, write_kubeconfig

from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import PodInfo, Signal
from loopbreaker.responder.pod_owners import KubernetesPods, PodWorkloads, TelemetryPods
from loopbreaker.signals.classify import classify
from loopbreaker.signals.labels import workload_candidates

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).with_name("loopbreaker")
PROJECT, CLUSTER, NAMESPACE = "ml-prod", "a3-train-usc1", "llm"
# JobSet's pod name: <jobset>-<replicatedJob>-<jobIndex>-<podIndex>-<suffix>.
POD = "llama-train-workers-0-3-x7k2q"


def evicted(pod: str = POD, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The kubelet's Evicted Event as the ``events`` log holds it: about the pod by name
    and uid, no pod labels (kubernetes pkg/kubelet/eviction/helpers.go wording)."""
    return {
        "insertId": f"ev-{pod}",
        "logName": f"projects/{PROJECT}/logs/events",
        "resource": {
            "type": "k8s_pod",
            "labels": {
                "project_id": PROJECT,
                "cluster_name": CLUSTER,
                "location": "us-central1",
                "namespace_name": namespace,
                "pod_name": pod,
            },
        },
        "severity": "WARNING",
        "jsonPayload": {
            "apiVersion": "v1",
            "kind": "Event",
            "involvedObject": {"kind": "Pod", "name": pod, "namespace": namespace, "uid": "u1"},
            "reason": "Evicted",
            "message": "The node was low on resource: memory. Threshold quantity: 100Mi, "
            "available: 52Mi. Container trainer was using 61Gi, request is 0, has larger "
            "consumption of memory.",
            "source": {"component": "kubelet", "host": "gke-a3-train-usc1-pool-1a2b3c4d-x7k2"},
            "type": "Warning",
        },
        "timestamp": "2026-12-03T10:12:15Z",
    }


def container_line(workload: str) -> Signal:
    """A line of the workload's own container: its labels name the JobSet."""
    return classify(
        {
            "insertId": "c1",
            "logName": f"projects/{PROJECT}/logs/stderr",
            "resource": {
                "type": "k8s_container",
                "labels": {
                    "project_id": PROJECT,
                    "cluster_name": CLUSTER,
                    "namespace_name": NAMESPACE,
                    "pod_name": f"{workload}-workers-0-0-abcde",
                },
            },
            "labels": {"k8s-pod/jobset_sigs_k8s_io/jobset-name": workload},
            "textPayload": "torch.distributed.DistStoreError: wait timeout after 300000ms, "
            "keys: /default_pg/0//cuda//0",
            "timestamp": "2026-12-03T10:10:00Z",
        }
    )


def pod_object(name: str, jobset: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    """A pod as the API lists it, with JobSet's labels (jobset.sigs.k8s.io/...)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": jobset,
                "jobset.sigs.k8s.io/job-index": "0",
                "batch.kubernetes.io/job-completion-index": "3",
            },
        },
        "spec": {"nodeName": "gke-a3-train-usc1-pool-1a2b3c4d-x7k2", "containers": []},
        "status": {"phase": "Running"},
    }


def open_incident(store: FakeStore, signal: Signal) -> None:
    from datetime import UTC, datetime

    from loopbreaker import incidents
    from loopbreaker.incidents.grouping import Arrival

    key = incidents.key_for(signal, PROJECT)
    assert key is not None
    now = datetime(2026, 12, 3, 10, 10, tzinfo=UTC)
    store.ingest(
        Arrival(
            key=key,
            signal=signal,
            event_time=now,
            now=now,
            entry_id="c1",
            message_id=None,
            policy=incidents.Policy(),
        )
    )


def test_the_pod_name_rules_give_every_split_most_specific_first() -> None:
    assert workload_candidates(POD) == ("llama-train", "llama")
    # Kubeflow's <job>-<replicaType>-<index>; no random suffix.
    assert workload_candidates("resnet50-ps-worker-2") == ("resnet50-ps",)
    assert workload_candidates("bert-ddp-master-0") == ("bert-ddp",)
    assert workload_candidates("coredns-5d78c9869d-abcde") == ()


def test_a_pod_event_joins_the_workload_the_store_knows() -> None:
    store = FakeStore()
    open_incident(store, container_line("llama-train"))
    resolver = PodWorkloads(store, default_project=PROJECT)
    signal = resolver.resolve(classify(evicted()))
    assert signal.workload == "llama-train"
    assert resolver.counts == {"store": 1}
    # The answer is cached: the store is not asked again for the same pod.
    asked = store.calls.count("known_keys")
    assert resolver.resolve(classify(evicted())).workload == "llama-train"
    assert store.calls.count("known_keys") == asked


def test_a_name_alone_proves_nothing() -> None:
    # "llama" and "llama-train" are only what the name may mean: nothing confirms them.
    resolver = PodWorkloads(FakeStore(), default_project=PROJECT)
    signal = resolver.resolve(classify(evicted()))
    assert signal.workload is None
    assert resolver.counts == {"unresolved": 1}


def test_a_workload_in_another_namespace_is_not_this_pods() -> None:
    store = FakeStore()
    open_incident(store, container_line("llama-train"))
    resolver = PodWorkloads(store, default_project=PROJECT)
    assert resolver.resolve(classify(evicted(namespace="other"))).workload is None


class Listing:
    """A PodDirectory that counts its list calls and can fail."""

    def __init__(self, pods: tuple[PodInfo, ...], fail: bool = False) -> None:
        self.listed = 0
        self._pods, self._fail = pods, fail

    def pods(self, signal: Signal) -> tuple[PodInfo, ...]:
        self.listed += 1
        if self._fail:
            raise SourceUnavailable("kubernetes", "403 Forbidden listing pods")
        return self._pods


def test_the_pods_labels_decide_when_the_store_knows_nothing() -> None:
    listing = Listing((PodInfo(POD, NAMESPACE, workload="llama-train", workload_kind="jobset"),))
    resolver = PodWorkloads(FakeStore(), listing, default_project=PROJECT)
    signal = resolver.resolve(classify(evicted()))
    assert (signal.workload, signal.workload_kind) == ("llama-train", "jobset")
    assert resolver.counts == {"directory": 1}


def test_a_storm_of_unknown_pods_lists_a_namespace_once_per_interval() -> None:
    clock = [0.0]
    listing = Listing(())
    resolver = PodWorkloads(
        FakeStore(), listing, default_project=PROJECT, relist_after=30, monotonic=lambda: clock[0]
    )
    for n in range(50):
        resolver.resolve(classify(evicted(pod=f"other-job-workers-0-{n}-abcde")))
    assert listing.listed == 1
    clock[0] = 31.0
    resolver.resolve(classify(evicted(pod="other-job-workers-0-99-abcde")))
    assert listing.listed == 2


def test_a_directory_that_cannot_be_read_leaves_the_signal_as_it_was() -> None:
    resolver = PodWorkloads(FakeStore(), Listing((), fail=True), default_project=PROJECT)
    signal = classify(evicted())
    assert resolver.resolve(signal) == signal


def test_the_cache_is_bounded() -> None:
    pods = tuple(PodInfo(f"job-workers-0-{n}-abcde", NAMESPACE, workload="job") for n in range(100))
    resolver = PodWorkloads(FakeStore(), Listing(pods), default_project=PROJECT, cache_size=10)
    resolver.resolve(classify(evicted(pod="job-workers-0-5-abcde")))
    assert len(resolver._cache) == 10


def test_telemetry_pods_read_pods_json(tmp_path: Path) -> None:
    (tmp_path / "pods.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod_object(POD, "llama-train")]})
    )
    resolver = PodWorkloads(FakeStore(), TelemetryPods(tmp_path), default_project=PROJECT)
    assert resolver.resolve(classify(evicted())).workload == "llama-train"


def test_the_kubernetes_api_is_read_through_the_real_client(tmp_path: Path) -> None:
    with KubernetesServer(pods=[pod_object(POD, "llama-train")], token="t0k") as server:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, token="t0k")
        resolver = PodWorkloads(
            FakeStore(), KubernetesPods(kubeconfig=kubeconfig), default_project=PROJECT
        )
        assert resolver.resolve(classify(evicted())).workload == "llama-train"
        assert server.requests_to(f"/api/v1/namespaces/{NAMESPACE}/pods")


def test_without_a_cluster_to_reach_the_kubernetes_api_says_why() -> None:
    signal = classify(evicted())
    pods = KubernetesPods(token=lambda: "t")
    with pytest.raises(SourceUnavailable, match="names no project, location and cluster"):
        pods.pods(Signal(kind=signal.kind, timestamp=None, namespace=NAMESPACE, pod=POD))


def test_a_replay_joins_pod_events_to_the_workload_and_counts_the_unresolved(
    tmp_path: Path,
) -> None:
    # The image-pull scenario: the kubelet's pull failures are Events on the pods.
    scenario = ROOT / "examples" / "telemetry" / "jobset-image-pull"
    done = subprocess.run(
        [str(CLI), "replay", str(scenario / "logs.json"), "--telemetry", str(scenario)]
        + ["--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout)
    [incident] = [i for i in result["incidents"] if "/workload/" in i["key"]]
    assert incident["counts"]["image_pull_failed"] > 0
    assert result["unresolved_pods"] == 0
    # Without the workload's own lines nothing confirms its pods: counted and said.
    events = [
        e
        for e in json.loads((scenario / "logs.json").read_text())
        if e["resource"]["type"] == "k8s_pod"
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    alone = subprocess.run(
        [str(CLI), "replay", str(path)], capture_output=True, text=True, timeout=120, check=True
    )
    assert "named a pod whose workload neither the incidents nor the pods" in alone.stdout
