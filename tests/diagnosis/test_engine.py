"""Each rule of the four-step workflow, on evidence built in a few lines."""

from __future__ import annotations

from datetime import timedelta

import pytest
from builders import (
    CLUSTER,
    WORKLOAD,
    at,
    ctx,
    evidence,
    interruption,
    looping,
    node,
    not_ready,
    restarts,
    series,
    signal,
    steps,
)

from loopbreaker.diagnosis.engine import diagnose
from loopbreaker.diagnosis.steps.common import Thresholds, increase
from loopbreaker.model import (
    Context,
    HostFailureRecord,
    PodInfo,
    RemediationPath,
    RootCause,
    Series,
    Signal,
    SignalKind,
    StepStatus,
    WorkloadKind,
)

HOST_A = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
HOST_B = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
NODE_1 = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"
NODE_2 = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-p4q9"
NODE_3 = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-z1z1"


def test_flat_restart_count_is_no_loop_and_skips_later_steps() -> None:
    ev = evidence(
        restarts=(restarts({-90: 4}),),
        interruptions=(interruption("PreemptionEvent", {-90: 0, -5: 3}),),
    )
    d = diagnose(ctx(), ev)
    assert d.restart_loop is False
    assert d.root_cause is RootCause.NO_RESTART_LOOP
    assert d.remediation.path is RemediationPath.NONE
    assert [s.status for s in d.steps] == [
        StepStatus.DONE,
        StepStatus.SKIPPED,
        StepStatus.SKIPPED,
        StepStatus.SKIPPED,
    ]
    assert all(not s.queries for s in d.steps[1:])
    assert d.restart_total == 4


def test_restarts_before_the_window_do_not_count() -> None:
    d = diagnose(ctx(), evidence(restarts=(restarts({-90: 1, -45: 2}),)))
    assert d.restart_loop is False


def test_increase_inside_the_window_is_a_loop() -> None:
    d = diagnose(ctx(), evidence(restarts=(restarts({-90: 1, 10: 2}),)))
    assert d.restart_loop is True
    assert d.restart_increase == 1
    assert d.root_cause is RootCause.UNKNOWN
    assert d.remediation.path is RemediationPath.INSPECT_APPLICATION


def test_restart_series_of_another_jobset_is_ignored() -> None:
    other = restarts({-90: 0, 0: 5}, jobset_name="other-job")
    d = diagnose(ctx(), evidence(restarts=(restarts({-90: 2}), other)))
    assert d.restart_loop is False


def test_gauge_reset_counts_as_restarts() -> None:
    s = restarts({-90: 7, -10: 0, 0: 2})
    assert increase(s, at(-30), at(30), from_zero=False) == 2


def test_missing_restart_metrics_continue_with_other_steps() -> None:
    ev = evidence(restarts=None, signals=(signal(SignalKind.PREEMPTION, -3, node=NODE_1),))
    d = diagnose(ctx(), ev)
    assert d.restart_loop is None
    # The logs stand in for what they can show; without the metric step 1 is partial.
    assert d.steps[0].status is StepStatus.PARTIAL
    assert d.root_cause is RootCause.SPOT_PREEMPTION
    assert d.partial
    assert any(m.startswith("restarts") for m in d.missing_evidence)


def test_preemption_metric_gives_spot_preemption_without_cordon() -> None:
    ev = evidence(interruptions=(interruption("PreemptionEvent", {-90: 0, -10: 2, 0: 3}),))
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.SPOT_PREEMPTION
    assert d.remediation.path is RemediationPath.AVOID_PREEMPTION
    assert d.remediation.requires_approval is False
    assert d.remediation.risk.value == "low"
    assert d.ticket_draft is None


def test_preemption_series_appearing_in_window_counts_from_zero() -> None:
    s = series(
        "kubernetes_io:node_pool_interruption_count",
        {
            "cluster_name": CLUSTER,
            "node_pool_name": "p",
            "interruption_type": "PreemptionEvent",
            "interruption_reason": "Eviction",
        },
        [(5, 1), (6, 1)],
    )
    d = diagnose(ctx(), evidence(interruptions=(s,)))
    assert d.root_cause is RootCause.SPOT_PREEMPTION


def test_preemptions_of_another_cluster_are_ignored() -> None:
    s = interruption("PreemptionEvent", {-90: 0, 0: 3})
    other = type(s)(s.metric, {**s.labels, "cluster_name": "elsewhere"}, s.samples)
    d = diagnose(ctx(), evidence(interruptions=(other,)))
    assert d.root_cause is RootCause.UNKNOWN


