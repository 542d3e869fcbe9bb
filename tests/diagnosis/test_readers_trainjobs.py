"""TrainJobs through the official ``kubernetes`` client against the local fake API server.

The fake serves ``/apis/trainer.kubeflow.org/v1alpha1[/namespaces/NS]/trainjobs`` as the API
server serves a custom resource (a ``TrainJobList`` whose items repeat apiVersion and kind),
with ``limit``/``continue`` pages, and a 404 when the CRD is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import RecordingSleep
from fakeservers import Fault, KubernetesServer, write_kubeconfig

from loopbreaker.diagnosis import trainjobs
from loopbreaker.diagnosis.readers.kube import KubernetesReader
from loopbreaker.diagnosis.readers.retry import RetryPolicy
from loopbreaker.errors import SourceUnavailable

TOKEN = "kube-token"


def trainjob(name: str, namespace: str, reason: str | None = None) -> dict[str, Any]:
    conditions = []
    if reason:
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": reason,
                "message": "jobset failed due to one or more job failures",
                "lastTransitionTime": "2026-11-17T09:36:54Z",
            }
        )
    # Stored without kind: the fake adds apiVersion and kind as the API server does.
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"conditions": conditions},
    }


@pytest.fixture
def kube() -> Iterator[KubernetesServer]:
    with KubernetesServer([], [], token=TOKEN) as server:
        server.trainjobs = [
            trainjob("llama-ft", "ml", "FailedJobs"),
            trainjob("bert", "ml"),
            trainjob("gemma", "other"),
        ]
        yield server


def reader(server: KubernetesServer, tmp_path: Path, **kw: Any) -> KubernetesReader:
    config = write_kubeconfig(tmp_path / "kubeconfig", server.url, token=TOKEN)
    return KubernetesReader.from_kubeconfig(
        config,
        timeout=0.4,
        retry=RetryPolicy(attempts=2, base_delay=0.01, sleep=RecordingSleep()),
        **kw,
    )


def test_namespaced_trainjobs_are_read_with_their_failed_reason(
    kube: KubernetesServer, tmp_path: Path
) -> None:
    r = reader(kube, tmp_path)
    found = r.trainjobs("ml")
    assert [r_.path for r_ in kube.requests] == [
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs"
    ]
    assert kube.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    seen = [(s.workload, s.namespace) for s in found if s.signature == trainjobs.SEEN]
    assert seen == [("llama-ft", "ml"), ("bert", "ml")]
    (failed,) = [s for s in found if s.signature == trainjobs.FAILED]
    assert (failed.workload, failed.reason) == ("llama-ft", "FailedJobs")
    assert failed.log_name == r.source  # the finding cites where it was read


def test_all_namespaces_in_pages(kube: KubernetesServer, tmp_path: Path) -> None:
    found = reader(kube, tmp_path, page_limit=2).trainjobs(None)
    assert {s.workload for s in found} == {"llama-ft", "bert", "gemma"}
    assert {r.path for r in kube.requests} == {"/apis/trainer.kubeflow.org/v1alpha1/trainjobs"}
    assert [r.param("continue") for r in kube.requests] == [None, "2"]


def test_no_trainer_crd_means_no_trainjob(kube: KubernetesServer, tmp_path: Path) -> None:
    kube.trainjobs = None  # the API server answers 404 for an unknown resource
    assert reader(kube, tmp_path).trainjobs("ml") == ()
    assert len(kube.requests) == 1


def test_forbidden_is_unavailable_not_empty(kube: KubernetesServer, tmp_path: Path) -> None:
    kube.inject(Fault.FORBIDDEN, times=3)
    with pytest.raises(SourceUnavailable, match="HTTP 403 listing trainjobs in ml"):
        reader(kube, tmp_path).trainjobs("ml")
