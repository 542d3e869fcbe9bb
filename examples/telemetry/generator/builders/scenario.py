"""The Scenario (one folder: its cluster, pods, episodes and files) and ``declare``.

Its nodes, pods, JobSets, restarts and interruptions, the episodes that change them, and the
five files it writes; ``declare`` makes a scenario family's builder a scenario.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cluster import (
    FIRST_MINUTE,
    LAST_MINUTE,
    AnyPod,
    Context,
    JobSetSpec,
    Node,
    Pod,
    kube_list,
    lifecycle,
    spans,
)
from .deterministic import K8S_ALPHABET, LOWER_ALNUM, NS, rand_hex, rand_int, rand_str
from .kubeflow import KubeflowJobs
from .metrics import metrics_text
from .nodes import nodes_json
from .noise import TrainingNoise
from .pods import pods_json
from .recorder import Recorder
from .templates import (
    GPU_TAINT,
    TPU_TAINT,
    expect,
    gpu_capacity,
    gpu_labels,
    tpu_capacity,
    tpu_labels,
)


class Scenario(KubeflowJobs, TrainingNoise, Recorder):
    """One scenario: its cluster, workload and log entries, written as the files of one folder."""

    def __init__(self, slug: str, description: str, ctx: Context, expect: dict[str, Any]):
        self.slug = slug
        self.description = description
        self.ctx = ctx
        self.expect = expect
        self.nodes: list[Node] = []
        self.pods: list[AnyPod] = []
        self.entries: list[dict[str, Any]] = []
        self.jobsets: dict[str, JobSetSpec] = {}
        #: jobset name -> (value before the first sample, [minutes of +1 steps])
        self.restarts: dict[str, tuple[int, list[int]]] = {}
        #: Kubeflow training operator counter, (job_namespace, framework) ->
        #: (value before the first sample, or None if the series appears at its first step,
        #: [minutes of +1 steps]); one step per <Kind>Restarting event.
        self.operator_restarts: dict[tuple[str, str], tuple[int | None, list[int]]] = {}
        #: (pool, type, reason) -> (initial value or None, [minutes of +1 steps])
        self.interruptions: dict[tuple[str, str, str], tuple[int | None, list[int]]] = {}
        #: node name -> {minute: pressure condition type that is True then}
        self.node_pressure: dict[str, dict[int, str]] = {}
        #: Extra metric families after the standard ones: (name, help, kind, series).
        self.extra_families: list[
            tuple[str, str, str, list[tuple[dict[str, str], Callable[[int], Any]]]]
        ] = []
        #: pod uid -> edits of its pods.json item; node name -> edits of its nodes.json item.
        self.pod_hooks: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.node_hooks: dict[str, Callable[[dict[str, Any]], None]] = {}
        #: pods.json items of pods that are neither JobSet nor Kubeflow pods.
        self.extra_pod_items: list[dict[str, Any]] = []
        #: Further ``kubectl get -o json`` lists beside the five files: file name -> items.
        self.documents: dict[str, list[dict[str, Any]]] = {}
        self._ip = 2

    def add_pool(
        self,
        pool: str,
        machine: str,
        count: int,
        *,
        pool_hash: str | None = None,
        suffixes: list[str] | None = None,
        spot: bool = False,
        hosts: bool = False,
        host_ids: dict[int, str] | None = None,
        labels: dict[str, str] | None = None,
        capacity: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        created_days: int = 6,
    ) -> list[Node]:
        ctx = self.ctx
        pool_hash = pool_hash or rand_hex(8, "pool", ctx.cluster, pool)
        block = f"{rand_hex(16, 'block', ctx.cluster)}" if hosts else None
        out = []
        for i in range(count):
            suffix = (suffixes or [])[i] if suffixes else rand_str(LOWER_ALNUM, 4, pool, i)
            name = f"gke-{ctx.cluster}-{pool}-{pool_hash}-{suffix}"
            assert len(name) <= 63, name
            created = ctx.t_ns - created_days * 86400 * NS - rand_int(0, 3600, name) * NS
            node = Node(
                name=name,
                pool=pool,
                zone=ctx.zone,
                machine=machine,
                project=ctx.project,
                instance_id=str(rand_int(10**18, 9 * 10**18, "iid", name)),
                ip=f"10.{rand_int(0, 200, 'net', ctx.cluster)}.0.{self._ip}",
                pod_cidr=f"10.{rand_int(64, 120, 'pods', ctx.cluster)}.{self._ip}.0/24",
                created_ns=created,
                boot_ns=created + 95 * NS,
                spot=spot,
                labels=dict(labels or {}),
                capacity=dict(capacity or {}),
                taints=list(taints or []),
                ready_since_ns=created + 110 * NS,
            )
            self._ip += 1
            if hosts:
                node.block = block
                node.subblock = rand_hex(16, "subblock", ctx.cluster, pool, i // 8)
                node.host = (host_ids or {}).get(i) or rand_hex(32, "host", name)
            self.nodes.append(node)
            out.append(node)
        return out

    def gpu_pool(
        self,
        pool: str,
        machine: str,
        count: int,
        accel: str,
        cpu: int,
        mem_ki: int,
        gpus: int = 8,
        *,
        labels: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> list[Node]:
        """GPU nodes: ``gpus`` x ``accel`` each, tainted for GPU pods only."""
        return self.add_pool(
            pool,
            machine,
            count,
            labels={**gpu_labels(accel, gpus), **(labels or {})},
            capacity=gpu_capacity(cpu, mem_ki, gpus),
            taints=GPU_TAINT,
            **kwargs,
        )

    def cpu_pool(
        self, pool: str, machine: str, count: int, cpu: int, mem_ki: int | None = None
    ) -> list[Node]:
        """CPU nodes with ``cpu`` cores and ``mem_ki`` KiB of memory."""
        capacity = {"cpu": str(cpu)} | ({"memory": f"{mem_ki}Ki"} if mem_ki else {})
        return self.add_pool(pool, machine, count, capacity=capacity)

    def tpu_pool(
        self,
        pool: str,
        machine: str,
        count: int,
        accel: str,
        topology: str,
        cpu: int,
        mem_ki: int,
        **kwargs: Any,
    ) -> list[Node]:
        """TPU hosts of a ``topology`` slice, 4 chips each, tainted for TPU pods only."""
        labels = tpu_labels(accel, topology)
        capacity = tpu_capacity(cpu, mem_ki)
        return self.add_pool(
            pool, machine, count, labels=labels, capacity=capacity, taints=TPU_TAINT, **kwargs
        )

    def outage(
        self, node: Node, start_m: int, unknown: int, false: int = 1, *, noticed: float
    ) -> None:
        """Ready=Unknown for ``unknown`` samples from ``start_m``, then False for ``false``; the
        node controller's NodeNotReady at T+noticed, the kubelet's NodeReady on recovery."""
        self.node_status(node, noticed, "NodeNotReady")
        for m in range(start_m, start_m + unknown):
            node.not_ready[m] = "Unknown"
        for m in range(start_m + unknown, start_m + unknown + false):
            node.not_ready[m] = "False"
        recovered = start_m + unknown + false
        node.boot_ns = self.ctx.at(recovered - 1.6, "boot", node.name)
        node.ready_since_ns = self.ctx.at(recovered - 0.4, "ready", node.name)
        self.node_status(node, recovered - 0.35, "NodeReady", component="kubelet")

    def add_jobset(
        self, spec: JobSetSpec, restarts_before: int, restart_minutes: list[int]
    ) -> None:
        self.jobsets[spec.name] = spec
        self.restarts[spec.name] = (restarts_before, list(restart_minutes))

    def attempt(
        self,
        spec: JobSetSpec,
        attempt: int,
        start_m: int,
        end_m: int | None,
        placement: list[Node],
        *,
        running_from: dict[int, int | None] | None = None,
        failed_at: dict[int, int] | None = None,
        unsched: dict[int, tuple[int, int]] | None = None,
        sched_message: str | None = None,
    ) -> list[Pod]:
        """Create the pods of one JobSet attempt (all replicated jobs), started at ``start_m``.

        ``running_from[g]`` overrides the minute pod ``g`` turns Running (None = never).
        """
        pods = []
        for j in range(spec.replicas):
            for p in range(spec.parallelism):
                g = j * spec.parallelism + p
                name = (
                    f"{spec.job_name(j)}-{p}-"
                    f"{rand_str(K8S_ALPHABET, 5, self.ctx.cluster, spec.name, attempt, j, p)}"
                )
                run = (running_from or {}).get(g, start_m + 1)
                phases = lifecycle(start_m, run, (failed_at or {}).get(g))
                bound = run is not None or unsched is None or g not in unsched
                node = placement[g] if bound else None
                pod = self.jobset_pod(spec, j, p, attempt, name, node, start_m, end_m, phases)
                if unsched and g in unsched:
                    pod.unsched.append(unsched[g])
                    pod.sched_message = sched_message
                pods.append(pod)
                if (
                    FIRST_MINUTE <= start_m <= LAST_MINUTE
                    and pod.node
                    and run is not None
                    and not (unsched and g in unsched)
                ):
                    self.scheduled(pod, start_m - 0.85 + 0.01 * g)
        return pods

    def attempts(
        self,
        spec: JobSetSpec,
        first: int,
        starts: list[int],
        placement: list[Node],
        failed_at: Callable[[int, int], dict[int, int]],
    ) -> list[list[Pod]]:
        """One attempt (numbered from ``first``) per start; every one but the last fails, its
        pods at ``failed_at(k, end)`` (pod index -> minute)."""
        return [
            self.attempt(
                spec,
                first + k,
                start,
                end,
                placement,
                failed_at=failed_at(k, end) if end is not None else None,
            )
            for k, start, end in spans(starts)
        ]

    def jobset_pod(
        self,
        spec: JobSetSpec,
        j: int,
        p: int,
        attempt: int,
        name: str,
        node: Node | None,
        start_m: int,
        end_m: int | None,
        phases: list[tuple[int, str]],
        kind: type[Pod] = Pod,
        **more: Any,
    ) -> Pod:
        """Pod ``p`` of Job ``j`` of a JobSet, in the workload's namespace, created just
        before T+start_m."""
        pod = kind(
            spec=spec,
            namespace=self.ctx.namespace,
            j=j,
            p=p,
            attempt=attempt,
            name=name,
            node=node,
            start_m=start_m,
            created_ns=self.ctx.at(start_m - 0.9, "created", name),
            phases=phases,
            end_m=end_m,
            ip=self.ctx.pod_ip(name),
            **more,
        )
        self.pods.append(pod)
        return pod

    def waiting_attempt(
        self,
        spec: JobSetSpec,
        attempt: int,
        g: int,
        start_m: int,
        end_m: int | None,
        placement: list[Node],
        *,
        failed: int | None = None,
    ) -> None:
        """An attempt whose pod ``g`` waits for its node, unreachable until it is Ready again:
        FailedScheduling at the start, Scheduled once the node is back, Running a minute on."""
        node, back = placement[g], start_m
        while node.not_ready.get(back):
            back += 1
        message = unreachable_node(len(placement), spec.resources)
        self.attempt(
            spec,
            attempt,
            start_m,
            end_m,
            placement,
            running_from={g: back + 1},
            failed_at=None if failed is None else {g: failed},
            unsched={g: (start_m, back)},
            sched_message=message,
        )
        pod = self.pod(spec, attempt, g)
        self.failed_scheduling(pod, start_m - 0.84, message)
        self.scheduled(pod, back - 0.2)

    def suspect(self, node: Node, failures: int) -> None:
        """The diagnosis must name ``node``'s host, which failed ``failures`` times."""
        entry = {"host": node.host, "nodes": [node.name], "failures": failures}
        self.expect["suspect_hosts"].append(entry)

    def coordinator_at(self, spec: JobSetSpec, m: float) -> Pod | None:
        for pod in self.pods:
            if pod.spec is spec and pod.coordinator and pod.phase_at(math.floor(m)) == "Running":
                return pod
        return None

    def coordinator_stops(
        self,
        spec: JobSetSpec,
        m0: float,
        text: str = "Terminating: job controller requested shutdown (SIGTERM)",
        *,
        after: float = 1.1,
        unless_on: Node | None = None,
    ) -> None:
        """The coordinator running at T+m0 logs that the restart stops it (not when it runs
        on ``unless_on``, the node that went away)."""
        coord = self.coordinator_at(spec, m0)
        if coord and coord.node is not unless_on:
            self.container_log(coord, m0 + after, text, key="sigterm")

    def pod(self, spec: JobSetSpec, attempt: int, g: int) -> Pod:
        for pod in self.pods:
            if (
                pod.spec is spec
                and pod.attempt == attempt
                and pod.j * spec.parallelism + pod.p == g
            ):
                return pod
        raise KeyError((spec.name, attempt, g))

    def interruption(self, pool: str, itype: str, reason: str, m: int) -> None:
        initial, steps = self.interruptions.get((pool, itype, reason), (None, []))
        self.interruptions[(pool, itype, reason)] = (initial, [*steps, m])

    def interruption_constant(self, pool: str, itype: str, reason: str, value: int) -> None:
        self.interruptions[(pool, itype, reason)] = (value, [])

    def host_failure(
        self,
        node: Node,
        m0: float,
        kernel: list[str | tuple[str, str]],
        *,
        unknown: int = 4,
        false: int = 1,
        auto_restart: bool = True,
    ) -> None:
        """One host-error episode of ``node`` starting at T+m0 minutes.

        ``kernel`` = the node-journal lines logged just before the crash: kernel messages, or
        (ident, message) for another process's.
        """
        for i, line in enumerate(kernel):
            ident, message = line if isinstance(line, tuple) else ("kernel", line)
            self.kernel_line(node, m0 - 0.45 + 0.02 * i, message, key=i, ident=ident)
        self.audit(node, m0 - 0.05, "compute.instances.hostError")
        self.termination_log(node, m0 + 0.08)
        down = math.ceil(m0 + 0.1)
        self.outage(node, down, unknown, false, noticed=m0 + 0.62)
        if auto_restart:
            self.audit(node, m0 + 1.3, "compute.instances.automaticRestart")
        self.interruption(node.pool, "TerminationEvent", "HostError", down)

    def preemption(self, node: Node, m0: float, reason: str = "Eviction") -> None:
        self.audit(node, m0, "compute.instances.preempted")
        self.pool_log(
            node,
            m0 + 0.07,
            f"PreemptionEvent: Node '{node.name}' in node pool '{node.pool}' was preempted.",
        )
        down = math.ceil(m0 + 0.1)
        self.outage(node, down, 3, 1, noticed=m0 + 0.7)
        self.interruption(node.pool, "PreemptionEvent", reason, down)

    def maintenance(self, node: Node, m0: float) -> None:
        self.pool_log(
            node,
            m0,
            f"MaintenanceEvent: Node '{node.name}' in node pool "
            f"'{node.pool}' is undergoing host maintenance.",
        )
        self.audit(node, m0 + 0.1, "compute.instances.terminateOnHostMaintenance")
        down = math.ceil(m0 + 0.2)
        self.outage(node, down, 4, 1, noticed=m0 + 0.75)
        self.interruption(node.pool, "MaintenanceEvent", "HW/SW Maintenance", down)

    def metrics_text(self) -> str:
        return metrics_text(self)

    def nodes_json(self) -> dict[str, Any]:
        return nodes_json(self)

    def pods_json(self) -> dict[str, Any]:
        return pods_json(self)

    def scenario_json(self) -> dict[str, Any]:
        c = self.ctx
        return {
            "description": self.description,
            "context": {
                "project": c.project,
                "location": c.location,
                "cluster": c.cluster,
                "namespace": c.namespace,
                "workload": c.workload,
                "issue_time": c.issue_time,
                **({"workload_kind": c.workload_kind} if c.workload_kind else {}),
            },
            "expect": self.expect,
        }

    def write(self, root: Path) -> dict[str, int]:
        out_dir = root / self.slug
        out_dir.mkdir(parents=True, exist_ok=True)
        entries = sorted(self.entries, key=lambda e: (e["timestamp"], e["insertId"]), reverse=True)
        files = {
            "scenario.json": dump(self.scenario_json()),
            "logs.json": dump(entries),
            "metrics.om": self.metrics_text(),
            "nodes.json": dump(self.nodes_json()),
            "pods.json": dump(self.pods_json()),
        }
        files.update({name: dump(kube_list(items)) for name, items in self.documents.items()})
        sizes = {}
        for name, text in files.items():
            (out_dir / name).write_text(text, encoding="utf-8")
            sizes[name] = len(text.encode())
        return sizes


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def unreachable_node(total: int, resources: dict[str, str]) -> str:
    """The scheduler's message for a pod whose only fitting node is unreachable."""
    (resource,) = [r for r in resources if r in ("google.com/tpu", "nvidia.com/gpu")]
    others = total - 1
    return (
        f"0/{total} nodes are available: 1 node(s) had untolerated taint "
        f"{{node.kubernetes.io/unreachable: }}, {others} Insufficient {resource}. preemption: "
        f"0/{total} nodes are available: 1 Preemption is not helpful for scheduling, {others} No "
        "preemption victims found for incoming pod."
    )


def declare(
    build: Callable[[Any, Context], None],
    slug: str,
    description: str,
    ctx: Context,
    root_cause: str,
    remediation_path: str,
    *,
    restart_loop: bool = True,
    kubelet_every: int = 29,
    kind: type[Scenario] | None = None,
) -> Callable[[], Scenario]:
    """A scenario: its folder ``slug``, ``description``, cluster and expected diagnosis (its
    suspect hosts: ``Scenario.suspect``), built by ``build(sc, ctx)`` on a new Scenario of
    class ``kind``; the kubelet's chatter on every node comes last."""

    @functools.wraps(build)
    def make() -> Scenario:
        expected = expect(root_cause, remediation_path, loop=restart_loop)
        sc = (kind or Scenario)(slug, description, ctx, expected)
        build(sc, sc.ctx)
        sc.kubelet_noise(every=kubelet_every)
        return sc

    return make