def test_preemption_log_signal_alone_is_enough() -> None:
    d = diagnose(ctx(), evidence(signals=(signal(SignalKind.PREEMPTION, -2, node=NODE_1),)))
    assert d.root_cause is RootCause.SPOT_PREEMPTION


def test_maintenance_gives_plan_maintenance() -> None:
    ev = evidence(
        interruptions=(
            interruption("MaintenanceEvent", {-90: 0, 3: 1}, reason="HW/SW Maintenance"),
        )
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.MAINTENANCE
    assert d.remediation.path is RemediationPath.PLAN_MAINTENANCE
    assert any("RestartJobSetAndIgnoreMaxRestarts" in a for a in d.remediation.actions)


def test_preemption_outranks_maintenance() -> None:
    ev = evidence(
        interruptions=(
            interruption("MaintenanceEvent", {-90: 0, 3: 1}),
            interruption("PreemptionEvent", {-90: 0, 4: 1}),
        )
    )
    assert diagnose(ctx(), ev).root_cause is RootCause.SPOT_PREEMPTION


def _episode_signals(node_name: str, minute: float) -> list:
    return [
        signal(SignalKind.NODE_NOT_READY, minute, node=node_name),
        signal(SignalKind.KERNEL_BUG, minute + 1, node=node_name),
        signal(SignalKind.TERMINATION, minute + 2, node=node_name, reason="Host Error"),
    ]


def test_two_failures_on_one_host_is_faulty_host_with_ticket() -> None:
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-20, -12), (5, 11)]),
        signals=_episode_signals(NODE_1, -20) + _episode_signals(NODE_1, 5),
        nodes=(node(NODE_1, HOST_A), node(NODE_2, HOST_B)),
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.FAULTY_HOST
    assert d.remediation.path is RemediationPath.ISOLATE_HOST
    assert d.remediation.requires_approval is True
    assert d.remediation.risk.value == "high"
    [suspect] = d.suspect_hosts
    assert (suspect.host, suspect.nodes, suspect.failures) == (HOST_A, (NODE_1,), 2)
    assert d.ticket_draft is not None
    assert d.ticket_draft.physical_host == HOST_A
    assert d.ticket_draft.zone == "us-east5-a"
    assert d.ticket_draft.excerpts


def test_one_episode_seen_three_ways_counts_once() -> None:
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-5, 3)]),
        signals=_episode_signals(NODE_1, -6),
        nodes=(node(NODE_1, HOST_A),),
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.HOST_ERROR
    assert d.remediation.path is RemediationPath.WATCH_HOST
    assert d.suspect_hosts[0].failures == 1
    assert d.remediation.requires_approval is False


def test_log_only_episode_merges_within_merge_window() -> None:
    sigs = [
        signal(SignalKind.HOST_ERROR, 0, node=NODE_1),
        signal(SignalKind.KERNEL_PANIC, 9, node=NODE_1),
    ]
    d = diagnose(ctx(), evidence(signals=sigs, nodes=(node(NODE_1, HOST_A),)))
    assert d.root_cause is RootCause.HOST_ERROR
    # A smaller merge window splits them into two failures.
    d2 = diagnose(
        ctx(),
        evidence(signals=sigs, nodes=(node(NODE_1, HOST_A),)),
        Thresholds(merge_window=timedelta(minutes=5)),
    )
    assert d2.root_cause is RootCause.FAULTY_HOST


def test_two_nodes_failing_on_the_same_host_are_two_failures() -> None:
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-10, -2)]) + not_ready(NODE_2, [(-9, -1)]),
        nodes=(node(NODE_1, HOST_A), node(NODE_2, HOST_A)),
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.FAULTY_HOST
    assert set(d.suspect_hosts[0].nodes) == {NODE_1, NODE_2}


def test_two_nodes_on_different_hosts_are_not_a_faulty_host() -> None:
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-10, -2)]) + not_ready(NODE_2, [(-9, -1)]),
        nodes=(node(NODE_1, HOST_A), node(NODE_2, HOST_B)),
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.HOST_ERROR
    assert {s.host for s in d.suspect_hosts} == {HOST_A, HOST_B}


def test_failing_again_after_recovery_is_a_second_failure() -> None:
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-10, -7), (-4, 0)]), nodes=(node(NODE_1, HOST_A),)
    )
    assert diagnose(ctx(), ev).root_cause is RootCause.FAULTY_HOST


