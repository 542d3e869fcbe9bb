"""OpenMetrics series: every scenario's families and the kube-state-metrics/cAdvisor extras.

The extra series carry the labels kube-prometheus-stack's scrape jobs give them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .cluster import FIRST_MINUTE, LAST_MINUTE, AnyPod, KfPod, PlainPod
from .deterministic import rand_float

if TYPE_CHECKING:
    from .scenario import Scenario


PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def metrics_text(sc: Scenario) -> str:
    ctx = sc.ctx
    minutes = range(FIRST_MINUTE, LAST_MINUTE + 1)
    out: list[str] = []

    def family(
        name: str,
        series: Iterable[tuple[dict[str, str], Callable[[int], Any]]],
        help_text: str,
        kind: str = "gauge",
    ) -> None:
        # An OpenMetrics counter family drops the _total its samples carry.
        family_name = name.removesuffix("_total") if kind == "counter" else name
        out.append(f"# HELP {family_name} {help_text}")
        out.append(f"# TYPE {family_name} {kind}")
        for labels, value_at in series:
            lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
            for m in minutes:
                v = value_at(m)
                if v is None:
                    continue
                out.append(f"{name}{{{lab}}} {v} {ctx.sample_s(m)}")

    def restarts_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
        for name, (before, steps) in sorted(sc.restarts.items()):
            yield (
                {"cluster": ctx.cluster, "namespace": ctx.namespace, "jobset_name": name},
                lambda m, b=before, s=steps: b + sum(1 for x in s if x <= m),
            )

    if sc.restarts or not sc.operator_restarts:
        family(
            "kube_jobset_restarts",
            restarts_series(),
            "JobSet status.restarts (lifetime total).",
        )

    def operator_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
        for (namespace, framework), (initial, steps) in sorted(sc.operator_restarts.items()):
            yield (
                {"cluster": ctx.cluster, "job_namespace": namespace, "framework": framework},
                counter(initial, steps),
            )

    if sc.operator_restarts:
        family(
            "training_operator_jobs_restarted_total",
            operator_series(),
            "Counts number of jobs restarted",
            kind="counter",
        )

    def interruption_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
        for (pool, itype, reason), (initial, steps) in sorted(sc.interruptions.items()):
            yield (
                {
                    "cluster_name": ctx.cluster,
                    "node_pool_name": pool,
                    "interruption_type": itype,
                    "interruption_reason": reason,
                },
                counter(initial, steps),
            )

    if sc.interruptions:
        family(
            "kubernetes_io:node_pool_interruption_count",
            interruption_series(),
            "Node pool interruptions (cumulative per label set).",
        )

    def node_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
        for node in sorted(sc.nodes, key=lambda n: n.name):
            for status in ("False", "True", "Unknown"):
                yield (
                    {
                        "cluster_name": ctx.cluster,
                        "node_name": node.name,
                        "node_pool_name": node.pool,
                        "condition": "Ready",
                        "status": status,
                    },
                    lambda m, n=node, st=status: int(n.not_ready.get(m, "True") == st),
                )
            pressure = sc.node_pressure.get(node.name)
            for condition in sorted(set((pressure or {}).values())):
                for status in ("False", "True"):
                    yield (
                        {
                            "cluster_name": ctx.cluster,
                            "node_name": node.name,
                            "node_pool_name": node.pool,
                            "condition": condition,
                            "status": status,
                        },
                        lambda m, p=pressure, c=condition, st=status: int(
                            ((p or {}).get(m) == c) == (st == "True")
                        ),
                    )

    family(
        "kubernetes_io:node_status_condition",
        node_series(),
        "Node conditions (Ready, MemoryPressure, DiskPressure), 1 for the current status."
        if sc.node_pressure
        else "Node Ready condition, 1 for the current status.",
    )

    # Pod metrics cover the workload's pods only, as the workflow's pod=~"<workload>.*"
    # queries return them.
    pods = sorted(
        (p for p in sc.pods if p.name.startswith(ctx.workload + "-")), key=lambda p: p.name
    )
    # A Kubeflow pod re-created under the same name continues the same series.
    by_name: dict[tuple[str, str], list[AnyPod]] = {}
    for pod in pods:
        by_name.setdefault((pod.namespace, pod.name), []).append(pod)

    def phase_of(m: int, objects: list[AnyPod]) -> str | None:
        return next((ph for ph in (o.phase_at(m) for o in objects) if ph is not None), None)

    def phase_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
        for (namespace, name), objects in by_name.items():
            for phase in PHASES:
                yield (
                    {
                        "cluster": ctx.cluster,
                        "namespace": namespace,
                        "pod": name,
                        "phase": phase,
                    },
                    lambda m, o=objects, ph=phase: (
                        None if phase_of(m, o) is None else int(phase_of(m, o) == ph)
                    ),
                )

    family("kube_pod_status_phase", phase_series(), "Pod phase, 1 for the current phase.")

    def unsched_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
        for (namespace, name), objects in by_name.items():
            if not any(o.unsched for o in objects):
                continue
            yield (
                {
                    "cluster_name": ctx.cluster,
                    "namespace_name": namespace,
                    "pod_name": name,
                },
                lambda m, o=objects: (
                    None
                    if phase_of(m, o) is None
                    else int(any(x.unsched_at(m) for x in o if x.phase_at(m) is not None))
                ),
            )

    # Only pods that are unschedulable at some point get a series (0/1 over their
    # lifetime); a missing series means the pod was never unschedulable.
    if any(p.unsched for p in pods):
        family(
            "kubernetes_io:pod_status_unschedulable",
            unsched_series(),
            "1 while the pod is unschedulable.",
        )
    for name, help_text, kind, extra in sc.extra_families:
        family(name, extra, help_text, kind)
    out.append("# EOF")
    return "\n".join(out) + "\n"


def counter(initial: int | None, steps: list[int]) -> Callable[[int], int | None]:
    """A cumulative series: ``initial`` before the first sample (None: the series appears at
    its first step), +1 at each minute of ``steps``."""
    first = FIRST_MINUTE if initial is not None else min(steps)

    def value(m: int) -> int | None:
        if m < first:
            return None
        return (initial or 0) + sum(1 for x in steps if x <= m)

    return value


GIB = 2**30


def metric_family(
    sc: Scenario, name: str, help_text: str, kind: str = "gauge"
) -> list[tuple[dict[str, str], Callable[[int], Any]]]:
    """The series list of one extra metric family (created on first use)."""
    for family_name, _, _, series in sc.extra_families:
        if family_name == name:
            return series
    series = []
    sc.extra_families.append((name, help_text, kind, series))
    return series


def pod_labels_ksm(sc: Scenario, pod: AnyPod) -> dict[str, str]:
    """The labels kube-state-metrics puts on a container series of ``pod``."""
    return {
        "cluster": sc.ctx.cluster,
        "namespace": pod.namespace,
        "pod": pod.name,
        "uid": pod.uid,
    }


def container_of(pod: AnyPod) -> str:
    return pod.spec.container


def since(minute: int) -> Callable[[int], bool]:
    return lambda m: m >= minute


def present(
    alive: Callable[[int], bool], value: Callable[[int], int]
) -> Callable[[int], int | None]:
    """``value(m)`` while the object exists, no sample (None) otherwise."""
    return lambda m: value(m) if alive(m) else None


def lifetime(pod: AnyPod) -> Callable[[int], bool]:
    """Minutes the pod object exists (kube-state-metrics reports it)."""
    return lambda m: m >= pod.start_m and (pod.end_m is None or m < pod.end_m)


def memory_limit(pod: AnyPod, default: str = "64Gi") -> int:
    """The container's memory limit in bytes (requests = limits in these pods)."""
    if isinstance(pod, KfPod):
        text = pod.spec.resources[pod.rtype].get("memory", default)
    else:
        text = pod.spec.resources.get("memory", default)
    return int(text.removesuffix("Gi")) * GIB


