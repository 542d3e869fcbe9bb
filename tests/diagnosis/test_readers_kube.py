"""KubernetesReader through the official client against a local fake API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import RecordingSleep
from fakeservers import Fault, GkeServer, KubernetesServer, self_signed_tls, write_kubeconfig

from loopbreaker.diagnosis.readers.kube import KubernetesReader
from loopbreaker.diagnosis.readers.retry import RetryPolicy
from loopbreaker.errors import ConfigError, SourceUnavailable
from loopbreaker.model import ContainerInfo, NodeInfo, PodInfo

TOKEN = "kube-token"


def node(name: str, *, host: str | None = None, ready: bool = True) -> dict[str, Any]:
    labels = {"cloud.google.com/gke-nodepool": "pool", "topology.kubernetes.io/zone": "z1"}
    if host:
        labels["cloud.google.com/gce-topology-host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": f"gce://proj/z1/{name}"},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(name: str, namespace: str, node_name: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "w",
                "jobset.sigs.k8s.io/job-index": "0",
                "batch.kubernetes.io/job-completion-index": name.split("-")[-2],
            },
        },
        # The apiserver never answers a pod without containers (V1PodSpec.containers).
        "spec": {"nodeName": node_name, "containers": [{"name": "main", "image": "trainer"}]},
        "status": {"phase": phase},
    }


NODES = [node("n1", host="h1"), node("n2", ready=False), node("n3")]
PODS = [
    pod("w-slice-0-0-aaaaa", "train", "n1"),
    pod("w-slice-0-1-bbbbb", "train", "n2", "Pending"),
    pod("other-0-0-ccccc", "kube-system", "n3"),
]


@pytest.fixture
def kube() -> Iterator[KubernetesServer]:
    with KubernetesServer(NODES, PODS, token=TOKEN) as server:
        yield server


def reader(
    server: KubernetesServer, tmp_path: Path, sleep: RecordingSleep | None = None, **kw: Any
) -> KubernetesReader:
    config = write_kubeconfig(tmp_path / "kubeconfig", server.url, token=TOKEN)
    return KubernetesReader.from_kubeconfig(
        config,
        timeout=0.4,
        retry=RetryPolicy(attempts=3, base_delay=0.1, sleep=sleep or RecordingSleep()),
        **kw,
    )


def test_nodes_and_pods_are_mapped(kube: KubernetesServer, tmp_path: Path) -> None:
    r = reader(kube, tmp_path)
    nodes = r.nodes()
    assert nodes[0] == NodeInfo(
        name="n1",
        node_pool="pool",
        physical_host="h1",
        zone="z1",
        instance="n1",
        project="proj",
        ready=True,
    )
    assert [n.ready for n in nodes] == [True, False, True]
    pods = r.pods("train")
    assert pods[0] == PodInfo(
        name="w-slice-0-0-aaaaa",
        namespace="train",
        phase="Running",
        node="n1",
        workload="w",
        coordinator=True,
        workload_kind="jobset",
        containers=(ContainerInfo(name="main", image="trainer"),),
    )
    assert [p.name for p in pods] == ["w-slice-0-0-aaaaa", "w-slice-0-1-bbbbb"]
    assert [r_.path for r_ in kube.requests] == ["/api/v1/nodes", "/api/v1/namespaces/train/pods"]
    assert kube.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert r.source.startswith("kubernetes:kubeconfig=")


def test_all_namespaces_without_namespace(kube: KubernetesServer, tmp_path: Path) -> None:
    assert len(reader(kube, tmp_path).pods(None)) == 3
    assert kube.requests[-1].path == "/api/v1/pods"


def test_pages_are_followed(kube: KubernetesServer, tmp_path: Path) -> None:
    nodes = reader(kube, tmp_path, page_limit=2).nodes()
    assert [n.name for n in nodes] == ["n1", "n2", "n3"]
    assert [r.param("continue") for r in kube.requests] == [None, "2"]
    assert [r.param("limit") for r in kube.requests] == ["2", "2"]


def test_object_cap(kube: KubernetesServer, tmp_path: Path) -> None:
    assert len(reader(kube, tmp_path, page_limit=1, max_objects=2).nodes()) == 2
    assert len(kube.requests) == 2


@pytest.mark.parametrize("fault", [Fault.FORBIDDEN, Fault.UNAUTHORIZED])
def test_auth_errors_are_unavailable_without_retry(
    kube: KubernetesServer, tmp_path: Path, fault: Fault
) -> None:
    kube.inject(fault, times=5)
    sleep = RecordingSleep()
    with pytest.raises(SourceUnavailable, match=f"HTTP {fault.value} listing nodes"):
        reader(kube, tmp_path, sleep).nodes()
    assert len(kube.requests) == 1 and sleep.calls == []


def test_wrong_token_is_401(kube: KubernetesServer, tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "kc", kube.url, token="wrong")
    with pytest.raises(SourceUnavailable, match="HTTP 401 listing nodes: Unauthorized"):
        KubernetesReader.from_kubeconfig(config, timeout=0.4).nodes()


@pytest.mark.parametrize("fault", [Fault.TOO_MANY_REQUESTS, Fault.SERVER_ERROR])
def test_transient_errors_are_retried(kube: KubernetesServer, tmp_path: Path, fault: Fault) -> None:
    kube.inject(fault, times=2)
    sleep = RecordingSleep()
    assert len(reader(kube, tmp_path, sleep).nodes()) == 3
    assert len(kube.requests) == 3
    assert sleep.calls == ([0.0, 0.0] if fault is Fault.TOO_MANY_REQUESTS else [0.1, 0.2])


def test_retries_are_bounded(kube: KubernetesServer, tmp_path: Path) -> None:
    kube.inject(Fault.SERVER_ERROR, times=10)
    with pytest.raises(SourceUnavailable, match="HTTP 500 listing nodes after 3 attempts"):
        reader(kube, tmp_path).nodes()


def test_timeout(kube: KubernetesServer, tmp_path: Path) -> None:
    kube.inject(Fault.TIMEOUT)
    with pytest.raises(SourceUnavailable, match="listing nodes timed out after 0.4s"):
        reader(kube, tmp_path).nodes()
    assert len(kube.requests) == 1  # urllib3's own read retries are off


def test_malformed_body(kube: KubernetesServer, tmp_path: Path) -> None:
    kube.inject(Fault.MALFORMED)
    with pytest.raises(SourceUnavailable, match="malformed response listing nodes"):
        reader(kube, tmp_path).nodes()


def test_connection_reset(kube: KubernetesServer, tmp_path: Path) -> None:
    kube.inject(Fault.RESET)
    with pytest.raises(SourceUnavailable, match="cannot reach the API server listing nodes"):
        reader(kube, tmp_path).nodes()


def test_missing_or_broken_kubeconfig_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        KubernetesReader.from_kubeconfig(tmp_path / "nope")
    (tmp_path / "bad").write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ConfigError, match="kubeconfig"):
        KubernetesReader.from_kubeconfig(tmp_path / "bad", context="missing")


# --- GKE: endpoint and CA from the GKE API, TLS to the API server ---------------------------


@pytest.fixture
def tls_kube() -> Iterator[tuple[KubernetesServer, bytes]]:
    context, ca_pem = self_signed_tls()
    with KubernetesServer(NODES, PODS, token=TOKEN, tls=context) as server:
        yield server, ca_pem


def test_gke_cluster_over_tls(tls_kube: tuple[KubernetesServer, bytes]) -> None:
    kube, ca_pem = tls_kube
    endpoint = f"127.0.0.1:{kube.port}"
    with GkeServer({("proj", "us-east5", "c"): (endpoint, ca_pem)}) as gke:
        r = KubernetesReader.from_gke(
            "proj", "us-east5", "c", token_provider=lambda: TOKEN, container_endpoint=gke.url
        )
        assert [n.name for n in r.nodes()] == ["n1", "n2", "n3"]
        (request,) = gke.requests
    assert request.path == "/v1/projects/proj/locations/us-east5/clusters/c"
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert kube.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert r.source == "kubernetes:gke/projects/proj/locations/us-east5/clusters/c"


def test_gke_wrong_ca_cannot_connect(tls_kube: tuple[KubernetesServer, bytes]) -> None:
    kube, _ = tls_kube
    _, other_ca = self_signed_tls()
    with GkeServer({("proj", "l", "c"): (f"127.0.0.1:{kube.port}", other_ca)}) as gke:
        r = KubernetesReader.from_gke(
            "proj", "l", "c", token_provider=lambda: TOKEN, container_endpoint=gke.url, timeout=2
        )
        with pytest.raises(SourceUnavailable, match="cannot connect to list nodes"):
            r.nodes()


def test_gke_api_forbidden() -> None:
    with GkeServer({}) as gke:
        gke.inject(Fault.FORBIDDEN)
        with pytest.raises(SourceUnavailable, match="GKE API HTTP 403"):
            KubernetesReader.from_gke(
                "proj", "l", "c", token_provider=lambda: TOKEN, container_endpoint=gke.url
            )


def test_gke_token_failure_sends_nothing() -> None:
    def no_token() -> str:
        raise SourceUnavailable("google-auth", "no Application Default Credentials")

    with GkeServer({}) as gke:
        with pytest.raises(SourceUnavailable, match="no Application Default Credentials"):
            KubernetesReader.from_gke(
                "proj", "l", "c", token_provider=no_token, container_endpoint=gke.url
            )
        assert gke.requests == []