def test_failures_outside_the_window_do_not_count() -> None:
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-60, -50), (5, 8)]),
        signals=_episode_signals(NODE_1, -60),
        nodes=(node(NODE_1, HOST_A),),
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.HOST_ERROR
    assert d.suspect_hosts[0].failures == 1


def test_node_name_stands_in_for_unknown_host() -> None:
    ev = evidence(node_conditions=not_ready(NODE_3, [(-10, -7), (-4, 0)]))
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.FAULTY_HOST
    assert d.suspect_hosts[0].host == NODE_3
    assert d.suspect_hosts[0].host_known is False


def test_host_history_from_earlier_incidents_counts() -> None:
    history = (HostFailureRecord(HOST_A, NODE_2, at(-24 * 60), "inc-yesterday"),)
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-5, 0)]),
        nodes=(node(NODE_1, HOST_A),),
        host_history=history,
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.FAULTY_HOST
    assert d.suspect_hosts[0].failures == 2
    assert set(d.suspect_hosts[0].nodes) == {NODE_1, NODE_2}


def test_failure_explained_by_preemption_is_not_counted_against_host() -> None:
    sigs = [signal(SignalKind.PREEMPTION, -10, node=NODE_1)] + _episode_signals(NODE_1, -9)
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-9, -3)]) + not_ready(NODE_1, [(-9, -3)]),
        signals=sigs,
        nodes=(node(NODE_1, HOST_A),),
    )
    d = diagnose(ctx(), ev)
    assert d.root_cause is RootCause.SPOT_PREEMPTION
    assert d.suspect_hosts == ()
    assert any("explained by a preemption" in f.message for f in d.evidence)


def test_faulty_host_outranks_capacity_and_application() -> None:
    ev = evidence(
        node_conditions=not_ready(NODE_1, [(-10, -7), (-4, 0)]),
        nodes=(node(NODE_1, HOST_A),),
        signals=(
            signal(SignalKind.UNSCHEDULABLE, 2, pod=f"{WORKLOAD}-slice-0-1-abcde"),
            signal(SignalKind.NCCL_TIMEOUT, 3, workload=WORKLOAD, coordinator=True),
        ),
    )
    assert diagnose(ctx(), ev).root_cause is RootCause.FAULTY_HOST


def test_unschedulable_pods_with_healthy_nodes_is_capacity() -> None:
    unsched = series(
        "kubernetes_io:pod_status_unschedulable",
        {
            "cluster_name": CLUSTER,
            "namespace_name": "default",
            "pod_name": f"{WORKLOAD}-slice-0-3-zzzzz",
        },
        steps({-90: 0, -8: 1}),
    )
    d = diagnose(ctx(), evidence(unschedulable=(unsched,)))
    assert d.root_cause is RootCause.CAPACITY
    assert d.remediation.path is RemediationPath.ADD_CAPACITY


def test_failed_scheduling_event_is_capacity() -> None:
    sig = signal(SignalKind.UNSCHEDULABLE, 1, pod=f"{WORKLOAD}-slice-0-3-zzzzz")
    assert diagnose(ctx(), evidence(signals=(sig,))).root_cause is RootCause.CAPACITY


def test_pod_not_scheduled_in_pods_json_is_capacity() -> None:
    pod = PodInfo(
        name=f"{WORKLOAD}-slice-0-0-aaaaa",
        workload=WORKLOAD,
        phase="Pending",
        unschedulable=True,
        message="0/8 nodes are available",
    )
    assert diagnose(ctx(), evidence(pods=(pod,))).root_cause is RootCause.CAPACITY


def _pending(minutes: tuple[float, float]) -> tuple:
    a, b = minutes
    return (
        series(
            "kube_pod_status_phase",
            {
                "cluster": CLUSTER,
                "namespace": "default",
                "pod": f"{WORKLOAD}-slice-0-0-aaaaa",
                "phase": "Pending",
            },
            [(m, 1.0 if a <= m < b else 0.0) for m, _ in steps({})],
        ),
    )


def test_long_pending_is_capacity_but_a_brief_restart_gap_is_not() -> None:
    assert diagnose(ctx(), evidence(pod_phases=_pending((-10, 5)))).root_cause is RootCause.CAPACITY
    assert diagnose(ctx(), evidence(pod_phases=_pending((-10, -8)))).root_cause is RootCause.UNKNOWN