def add_memory(
    sc: Scenario, pod: AnyPod, usage: Callable[[int], float], *, with_limit: bool = True
) -> None:
    """cAdvisor's working set of the pod's container (``usage(m)`` a share of its limit)
    and the limit kube-state-metrics reports."""
    limit = memory_limit(pod)
    alive = lifetime(pod)
    node = pod.node.name if pod.node else ""
    labels = {
        "cluster": sc.ctx.cluster,
        "namespace": pod.namespace,
        "pod": pod.name,
        "container": container_of(pod),
        "node": node,
    }
    metric_family(
        sc, "container_memory_working_set_bytes", "Current working set of the container."
    ).append(
        (
            labels,
            lambda m, a=alive, u=usage, lim=limit: (
                int(min(u(m), 1.0) * lim) if a(m) and pod.phase_at(m) == "Running" else None
            ),
        )
    )
    if with_limit:
        metric_family(
            sc, "kube_pod_container_resource_limits", "The container's resource limits."
        ).append(
            (
                {
                    **pod_labels_ksm(sc, pod),
                    "container": container_of(pod),
                    "node": node,
                    "resource": "memory",
                    "unit": "byte",
                },
                lambda m, a=alive, lim=limit: lim if a(m) else None,
            )
        )


def add_reason(
    sc: Scenario,
    metric: str,
    pod: AnyPod,
    reason: str,
    minutes: Callable[[int], bool],
    **labels: str,
) -> None:
    """A kube-state-metrics reason series of ``pod``: 1 while ``minutes(m)``, absent else."""
    helps = {
        "kube_pod_container_status_last_terminated_reason": "Describes the last reason the "
        "container was in terminated state.",
        "kube_pod_container_status_terminated_reason": "Describes the reason the container "
        "is currently in terminated state.",
        "kube_pod_container_status_waiting_reason": "Describes the reason the container is "
        "currently in waiting state.",
        "kube_pod_status_reason": "The pod status reasons.",
    }
    metric_family(sc, metric, helps[metric]).append(
        (
            {**pod_labels_ksm(sc, pod), **labels, "reason": reason},
            present(lifetime(pod), lambda m, f=minutes: 1 if f(m) else 0),
        )
    )


