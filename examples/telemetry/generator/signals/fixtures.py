"""The two clusters the golden signal fixtures are logged in (the faulty-host TPU slice and
the NCCL-hang A100 JobSet), and the fixture table they fill."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..builders.cluster import AnyPod, Context, JobSetSpec, Node, Pod
from ..builders.scenario import Scenario
from ..scenarios.infrastructure import FAULTY_HOST


@dataclass
class Fixtures:
    """The clusters, their pods, and the fixtures written so far (name -> entry, expect)."""

    ctx: Context
    sc: Scenario
    tpu: list[Node]
    tspec: JobSetSpec
    tpods: list[Pod]
    gctx: Context
    gs: Scenario
    gnodes: list[Node]
    gspec: JobSetSpec
    gpods: list[Pod]
    out: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def node(self) -> Node:
        return self.tpu[2]

    @property
    def node_exp(self) -> dict[str, Any]:
        return {"node": self.node.name, "cluster": self.ctx.cluster}

    def add(self, name: str, entry: dict[str, Any], **exp: Any) -> None:
        self.out[name] = {"entry": entry, "expect": exp}


def pod_exp(pod: Pod, cluster: str, workload: str) -> dict[str, Any]:
    return {
        "pod": pod.name,
        "workload": workload,
        "cluster": cluster,
        "coordinator": pod.coordinator,
        "node": pod.node.name if pod.node else None,
    }


def node_of(pod: AnyPod) -> str | None:
    return pod.node.name if pod.node else None


def fixtures() -> Fixtures:
    ctx = Context(
        project="customer-ai-project-123",
        location="us-east5",
        zone="us-east5-a",
        cluster="tpu-cluster-prod",
        namespace="default",
        workload="llama3-70b-training",
        issue_time="2026-05-20T08:15:00Z",
    )
    sc = Scenario("signals", "", ctx, {})
    tpu = sc.add_pool(
        "tpu-pool",
        "ct5p-hightpu-4t",
        4,
        pool_hash="3f9a2b1c",
        suffixes=["m4p8", "r2d6", "x7k2", "w9c3"],
        hosts=True,
        host_ids={2: FAULTY_HOST},
    )
    tspec = JobSetSpec(
        name="llama3-70b-training",
        rjob="slice",
        replicas=2,
        parallelism=2,
        container="maxtext",
        image="us-docker.pkg.dev/x/maxtext:1",
        resources={"google.com/tpu": "4"},
        node_selector={},
        tolerations=[],
    )
    tpods = sc.attempt(tspec, 3, -30, None, tpu)
    gctx = Context(
        project="neox-research-7781",
        location="us-central1-a",
        zone="us-central1-a",
        cluster="a100-cluster",
        namespace="llm",
        workload="gpt-neox-pretrain",
        issue_time="2026-01-27T16:48:00Z",
    )
    gs = Scenario("signals-gpu", "", gctx, {})
    gnodes = gs.add_pool("a100-pool", "a2-ultragpu-8g", 4)
    gspec = JobSetSpec(
        name="gpt-neox-pretrain",
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="pytorch",
        image="x",
        resources={"nvidia.com/gpu": "8"},
        node_selector={},
        tolerations=[],
        coordinator_label=True,
    )
    gpods = gs.attempt(gspec, 2, -30, None, gnodes)
    return Fixtures(ctx, sc, tpu, tspec, tpods, gctx, gs, gnodes, gspec, gpods)
