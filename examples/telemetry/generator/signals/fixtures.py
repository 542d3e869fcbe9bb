"""The clusters the golden signal fixtures are logged in, and the fixture table they fill.

The faulty-host TPU slice and the NCCL-hang A100 nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..builders.cluster import AnyPod, Node, Pod
from ..builders.gpu import a2_ultra_pool
from ..builders.scenario import Scenario
from ..builders.templates import jobset
from ..scenarios.healthy_nodes import A100_CLUSTER
from ..scenarios.infrastructure import TPU_CLUSTER, faulty_host_slice


@dataclass
class Fixtures:
    """The clusters (``sc``: the TPU slice, ``gs``: the A100 nodes), their pods, and the
    fixtures written so far (name -> entry, expect)."""

    sc: Scenario
    tpu: list[Node]
    tpods: list[Pod]
    gs: Scenario
    gnodes: list[Node]
    gpods: list[Pod]
    out: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def node(self) -> Node:
        """The TPU node on the faulty host."""
        return self.tpu[2]

    @property
    def node_exp(self) -> dict[str, Any]:
        return {"node": self.node.name, "cluster": self.sc.ctx.cluster}

    def add(self, name: str, entry: dict[str, Any], **exp: Any) -> None:
        self.out[name] = {"entry": entry, "expect": exp}

    def pod_exp(self, pod: Pod) -> dict[str, Any]:
        """What a workload pod's signal names: the pod, its workload and cluster, whether it
        coordinates, its node."""
        ctx = self.scenario(pod).ctx
        return {
            "pod": pod.name,
            "workload": ctx.workload,
            "cluster": ctx.cluster,
            "coordinator": pod.coordinator,
            "node": pod.node.name if pod.node else None,
        }

    def stderr(self, name: str, pod: Pod, m: float, kind: str, text: str) -> None:
        """A line the workload pod writes to stderr at T+m, read as ``kind``."""
        entry = self.scenario(pod).container_log(pod, m, text, stderr=True)
        self.add(name, entry, kind=kind, **self.pod_exp(pod))

    def scenario(self, pod: Pod) -> Scenario:
        """The cluster ``pod`` runs in."""
        return self.sc if any(pod is p for p in self.sc.pods) else self.gs


def node_of(pod: AnyPod) -> str | None:
    return pod.node.name if pod.node else None


def fixtures() -> Fixtures:
    sc = Scenario("signals", "", TPU_CLUSTER, {})
    tpu = faulty_host_slice(sc)
    image, tpu_res = "us-docker.pkg.dev/x/maxtext:1", {"google.com/tpu": "4"}
    slices = {"rjob": "slice", "replicas": 2, "parallelism": 2}
    tspec = jobset(TPU_CLUSTER.workload, "maxtext", image, tpu_res, {}, [], **slices)
    tpods = sc.attempt(tspec, 3, -30, None, tpu)
    gs = Scenario("signals-gpu", "", A100_CLUSTER, {})
    gnodes = a2_ultra_pool(gs)
    gpu_res = {"nvidia.com/gpu": "8"}
    gspec = jobset(A100_CLUSTER.workload, "pytorch", "x", gpu_res, {}, [], coordinator_label=True)
    gpods = gs.attempt(gspec, 2, -30, None, gnodes)
    return Fixtures(sc, tpu, tpods, gs, gnodes, gpods)