def test_nccl_timeout_in_coordinator_is_application() -> None:
    sig = signal(
        SignalKind.NCCL_TIMEOUT,
        -2,
        workload=WORKLOAD,
        coordinator=True,
        pod=f"{WORKLOAD}-slice-0-0-abcde",
    )
    d = diagnose(ctx(), evidence(signals=(sig,)))
    assert d.root_cause is RootCause.APPLICATION
    assert d.remediation.path is RemediationPath.INSPECT_APPLICATION
    assert any("coordinator" in f.message for f in d.evidence)


def test_faults_only_in_other_workers_do_not_make_it_application() -> None:
    sig = signal(
        SignalKind.NCCL_TIMEOUT,
        -2,
        workload=WORKLOAD,
        coordinator=False,
        pod=f"{WORKLOAD}-slice-1-3-abcde",
    )
    d = diagnose(ctx(), evidence(signals=(sig,)))
    assert d.root_cause is RootCause.UNKNOWN


def test_faults_of_another_workload_are_ignored() -> None:
    sig = signal(SignalKind.NCCL_TIMEOUT, -2, workload="someone-else", coordinator=True)
    assert diagnose(ctx(), evidence(signals=(sig,))).root_cause is RootCause.UNKNOWN


def test_signals_outside_the_window_are_ignored() -> None:
    sig = signal(SignalKind.PREEMPTION, -45, node=NODE_1)
    assert diagnose(ctx(), evidence(signals=(sig,))).root_cause is RootCause.UNKNOWN


def test_kubeflow_restart_events_make_a_loop_without_metrics() -> None:
    sig = signal(SignalKind.JOB_RESTARTING, -1, workload=WORKLOAD, reason="PyTorchJobRestarting")
    d = diagnose(ctx(), evidence(restarts=None, signals=(sig,)))
    assert d.restart_loop is True


def test_every_cause_keeps_evidence_for_and_against() -> None:
    # A healthy node's Ready series: an absence is claimed only over evidence inside the window.
    d = diagnose(
        ctx(),
        evidence(
            interruptions=(interruption("PreemptionEvent", {-90: 0, 0: 1}),),
            node_conditions=not_ready(NODE_1, []),
        ),
    )
    against = {f.cause for f in d.evidence if not f.supports}
    assert RootCause.MAINTENANCE in against
    assert RootCause.HOST_ERROR in against
    assert RootCause.APPLICATION in against


@pytest.mark.parametrize("missing", ["interruptions", "node_conditions", "signals", "nodes"])
def test_unavailable_evidence_marks_diagnosis_partial(missing: str) -> None:
    d = diagnose(ctx(), evidence(**{missing: None}))
    assert d.partial
    assert d.root_cause is RootCause.UNKNOWN


def test_step_unavailable_when_all_its_sources_are() -> None:
    ev = evidence(interruptions=None, signals=None)
    d = diagnose(ctx(), ev)
    assert d.steps[1].status is StepStatus.UNAVAILABLE
    assert d.steps[1].queries  # the filled queries are still reported


def test_looping_fixture_is_a_loop() -> None:
    assert increase(looping(), at(-30), at(30), from_zero=False) == 2


def test_partly_read_evidence_is_listed_as_missing() -> None:
    from dataclasses import replace

    from loopbreaker.model import EvidenceKind, SourceStatus

    ev = evidence()
    sources = dict(ev.sources)
    sources[EvidenceKind.LOGS] = SourceStatus("cloud-logging", True, "partial: entry cap reached")
    d = diagnose(ctx(), replace(ev, sources=sources))
    assert d.partial
    assert any(m.startswith("logs: partial") for m in d.missing_evidence)


# --- Kubeflow training operator -----------------------------------------------------


def operator_restarts(changes: dict[float, float], **labels: str) -> Series:
    base = {"cluster": CLUSTER, "job_namespace": "default", "framework": "tensorflow"}
    base.update(labels)
    return series("training_operator_jobs_restarted_total", base, steps(changes))


def tf_ctx(**overrides: object) -> Context:
    return ctx(workload_kind=WorkloadKind.TFJOB, **overrides)


def restarting(minute: float, job: str = WORKLOAD, kind: str = "TFJob") -> Signal:
    return signal(
        SignalKind.JOB_RESTARTING,
        minute,
        workload=job,
        namespace="default",
        workload_kind=WorkloadKind.from_api_kind(kind).value,  # type: ignore[union-attr]
        reason=f"{kind}Restarting",
    )


