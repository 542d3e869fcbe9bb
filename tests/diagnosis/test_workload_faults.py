"""Restart loops the infrastructure did not cause: OOM kills, priority preemption,
node-pressure evictions, image pulls; each from each kind of its evidence, scoped to the
workload, in the documented precedence."""

from __future__ import annotations

from dataclasses import replace

import pytest
from builders import (
    CLUSTER,
    WORKLOAD,
    at,
    ctx,
    evidence,
    interruption,
    node,
    not_ready,
    series,
    signal,
    steps,
)

from loopbreaker.diagnosis.engine import diagnose
from loopbreaker.model import (
    ContainerInfo,
    Diagnosis,
    Evidence,
    EvidenceKind,
    NodeCondition,
    NodeInfo,
    PodInfo,
    RemediationPath,
    Risk,
    RootCause,
    Series,
    SignalKind,
    SourceStatus,
    Termination,
    WorkloadKind,
)

GIB = 2**30
POD = f"{WORKLOAD}-slice-0-2-abcde"
POD_UID = "3f0c1e2a-9b8d-4c7e-a6f5-0123456789ab"
NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"
OTHER_NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-p4q9"
SERVING = "serving/ranker-7c9d6f5b8-xq2lp"
SERVING_UID = "9e8d7c6b-5a49-4382-a716-05f4e3d2c1b0"


def with_metrics(ev: Evidence, **kinds: tuple[Series, ...] | None) -> Evidence:
    """``ev`` plus the new kinds of metric evidence, marked available (from 'test')."""
    sources = dict(ev.sources)
    for name, value in kinds.items():
        sources[EvidenceKind(name)] = SourceStatus("test", value is not None)
    return replace(ev, sources=sources, **kinds)  # type: ignore[arg-type]


def pod(
    name: str = POD,
    *,
    containers: tuple[ContainerInfo, ...] = (),
    namespace: str = "default",
    workload: str | None = WORKLOAD,
    **fields: object,
) -> PodInfo:
    values: dict[str, object] = {
        "phase": "Running",
        "node": NODE,
        "workload": workload,
        "workload_kind": "jobset" if workload else None,
        "uid": POD_UID,
    }
    values.update(fields)
    return PodInfo(name, namespace, containers=containers, **values)  # type: ignore[arg-type]


def oom_container(
    minute: float = -5, *, reason: str = "OOMKilled", code: int = 137, limit: float = 64 * GIB
) -> ContainerInfo:
    return ContainerInfo(
        "trainer",
        image="us-docker.pkg.dev/p/train:1",
        memory_limit=limit,
        last_terminated=Termination(reason, code, at(minute)),
    )


def reason_series(metric: str, reason: str, changes: dict[float, float], **labels: str) -> Series:
    base = {"cluster": CLUSTER, "namespace": "default", "pod": POD, "uid": POD_UID}
    base.update(labels)
    return series(metric, {**base, "reason": reason}, steps(changes))


def working_set(peak: float, pod_name: str = POD) -> Series:
    labels = {"cluster": CLUSTER, "namespace": "default", "pod": pod_name, "container": "trainer"}
    return series(
        "container_memory_working_set_bytes",
        labels,
        [(m, peak if -8 <= m <= -5 else peak / 2) for m, _ in steps({})],
    )


def verdict(d: Diagnosis) -> tuple[RootCause, RemediationPath]:
    return d.root_cause, d.remediation.path


def messages(d: Diagnosis) -> str:
    return "\n".join(f.message for f in d.evidence)


# --- out_of_memory ---------------------------------------------------------------------