def add_pod_info(
    sc: Scenario,
    pod: AnyPod | PlainPod,
    priority_class: str,
    created_by: tuple[str, str],
) -> None:
    """kube_pod_info of ``pod`` while it exists, with its PriorityClass and owner."""
    node = pod.node
    metric_family(sc, "kube_pod_info", "Information about pod.").append(
        (
            {
                **pod_labels_ksm(sc, pod),
                "host_ip": node.ip if node else "",
                "pod_ip": pod.ip,
                "node": node.name if node else "",
                "created_by_kind": created_by[0],
                "created_by_name": created_by[1],
                "priority_class": priority_class,
                "host_network": "false",
            },
            present(lifetime(pod), lambda m: 1),
        )
    )


def steady(pod: AnyPod, share: float, spread: float) -> Callable[[int], float]:
    """A working set of about ``share`` of the limit, ``spread`` up or down by minute."""
    return lambda m: share + rand_float(-spread, spread, "m", pod.name, m)


def oom_usage(fail_minutes: list[int], ramp: int = 9) -> Callable[[int], float]:
    """Working set (share of the limit) that climbs to the limit before each OOM kill."""

    def usage(m: int) -> float:
        for f in fail_minutes:
            if f - ramp <= m <= f:
                return 0.62 + 0.38 * (m - (f - ramp)) / ramp
        return 0.6 + rand_float(-0.02, 0.02, "mem", m)

    return usage