def test_kubeflow_counter_rise_with_the_jobs_own_events_is_a_loop() -> None:
    ev = evidence(
        restarts=(operator_restarts({-90: 2, -10: 3, 10: 4}),),
        signals=(restarting(-10), restarting(-10 + 0.5), restarting(10)),
    )
    d = diagnose(tf_ctx(), ev)
    assert d.restart_loop is True
    # The Event and the condition of one restart, 30 s apart, are one restart.
    assert d.restart_increase == 2
    assert d.restart_total == 4
    assert d.steps[0].queries[0].text.startswith("training_operator_jobs_restarted_total{")


def test_kubeflow_counter_rise_owned_by_another_job_is_no_loop() -> None:
    ev = evidence(
        restarts=(operator_restarts({-90: 2, 10: 3}),),
        signals=(restarting(10, job="resnet-other"),),
    )
    d = diagnose(tf_ctx(), ev)
    assert d.restart_loop is False
    assert d.root_cause is RootCause.NO_RESTART_LOOP
    assert "resnet-other" in d.evidence[-1].message


def test_kubeflow_counter_rise_without_events_is_attributed_to_the_job() -> None:
    d = diagnose(tf_ctx(), evidence(restarts=(operator_restarts({-90: 2, 10: 3}),), signals=()))
    assert d.restart_loop is True and d.restart_increase == 1
    assert any("Attributed" in f.message for f in d.evidence)


def test_kubeflow_counter_of_another_framework_or_namespace_is_ignored() -> None:
    ev = evidence(
        restarts=(
            operator_restarts({-90: 0, 0: 4}, framework="pytorch"),
            operator_restarts({-90: 0, 0: 4}, job_namespace="research"),
            operator_restarts({-90: 6}),
        ),
        signals=(),
    )
    d = diagnose(tf_ctx(), ev)
    assert d.restart_loop is False and d.restart_total == 6
    # The same series, diagnosed as a PyTorchJob, is a loop.
    py = diagnose(ctx(workload_kind=WorkloadKind.PYTORCHJOB), ev)
    assert py.restart_loop is True


def test_a_counter_that_appears_inside_the_window_counts_from_zero() -> None:
    s = series(
        "training_operator_jobs_restarted_total",
        {"cluster": CLUSTER, "job_namespace": "default", "framework": "tensorflow"},
        [(m, 1.0) for m in range(-5, 30)],
    )
    d = diagnose(tf_ctx(), evidence(restarts=(s,), signals=()))
    assert d.restart_loop is True and d.restart_increase == 1


def test_jobset_series_do_not_count_for_a_tfjob_and_vice_versa() -> None:
    ev = evidence(restarts=(looping(),), signals=())
    assert diagnose(tf_ctx(), ev).restart_loop is not True
    ev = evidence(restarts=(operator_restarts({-90: 0, 0: 3}),), signals=())
    assert diagnose(ctx(), ev).restart_loop is not True


def nccl(pod: str, replica: str, index: str, coordinator: bool) -> Signal:
    return signal(
        SignalKind.NCCL_TIMEOUT,
        2,
        pod=pod,
        workload=WORKLOAD,
        namespace="default",
        replica_type=replica,
        coordinator=coordinator,
    )


def test_worker_0_is_not_the_coordinator_when_the_job_has_a_chief() -> None:
    pods = (
        PodInfo(
            f"{WORKLOAD}-chief-0", "default", "Running", workload=WORKLOAD, replica_type="chief"
        ),
        PodInfo(
            f"{WORKLOAD}-worker-0", "default", "Running", workload=WORKLOAD, replica_type="worker"
        ),
    )
    worker0 = nccl(f"{WORKLOAD}-worker-0", "worker", "0", True)
    ev = evidence(restarts=(operator_restarts({-90: 0, 0: 1}),), signals=(worker0,), pods=pods)
    d = diagnose(tf_ctx(), ev)
    # Only another worker's fault line: the coordinator (the Chief) logged nothing.
    assert d.root_cause is RootCause.UNKNOWN
    # Without a Chief, Worker 0 coordinates, and its NCCL timeout is the application's.
    ev = evidence(restarts=(operator_restarts({-90: 0, 0: 1}),), signals=(worker0,), pods=pods[1:])
    d = diagnose(tf_ctx(), ev)
    assert d.root_cause is RootCause.APPLICATION
    assert "Chief or Master" in next(f.message for f in d.evidence if "coordinator" in f.message)