def test_an_oom_killed_container_in_the_pod_status_is_out_of_memory() -> None:
    ev = with_metrics(
        evidence(pods=(pod(containers=(oom_container(),)),)),
        memory=(working_set(63.9 * GIB),),
    )
    d = diagnose(ctx(), ev)
    assert verdict(d) == (RootCause.OUT_OF_MEMORY, RemediationPath.FIX_MEMORY)
    assert (d.remediation.risk, d.remediation.requires_approval) == (Risk.LOW, False)
    assert d.suspect_hosts == () and d.ticket_draft is None
    first = d.remediation.actions[0]
    # The container, its current limit and the peak seen, by name.
    assert "container trainer" in first and "limit 64Gi" in first and "63.9Gi" in first
    assert "JobSet default/llama3-70b-training" in first
    assert "lastState.terminated.reason OOMKilled" in messages(d)
    assert "No node action" in d.remediation.actions[-1]


def test_exit_code_137_alone_is_not_an_oom_kill() -> None:
    killed = oom_container(reason="Error", code=137)
    exited = signal(
        SignalKind.UNRECOGNIZED,
        -4,
        workload=WORKLOAD,
        excerpt="ExitedWithCode: Pod: default.x exited with code 137",
    )
    d = diagnose(ctx(), evidence(pods=(pod(containers=(killed,)),), signals=(exited,)))
    assert d.root_cause is RootCause.UNKNOWN
    assert any("No OOM kill" in f.message and not f.supports for f in d.evidence), messages(d)


def test_an_oom_kill_outside_the_window_does_not_count() -> None:
    d = diagnose(ctx(), evidence(pods=(pod(containers=(oom_container(-50),)),)))
    assert d.root_cause is RootCause.UNKNOWN


@pytest.mark.parametrize(
    "metric",
    [
        "kube_pod_container_status_last_terminated_reason",
        "kube_pod_container_status_terminated_reason",
    ],
)
def test_kube_state_metrics_reasons_that_turn_oomkilled_inside_the_window(metric: str) -> None:
    inside = reason_series(metric, "OOMKilled", {-90: 0, -6: 1}, container="trainer")
    d = diagnose(ctx(), with_metrics(evidence(), pod_reasons=(inside,)))
    assert d.root_cause is RootCause.OUT_OF_MEMORY
    assert metric in messages(d)
    # The same series, already 1 before the window began: an old termination.
    old = reason_series(metric, "OOMKilled", {-90: 1}, container="trainer")
    assert diagnose(ctx(), with_metrics(evidence(), pod_reasons=(old,))).root_cause is (
        RootCause.UNKNOWN
    )


def test_a_kernel_oom_kill_line_names_the_pod_by_its_memory_cgroup() -> None:
    line = signal(SignalKind.OOM_KILLED, -3, node=NODE, pod_uid=POD_UID, reason="oom-kill")
    ours = pod(containers=(ContainerInfo("trainer", memory_limit=72 * GIB),))
    d = diagnose(ctx(), evidence(pods=(ours,), signals=(line,)))
    assert d.root_cause is RootCause.OUT_OF_MEMORY
    assert "container trainer" in d.remediation.actions[0] and "72Gi" in d.remediation.actions[0]
    # A pod uid that is another workload's: the kill is not ours.
    theirs = replace(ours, name="other-job-0", workload="other-job")
    assert diagnose(ctx(), evidence(pods=(theirs,), signals=(line,))).root_cause is (
        RootCause.UNKNOWN
    )
    # A kernel line that names no pod at all says nothing about the workload.
    bare = replace(line, pod_uid=None)
    assert diagnose(ctx(), evidence(pods=(ours,), signals=(bare,))).root_cause is (
        RootCause.UNKNOWN
    )


def test_oom_evidence_of_another_cluster_or_namespace_is_scoped_out() -> None:
    elsewhere = signal(
        SignalKind.OOM_KILLED, -3, pod=POD, workload=WORKLOAD, cluster="tpu-cluster-stg"
    )
    assert diagnose(ctx(), evidence(signals=(elsewhere,))).root_cause is RootCause.UNKNOWN
    stg = reason_series(
        "kube_pod_container_status_terminated_reason",
        "OOMKilled",
        {-90: 0, -6: 1},
        cluster="tpu-cluster-stg",
    )
    assert diagnose(ctx(), with_metrics(evidence(), pod_reasons=(stg,))).root_cause is (
        RootCause.UNKNOWN
    )
    other_ns = pod(containers=(oom_container(),), namespace="research")
    assert diagnose(ctx(), evidence(pods=(other_ns,))).root_cause is RootCause.UNKNOWN


