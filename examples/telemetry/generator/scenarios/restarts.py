"""JobSet restart-counting scenarios (issue 28): restarts the ``kube_jobset_restarts`` gauge does
not show, with ``jobsets.json``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context, JobSetSpec, Node, Pod
from ..builders.deterministic import K8S_ALPHABET, fmt_ts, rand_float, rand_int, rand_str, rand_uuid
from ..builders.metrics import add_memory, add_reason, since
from ..builders.pods import failed_status
from ..builders.pytorch import nccl_failure_lines
from ..builders.scenario import Scenario
from ..builders.templates import GPU_TAINT, GPU_TOLERATION, expect, gpu_capacity, gpu_labels
from ..builders.workload import audit_gc_delete, audit_oom_patch, jobset_event, kernel_oom

#: kubernetes-sigs/jobset v0.12.0 pkg/constants/constants.go.
JOB_RESTART_ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"


RESTART_JOB_REASON = "RestartJobFailurePolicyAction"


RESTART_JOB_MESSAGE = "applying RestartJob failure policy action"


RESTART_JOBSET_REASON = "RestartJobSetFailurePolicyAction"


RESTART_JOBSET_MESSAGE = "applying RestartJobSet failure policy action"


MAX_RESTARTS_REASON = "ReachedMaxRestarts"


MAX_RESTARTS_MESSAGE = "jobset failed due to reaching max number of restarts"


@dataclass
class GenPod(Pod):
    """A JobSet pod of one JobSet uid (a recreated JobSet has another), with the per-Job
    ``job-restart-attempt`` label when the RestartJob feature gate is on."""

    gen_uid: str | None = None
    job_attempt: int | None = None

    def labels(self, jobset_uid: str) -> dict[str, str]:
        out = super().labels(self.gen_uid or jobset_uid)
        if self.job_attempt is not None:
            out[JOB_RESTART_ATTEMPT] = str(self.job_attempt)
        return out


class RestartsScenario(Scenario):
    """A scenario with a hand-drawn ``kube_jobset_restarts`` (it may fall: a new JobSet)
    and a ``jobsets.json``."""

    def __init__(self, *args: Any, gauge: Callable[[int], int | None], jobset: dict[str, Any]):
        super().__init__(*args)
        self.gauge = gauge
        self.documents["jobsets.json"] = [jobset]

    def metrics_text(self) -> str:
        text = super().metrics_text()
        pattern = re.compile(
            r'^kube_jobset_restarts\{(?P<labels>[^}]*jobset_name="'
            + re.escape(self.ctx.workload)
            + r'"[^}]*)\} \S+ (?P<ts>\d+)$'
        )
        out = []
        for line in text.splitlines():
            match = pattern.match(line)
            if match:
                minute = (int(match["ts"]) - self.ctx.t_ns // 1_000_000_000) // 60
                value = self.gauge(minute)
                if value is None:
                    continue  # the JobSet did not exist: kube-state-metrics exports nothing
                line = f"kube_jobset_restarts{{{match['labels']}}} {value} {match['ts']}"
            out.append(line)
        return "\n".join(out) + "\n"


def make_pod(
    sc: Scenario,
    spec: JobSetSpec,
    j: int,
    p: int,
    *,
    node: Node,
    start_m: int,
    end_m: int | None,
    attempt: int,
    gen: str,
    job_attempt: int | None = None,
    failed_m: int | None = None,
) -> GenPod:
    """One pod of Job ``j`` of one JobSet uid (``gen``), Running a minute after creation."""
    name = (
        f"{spec.job_name(j)}-{p}-"
        f"{rand_str(K8S_ALPHABET, 5, sc.ctx.cluster, spec.name, gen, attempt, job_attempt, j, p)}"
    )
    phases = [(start_m, "Pending"), (start_m + 1, "Running")]
    if failed_m is not None:
        phases.append((failed_m, "Failed"))
    pod = GenPod(
        spec=spec,
        namespace=sc.ctx.namespace,
        j=j,
        p=p,
        attempt=attempt,
        name=name,
        node=node,
        start_m=start_m,
        created_ns=sc.ctx.at(start_m - 0.9, "created", name),
        phases=phases,
        end_m=end_m,
        ip=f"10.{rand_int(64, 120, 'pods', sc.ctx.cluster)}."
        f"{rand_int(2, 250, 'pip', name)}.{rand_int(2, 250, 'pip2', name)}",
        gen_uid=gen,
        job_attempt=job_attempt,
    )
    sc.pods.append(pod)
    if FIRST_MINUTE <= start_m <= LAST_MINUTE:
        sc.event_pod(
            pod,
            start_m - 0.85 + 0.01 * j,
            "Scheduled",
            f"Successfully assigned {pod.namespace}/{pod.name} to {node.name}",
            component="default-scheduler",
        )
    return pod


def step_lines(sc: Scenario, pod: Pod, first: int, last: int, every: int = 3) -> None:
    """Ordinary training lines of a worker: its log entries carry its pod labels."""
    for m in range(max(first, FIRST_MINUTE), min(last, LAST_MINUTE + 1)):
        if (m - first) % every:
            continue
        loss = 2.1 + rand_float(-0.2, 0.2, "loss", pod.name, m)
        sc.container_log(
            pod,
            m + 0.4,
            f"[rank{pod.j}] step {1200 + 9 * (m - FIRST_MINUTE)} | loss {loss:.4f} | "
            f"tokens/s {rand_int(41000, 43500, 'tps', pod.name, m)}",
            key=("step", m),
        )


def jobset_object(
    sc: Scenario,
    spec: JobSetSpec,
    *,
    uid: str,
    created_m: float,
    status: dict[str, Any],
    failure_policy: dict[str, Any],
    ttl: int | None = None,
) -> dict[str, Any]:
    """A JobSet as ``kubectl get jobsets -o json`` prints it (jobset_types.go v0.12.0)."""
    template = {
        "spec": {
            "backoffLimit": 0,
            "completionMode": "Indexed",
            "completions": spec.parallelism,
            "parallelism": spec.parallelism,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "image": spec.image,
                            "name": spec.container,
                            "resources": {"limits": dict(spec.resources)},
                        }
                    ],
                    "nodeSelector": dict(spec.node_selector),
                    "restartPolicy": "Never",
                    "tolerations": list(spec.tolerations),
                }
            },
        }
    }
    js_spec: dict[str, Any] = {
        "failurePolicy": failure_policy,
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": [{"name": spec.rjob, "replicas": spec.replicas, "template": template}],
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "successPolicy": {"operator": "All"},
        "suspend": False,
    }
    if ttl is not None:
        js_spec["ttlSecondsAfterFinished"] = ttl
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "creationTimestamp": fmt_ts(sc.ctx.at(created_m, "jobset", uid), 0),
            "generation": 1,
            "name": spec.name,
            "namespace": sc.ctx.namespace,
            "resourceVersion": str(rand_int(10**7, 10**8, "jsrv", uid)),
            "uid": uid,
        },
        "spec": js_spec,
        "status": status,
    }


def scenario_restartjob_gauge_flat() -> RestartsScenario:
    ctx = Context(
        "orbit-ml-prod",
        "us-east5",
        "us-east5-a",
        "a3u-train-use5",
        "pretrain",
        "olmo-13b-pretrain",
        "2026-06-17T14:20:00Z",
    )
    restarts_at = [-70, -15, 8]  # RestartJob of job 2; -70 is before the window
    fails = [m - 1.4 for m in restarts_at]
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=4,
        parallelism=1,
        container="trainer",
        image="us-east5-docker.pkg.dev/orbit-ml-prod/llm/olmo-trainer:2026.06.10",
        resources={"cpu": "200", "memory": "1400Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"},
        tolerations=GPU_TOLERATION,
    )
    uid = rand_uuid("jobset", ctx.cluster, ctx.workload)
    policy = {
        "maxRestarts": 10,
        "rules": [
            {"action": "RestartJob", "name": "restart-failed-job", "onJobFailureReasons": []}
        ],
    }
    status = {
        "conditions": [],
        "replicatedJobsStatus": [
            {
                "active": 4,
                "failed": 0,
                "jobRestarts": [0, 0, 3, 0],
                "jobRestartsCountTowardsMax": [0, 0, 3, 0],
                "name": spec.rjob,
                "ready": 4,
                "succeeded": 0,
                "suspended": 0,
            }
        ],
        "restarts": 0,
    }
    sc = RestartsScenario(
        "jobset-restartjob-gauge-flat",
        "A3 Ultra (H200) JobSet of 4 Jobs x 1 pod on JobSet v0.12 with the RestartJob "
        "feature gate; its failure policy recreates only the failed Job (action RestartJob). "
        "The data loader of Job 2 leaks host memory and the kernel OOM-kills its container "
        "at T-71.4m, T-16.4m and T+6.6m (oom-kill line, the kubelet's OOMKilled status "
        "patch); each time the controller records RestartJobFailurePolicyAction on the "
        "JobSet and recreates Job 2 with job-restart-attempt 1, 2, 3. status.restarts, and "
        "so kube_jobset_restarts, stays 0 all along; jobsets.json shows jobRestarts "
        "[0, 0, 3, 0]. Jobs 0, 1 and 3 keep running; nodes are healthy.",
        ctx,
        expect("out_of_memory", "fix_memory"),
        gauge=lambda m: 0,
        jobset=jobset_object(
            sc_stub(ctx), spec, uid=uid, created_m=-400, status=status, failure_policy=policy
        ),
    )
    nodes = sc.add_pool(
        "a3u-pool",
        "a3-ultragpu-8g",
        4,
        labels=gpu_labels("nvidia-h200-141gb"),
        capacity=gpu_capacity(224, 2964884540),
        taints=GPU_TAINT,
    )
    sc.add_jobset(spec, 0, [])
    for j in (0, 1, 3):
        pod = make_pod(
            sc,
            spec,
            j,
            0,
            node=nodes[j],
            start_m=-400,
            end_m=None,
            attempt=0,
            gen=uid,
            job_attempt=0,
        )
        step_lines(sc, pod, -399, LAST_MINUTE + 1, every=4 + j)
    starts = [-400, *restarts_at]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = math.ceil(fails[k]) if end is not None else None
        pod = make_pod(
            sc,
            spec,
            2,
            0,
            node=nodes[2],
            start_m=start,
            end_m=end,
            attempt=0,
            gen=uid,
            job_attempt=k,
            failed_m=failed,
        )
        step_lines(sc, pod, start + 1, (failed or LAST_MINUTE + 1) - 1)
        add_memory(
            sc,
            pod,
            lambda m, s=start, f=failed: 0.6 + 0.4 * min(1.0, (m - s) / max(1, (f or 999) - s)),
        )
        if end is None:
            continue
        m0 = fails[k]
        kernel_oom(sc, pod, m0)
        audit_oom_patch(sc, pod, m0 + 0.03, started_m=start + 0.7)
        jobset_event(
            sc,
            spec,
            end - 0.55,
            RESTART_JOB_REASON,
            f"{RESTART_JOB_MESSAGE} (first failed job: {spec.job_name(2)})",
        )
        status_obj = failed_status(sc, pod, m0, start + 0.7, reason="OOMKilled", code=137)
        audit_gc_delete(sc, pod, end - 0.5, status_obj)
        add_reason(
            sc,
            "kube_pod_container_status_terminated_reason",
            pod,
            "OOMKilled",
            since(math.ceil(m0)),
            container="trainer",
        )
    for pod in sc.pods:
        if pod.j != 2 and isinstance(pod, Pod):
            add_memory(sc, pod, lambda m, p=pod: 0.5 + rand_float(-0.03, 0.03, "m", p.name, m))
    sc.kubelet_noise()
    return sc


def scenario_recreated_after_ttl() -> RestartsScenario:
    ctx = Context(
        "nimbus-ai-prod",
        "europe-west4",
        "europe-west4-b",
        "h100-ft-euw4",
        "finetune",
        "qwen3-32b-sft",
        "2026-09-24T05:40:00Z",
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="node",
        replicas=1,
        parallelism=2,
        container="pytorch",
        image="europe-west4-docker.pkg.dev/nimbus-ai-prod/ft/sft:2026.09.20",
        resources={"nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
        coordinator_label=True,
    )
    # The first JobSet's uid is the one generate.py's Events name (Scenario.jobset_uid).
    old = rand_uuid("jobset", ctx.cluster, ctx.workload)
    new = rand_uuid("jobset", ctx.cluster, ctx.workload, "recreated")
    restart_m, fail_m, deleted_m, recreated_m = -58, -24, -22, -21

    def gauge(m: int) -> int | None:
        if m < restart_m:
            return 0
        if m < deleted_m:
            return 1  # the old JobSet's status.restarts
        if m < recreated_m:
            return None  # deleted by its TTL, not yet recreated
        return 0  # the new JobSet (another uid) starts from 0

    policy = {"maxRestarts": 1, "restartStrategy": "Recreate"}
    status = {
        "conditions": [],
        "replicatedJobsStatus": [
            {
                "active": 1,
                "failed": 0,
                "name": spec.rjob,
                "ready": 1,
                "succeeded": 0,
                "suspended": 0,
            }
        ],
        "restarts": 0,
    }
    sc = RestartsScenario(
        "jobset-recreated-after-ttl",
        "H100 JobSet of 1 Job x 2 pods with failurePolicy maxRestarts 1 and "
        "ttlSecondsAfterFinished 90, recreated under the same name whenever it ends (as "
        "Kubeflow Trainer does for a TrainJob). The first JobSet restarts once at T-58m "
        "(kube_jobset_restarts 0 -> 1, RestartJobSetFailurePolicyAction); at T-24m the "
        "all-reduce hangs again, the NCCL watchdog on the coordinator times out, and the "
        "JobSet fails (ReachedMaxRestarts). Its TTL deletes it at T-22m; at T-21m a new "
        "JobSet of the same name (a new uid) starts from 0: the gauge falls 1 -> 0 and stays "
        "flat. Pods and their logs carry the old and the new jobset-uid; jobsets.json holds "
        "the new JobSet, created inside the window. Nodes are healthy.",
        ctx,
        expect("application", "inspect_application"),
        gauge=gauge,
        jobset=jobset_object(
            sc_stub(ctx),
            spec,
            uid=new,
            created_m=recreated_m - 0.2,
            status=status,
            failure_policy=policy,
            ttl=90,
        ),
    )
    nodes = sc.add_pool(
        "h100-pool",
        "a3-highgpu-8g",
        2,
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    sc.add_jobset(spec, 0, [])
    generations = [
        (old, 0, -300, restart_m, restart_m - 1),
        (old, 1, restart_m, deleted_m, fail_m),
        (new, 0, recreated_m, None, None),
    ]
    for gen, attempt, start, end, failed in generations:
        for p in range(spec.parallelism):
            pod = make_pod(
                sc,
                spec,
                0,
                p,
                node=nodes[p],
                start_m=start,
                end_m=end,
                attempt=attempt,
                gen=gen,
                failed_m=failed,
            )
            step_lines(sc, pod, start + 1, (failed or LAST_MINUTE + 1) - 1, every=3 + p)
            add_memory(sc, pod, lambda m, n=pod.name: 0.5 + rand_float(-0.03, 0.03, "m", n, m))
            if failed is None or p:
                continue
            seq = 61000 + 97 * attempt
            for at, text in nccl_failure_lines(ctx, pod, failed - 0.6, seq):
                sc.container_log(pod, failed - 0.6, text, stderr=True, at_ns=at)
    jobset_event(
        sc,
        spec,
        restart_m - 0.55,
        RESTART_JOBSET_REASON,
        f"{RESTART_JOBSET_MESSAGE} (first failed job: {spec.job_name(0)})",
    )
    jobset_event(
        sc,
        spec,
        fail_m + 0.3,
        MAX_RESTARTS_REASON,
        f"{MAX_RESTARTS_MESSAGE} (first failed job: {spec.job_name(0)})",
    )
    sc.kubelet_noise()
    return sc


def sc_stub(ctx: Context) -> Scenario:
    """A bare scenario for building objects before the real one exists (same clock)."""
    return Scenario("stub", "", ctx, {})