def test_the_audit_log_limit_stands_in_when_nothing_else_names_it() -> None:
    audited = signal(
        SignalKind.OOM_KILLED,
        -3,
        pod=POD,
        workload=WORKLOAD,
        container="trainer",
        excerpt="io.k8s.core.v1.pods.delete: container trainer (memory limit 160Gi) of pod "
        f"default/{POD} terminated: OOMKilled (exit code 137)",
    )
    d = diagnose(ctx(), evidence(signals=(audited,)))
    assert d.root_cause is RootCause.OUT_OF_MEMORY
    assert "limit 160Gi" in d.remediation.actions[0]


# --- priority_preemption ------------------------------------------------------------------


def preempted(minute: float = -6) -> object:
    return signal(
        SignalKind.PRIORITY_PREEMPTED,
        minute,
        pod=POD,
        namespace="default",
        node=NODE,
        related_pod=SERVING,
        related_uid=SERVING_UID,
        excerpt=f"Preempted: Preempted by pod {SERVING_UID} on node {NODE}",
    )


def test_a_preempted_pod_names_the_preemptor_and_both_priority_classes() -> None:
    ours = pod(priority_class="offline-low", priority=1000)
    preemptor = PodInfo(
        "ranker-7c9d6f5b8-xq2lp",
        "serving",
        "Running",
        NODE,
        uid=SERVING_UID,
        priority_class="online-critical",
        priority=100000,
    )
    d = diagnose(ctx(), evidence(pods=(ours, preemptor), signals=(preempted(),)))
    assert verdict(d) == (RootCause.PRIORITY_PREEMPTION, RemediationPath.PROTECT_PRIORITY)
    assert (d.remediation.risk, d.remediation.requires_approval) == (Risk.LOW, False)
    actions = "\n".join(d.remediation.actions)
    # The preemptor, in another namespace, is kept by the scope: its class is evidence.
    assert "PriorityClass offline-low" in actions and "PriorityClass online-critical" in actions
    assert "(priority 100000 > 1000)" in actions
    assert "ResourceQuota" in actions and "namespace serving" in actions
    assert "preemptionPolicy: Never" in actions
    assert f"on node {NODE}" in actions
    assert d.suspect_hosts == ()


def test_the_preemptors_priority_class_from_kube_pod_info() -> None:
    info = series(
        "kube_pod_info",
        {
            "cluster": CLUSTER,
            "namespace": "serving",
            "pod": "ranker-7c9d6f5b8-xq2lp",
            "uid": SERVING_UID,
            "priority_class": "online-critical",
        },
        steps({-90: 1}),
    )
    unrelated = series(
        "kube_pod_info",
        {"cluster": CLUSTER, "namespace": "batch", "pod": "x", "uid": "u", "priority_class": "y"},
        steps({-90: 1}),
    )
    ev = with_metrics(evidence(signals=(preempted(),)), pod_info=(info, unrelated))
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.PRIORITY_PREEMPTION
    assert "PriorityClass online-critical" in d.remediation.actions[0]
    # Without the Preempted Event naming it, the other namespace's pod is out of scope.
    quiet = with_metrics(evidence(), pod_info=(info,))
    assert diagnose(ctx(), quiet).root_cause is RootCause.UNKNOWN


def test_pods_left_pending_after_a_preemption_are_its_consequence_not_capacity() -> None:
    pending = signal(SignalKind.UNSCHEDULABLE, 2, pod=f"{WORKLOAD}-slice-0-2-fghij")
    d = diagnose(ctx(), evidence(signals=(preempted(-6), pending)))
    assert d.root_cause is RootCause.PRIORITY_PREEMPTION
    assert "pods left Pending followed the priority preemption" in messages(d)


def test_the_disruption_target_condition_alone_is_a_preemption() -> None:
    ours = pod(disruption_reason="PreemptionByScheduler", disruption_at=at(-4))
    assert diagnose(ctx(), evidence(pods=(ours,))).root_cause is RootCause.PRIORITY_PREEMPTION


# --- node_pressure_eviction ---------------------------------------------------------------


def evicted(minute: float = -7, resource: str = "memory", node_name: str = NODE) -> object:
    return signal(
        SignalKind.EVICTED,
        minute,
        pod=POD,
        namespace="default",
        node=node_name,
        excerpt=f"Evicted: The node was low on resource: {resource}. Threshold quantity: "
        "100Mi, available: 90712Ki.",
    )


def test_an_evicted_pod_and_its_nodes_pressure_give_node_pressure_eviction() -> None:
    pressure = signal(
        SignalKind.NODE_PRESSURE,
        -7.5,
        node=NODE,
        reason="EvictionThresholdMet",
        excerpt="EvictionThresholdMet: Attempting to reclaim memory",
    )
    d = diagnose(ctx(), evidence(signals=(evicted(), pressure)))
    assert verdict(d) == (RootCause.NODE_PRESSURE_EVICTION, RemediationPath.RELIEVE_NODE_PRESSURE)
    assert (d.remediation.risk, d.remediation.requires_approval, d.suspect_hosts) == (
        Risk.LOW,
        False,
        (),
    )
    actions = "\n".join(d.remediation.actions)
    assert NODE in actions and "low on memory" in actions
    assert "requests equal to limits" in actions
    assert "No cordon" in actions
    assert "Attempting to reclaim memory" in messages(d)


def test_disk_pressure_evictions_advise_ephemeral_storage() -> None:
    d = diagnose(ctx(), evidence(signals=(evicted(resource="ephemeral-storage"),)))
    assert d.root_cause is RootCause.NODE_PRESSURE_EVICTION
    assert "ephemeral-storage requests and limits" in d.remediation.actions[1]


def test_evicted_in_the_pod_status_or_kube_state_metrics() -> None:
    status = pod(
        phase="Failed",
        status_reason="Evicted",
        status_message="The node was low on resource: memory. ",
        disruption_reason="TerminationByKubelet",
        disruption_at=at(-3),
    )
    assert diagnose(ctx(), evidence(pods=(status,))).root_cause is (
        RootCause.NODE_PRESSURE_EVICTION
    )
    metric = reason_series("kube_pod_status_reason", "Evicted", {-90: 0, -3: 1})
    d = diagnose(ctx(), with_metrics(evidence(), pod_reasons=(metric,)))
    assert d.root_cause is RootCause.NODE_PRESSURE_EVICTION


def test_pressure_on_a_node_without_an_eviction_of_ours_decides_nothing() -> None:
    pressure = signal(SignalKind.NODE_PRESSURE, -7.5, node=NODE, reason="NodeHasDiskPressure")
    condition = NodeInfo(
        NODE,
        pressure=(NodeCondition("MemoryPressure", True, at(-9), "KubeletHasInsufficientMemory"),),
    )
    d = diagnose(ctx(), evidence(signals=(pressure,), nodes=(condition,)))
    assert d.root_cause is RootCause.UNKNOWN


def test_a_node_pool_incident_with_pressure_only_is_its_eviction() -> None:
    """An incident keyed on a node pool names no workload: its nodes' pressure decides."""
    pressure = signal(
        SignalKind.NODE_PRESSURE,
        -7.5,
        node=NODE,
        reason="NodeHasInsufficientMemory",
        excerpt=f"NodeHasInsufficientMemory: Node {NODE} status is now: NodeHasInsufficientMemory",
    )
    d = diagnose(ctx(workload=""), evidence(restarts=None, signals=(pressure,)))
    assert d.root_cause is RootCause.NODE_PRESSURE_EVICTION
    assert NODE in d.remediation.actions[0]


# --- image_pull ---------------------------------------------------------------------------


def waiting(reason: str = "ImagePullBackOff") -> PodInfo:
    image = "us-docker.pkg.dev/p/train:gone"
    return pod(
        phase="Pending",
        scheduled_at=at(-12),
        containers=(
            ContainerInfo(
                "trainer",
                image=image,
                waiting_reason=reason,
                waiting_message=f'Back-off pulling image "{image}"',
            ),
        ),
    )


def test_a_scheduled_pod_waiting_on_an_image_is_image_pull_never_capacity() -> None:
    pending = series(
        "kube_pod_status_phase",
        {"cluster": CLUSTER, "namespace": "default", "pod": POD, "phase": "Pending"},
        steps({-90: 0, -12: 1}),
    )
    d = diagnose(ctx(), evidence(pods=(waiting(),), pod_phases=(pending,)))
    assert verdict(d) == (RootCause.IMAGE_PULL, RemediationPath.FIX_IMAGE)
    assert (d.remediation.risk, d.remediation.requires_approval) == (Risk.LOW, False)
    assert "us-docker.pkg.dev/p/train:gone" in d.remediation.actions[0]
    # Pending for 12 minutes, but bound to its node: no capacity finding at all.
    assert not any(f.cause is RootCause.CAPACITY and f.supports for f in d.evidence)


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        ("NotFound", "does not exist in us-docker.pkg.dev"),
        ("403 Forbidden", "roles/artifactregistry.reader"),
        ("DeadlineExceeded", "Cloud NAT"),
    ],
)
def test_the_registrys_answer_chooses_the_advice(error: str, advice: str) -> None:
    image = "us-docker.pkg.dev/p/train:1"
    failed = signal(
        SignalKind.IMAGE_PULL_FAILED,
        -8,
        pod=POD,
        namespace="default",
        reason=error,
        excerpt=f'Failed: Failed to pull image "{image}": rpc error: code = Unknown desc = x',
    )
    d = diagnose(ctx(), evidence(signals=(failed,)))
    assert d.root_cause is RootCause.IMAGE_PULL
    assert f"{image}: {error}" in d.remediation.actions[0]
    assert advice in d.remediation.actions[1]


def test_image_pull_series_of_kube_state_metrics() -> None:
    metric = reason_series(
        "kube_pod_container_status_waiting_reason",
        "ImagePullBackOff",
        {-90: 0, -9: 1},
        container="trainer",
    )
    assert diagnose(ctx(), with_metrics(evidence(), pod_reasons=(metric,))).root_cause is (
        RootCause.IMAGE_PULL
    )


# --- precedence ------------------------------------------------------------------------------


def oom_signal(minute: float) -> object:
    return signal(SignalKind.OOM_KILLED, minute, pod=POD, workload=WORKLOAD, container="trainer")


@pytest.mark.parametrize(
    ("oom_at", "evict_at", "first"),
    [(-10, -4, RootCause.OUT_OF_MEMORY), (-4, -10, RootCause.NODE_PRESSURE_EVICTION)],
)
def test_among_the_four_the_first_failure_in_time_wins(
    oom_at: float, evict_at: float, first: RootCause
) -> None:
    d = diagnose(ctx(), evidence(signals=(oom_signal(oom_at), evicted(evict_at))))
    assert d.root_cause is first
    later = [f for f in d.evidence if "a consequence, not the cause" in f.message]
    assert len(later) == 1 and later[0].cause is not first and not later[0].supports


def test_an_oom_kill_then_the_coordinators_nccl_timeout_is_out_of_memory() -> None:
    nccl = signal(
        SignalKind.NCCL_TIMEOUT,
        0,
        workload=WORKLOAD,
        coordinator=True,
        pod=f"{WORKLOAD}-slice-0-0-abcde",
    )
    d = diagnose(ctx(), evidence(signals=(oom_signal(-10), nccl)))
    assert d.root_cause is RootCause.OUT_OF_MEMORY
    assert any(
        "NCCL / collective / worker-crash failure at 08:15:00Z followed the OOM kill" in f.message
        for f in d.evidence
    ), messages(d)
    # Alone, the same timeout is the application's.
    assert diagnose(ctx(), evidence(signals=(nccl,))).root_cause is RootCause.APPLICATION


def test_a_spot_preemption_wins_over_pods_that_show_preempted() -> None:
    ev = evidence(
        interruptions=(interruption("PreemptionEvent", {-90: 0, -7: 1}),),
        signals=(preempted(-6),),
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.SPOT_PREEMPTION
    assert any(
        "do not explain the loop: spot_preemption does" in f.message
        and f.cause is RootCause.PRIORITY_PREEMPTION
        and not f.supports
        for f in d.evidence
    )


def test_an_eviction_before_the_node_fails_twice_is_its_faulty_host() -> None:
    host = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
    ev = evidence(
        node_conditions=not_ready(NODE, [(-15, -11), (5, 9)]),
        nodes=(node(NODE, host), node(OTHER_NODE, "0f1e")),
        signals=(evicted(-25),),
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.FAULTY_HOST
    assert d.suspect_hosts[0].host == host
    assert "node-pressure eviction" in messages(d) and "faulty_host does" in messages(d)


def test_kubeflow_pods_are_the_jobs_own() -> None:
    chief = PodInfo(
        f"{WORKLOAD}-ps-1",
        "default",
        "Running",
        NODE,
        workload=WORKLOAD,
        workload_kind="tfjob",
        replica_type="ps",
        uid=POD_UID,
    )
    metric = series(
        "kube_pod_container_status_terminated_reason",
        {
            "cluster": CLUSTER,
            "namespace": "default",
            "pod": f"{WORKLOAD}-ps-1",
            "uid": "old-incarnation",
            "container": "tensorflow",
            "reason": "OOMKilled",
        },
        [(m, 1.0) for m in range(-8, -6)],
    )
    operator = series(
        "training_operator_jobs_restarted_total",
        {"cluster": CLUSTER, "job_namespace": "default", "framework": "tensorflow"},
        steps({-90: 0, -6: 1}),
    )
    ev = with_metrics(
        evidence(restarts=(operator,), pods=(chief,), signals=()), pod_reasons=(metric,)
    )
    d = diagnose(ctx(workload_kind=WorkloadKind.TFJOB), ev)
    assert d.root_cause is RootCause.OUT_OF_MEMORY
    assert "container tensorflow" in d.remediation.actions[0]
    assert "TFJob default/llama3-70b-training" in d.remediation.actions[0]


def test_the_chief_is_named_first() -> None:
    def replica(kind: str, uid: str) -> PodInfo:
        return PodInfo(
            f"{WORKLOAD}-{kind}-0",
            "default",
            "Running",
            NODE,
            workload=WORKLOAD,
            workload_kind="tfjob",
            replica_type=kind,
            coordinator=kind == "chief",
            uid=uid,
            containers=(oom_container(-4),),
        )

    pods = (replica("worker", "u-w"), replica("chief", "u-c"))
    d = diagnose(ctx(workload_kind=WorkloadKind.TFJOB), evidence(pods=pods, signals=()))
    assert d.root_cause is RootCause.OUT_OF_MEMORY
    finding = next(f.message for f in d.evidence if "was OOM-killed in" in f.message)
    assert f"2 pod(s) (the coordinator first) ({WORKLOAD}-chief-0, {WORKLOAD}-worker-0)" in finding
