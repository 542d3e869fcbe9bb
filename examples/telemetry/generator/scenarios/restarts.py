"""JobSet restart-counting scenarios (issue 28): restarts ``kube_jobset_restarts`` misses.

Each comes with ``jobsets.json`` (``kubectl get jobsets -A -o json``, snapshot at T+35m):

- ``jobset-restartjob-gauge-flat``: a JobSet (v0.12, feature gate RestartJob) whose
  failure policy restarts one Job (``RestartJob``): ``status.restarts`` and so the gauge
  stay 0; the Events, ``jobRestarts`` and the pods' ``job-restart-attempt`` label count.
- ``jobset-recreated-after-ttl``: a JobSet that reached ``maxRestarts``, was deleted by its
  TTL and recreated under the same name (a new uid, the gauge back to 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..builders.cluster import (
    FIRST_MINUTE,
    LAST_MINUTE,
    Context,
    JobSetSpec,
    Node,
    Pod,
    lifecycle,
    spans,
)
from ..builders.deterministic import K8S_ALPHABET, rand_float, rand_int, rand_str, rand_uuid
from ..builders.gpu import a3_pool
from ..builders.jobsets import job_status, jobset_object
from ..builders.metrics import add_memory, steady
from ..builders.pytorch import nccl_failure_lines
from ..builders.scenario import Scenario, declare
from ..builders.templates import gpu_jobset
from ..builders.workload import jobset_event, oom_killed

#: kubernetes-sigs/jobset v0.12.0 pkg/constants/constants.go.
JOB_RESTART_ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"
RESTART_JOB = ("RestartJobFailurePolicyAction", "applying RestartJob failure policy action")
RESTART_JOBSET = (
    "RestartJobSetFailurePolicyAction",
    "applying RestartJobSet failure policy action",
)
MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")


@dataclass(kw_only=True)
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
    """A scenario with a hand-drawn ``kube_jobset_restarts`` of the workload (it may fall:
    a new JobSet); ``gauge(minute)`` is None while no JobSet exists."""

    gauge: Callable[[int], int | None] = staticmethod(lambda m: 0)

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

    def controller_event(
        self, spec: JobSetSpec, m: float, event: tuple[str, str], job: int
    ) -> None:
        """A JobSet controller Event (reason, message) that names the first failed Job."""
        reason, message = event
        jobset_event(self, spec, m, reason, f"{message} (first failed job: {spec.job_name(job)})")


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
    key = (sc.ctx.cluster, spec.name, gen, attempt, job_attempt, j, p)
    name = f"{spec.job_name(j)}-{p}-{rand_str(K8S_ALPHABET, 5, *key)}"
    phases = lifecycle(start_m, start_m + 1, failed_m)
    more = {"gen_uid": gen, "job_attempt": job_attempt}
    pod = sc.jobset_pod(spec, j, p, attempt, name, node, start_m, end_m, phases, GenPod, **more)
    if FIRST_MINUTE <= start_m <= LAST_MINUTE:
        sc.scheduled(pod, start_m - 0.85 + 0.01 * j)
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


def restartjob_gauge_flat(sc: RestartsScenario, ctx: Context) -> None:
    restarts_at = [-70, -15, 8]  # RestartJob of job 2; -70 is before the window
    fails = [m - 1.4 for m in restarts_at]
    image = "us-east5-docker.pkg.dev/orbit-ml-prod/llm/olmo-trainer:2026.06.10"
    h200 = ("nvidia-h200-141gb", 224, 2964884540)
    jobs = {"replicas": 4, "parallelism": 1}
    spec = gpu_jobset(ctx.workload, "trainer", image, h200[0], cpu="200", memory="1400Gi", **jobs)
    uid = sc.jobset_uid(ctx.workload)
    restarted = [0, 0, 3, 0]
    status = job_status(
        spec.rjob,
        active=4,
        failed=0,
        ready=4,
        jobRestarts=restarted,
        jobRestartsCountTowardsMax=restarted,
    )
    rule = {"action": "RestartJob", "name": "restart-failed-job", "onJobFailureReasons": []}
    sc.documents["jobsets.json"] = [
        jobset_object(
            spec,
            ctx.namespace,
            uid=uid,
            created_ns=ctx.at(-400, "jobset", uid),
            version_key=uid,
            failure_policy={"maxRestarts": 10, "rules": [rule]},
            status={"conditions": [], "replicatedJobsStatus": [status], "restarts": 0},
        )
    ]
    nodes = sc.gpu_pool("a3u-pool", "a3-ultragpu-8g", 4, *h200)
    sc.add_jobset(spec, 0, [])
    at = {"start_m": -400, "end_m": None, "attempt": 0, "gen": uid, "job_attempt": 0}
    for j in (0, 1, 3):
        pod = make_pod(sc, spec, j, 0, node=nodes[j], **at)  # type: ignore[arg-type]
        step_lines(sc, pod, -399, LAST_MINUTE + 1, every=4 + j)
    for k, start, end in spans([-400, *restarts_at]):
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
        oom_killed(sc, pod, fails[k], start + 0.7, deleted_m=end - 0.5)
        sc.controller_event(spec, end - 0.55, RESTART_JOB, 2)
    for pod in sc.pods:
        if pod.j != 2 and isinstance(pod, Pod):
            add_memory(sc, pod, steady(pod, 0.5, 0.03))


def recreated_after_ttl(sc: RestartsScenario, ctx: Context) -> None:
    image = "europe-west4-docker.pkg.dev/nimbus-ai-prod/ft/sft:2026.09.20"
    pair = {"rjob": "node", "parallelism": 2, "coordinator_label": True}
    spec = gpu_jobset(ctx.workload, "pytorch", image, "nvidia-h100-80gb", **pair)
    # The first JobSet's uid is the one the scenario's Events name (Scenario.jobset_uid).
    old = sc.jobset_uid(ctx.workload)
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

    sc.gauge = gauge
    status = job_status(spec.rjob, active=1, failed=0, ready=1)
    sc.documents["jobsets.json"] = [
        jobset_object(
            spec,
            ctx.namespace,
            uid=new,
            created_ns=ctx.at(recreated_m - 0.2, "jobset", new),
            version_key=new,
            failure_policy={"maxRestarts": 1, "restartStrategy": "Recreate"},
            status={"conditions": [], "replicatedJobsStatus": [status], "restarts": 0},
            ttl=90,
        )
    ]
    nodes = a3_pool(sc, 2, "h100-pool", hosts=False)
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
            add_memory(sc, pod, steady(pod, 0.5, 0.03))
            if failed is None or p:
                continue
            seq = 61000 + 97 * attempt
            sc.stderr_lines(pod, failed - 0.6, nccl_failure_lines(ctx, pod, failed - 0.6, seq))
    sc.controller_event(spec, restart_m - 0.55, RESTART_JOBSET, 0)
    sc.controller_event(spec, fail_m + 0.3, MAX_RESTARTS, 0)


scenario_restartjob_gauge_flat = declare(
    restartjob_gauge_flat,
    "jobset-restartjob-gauge-flat",
    "A3 Ultra (H200) JobSet of 4 Jobs x 1 pod on JobSet v0.12 with the RestartJob "
    "feature gate; its failure policy recreates only the failed Job (action RestartJob). "
    "The data loader of Job 2 leaks host memory and the kernel OOM-kills its container "
    "at T-71.4m, T-16.4m and T+6.6m (oom-kill line, the kubelet's OOMKilled status "
    "patch); each time the controller records RestartJobFailurePolicyAction on the "
    "JobSet and recreates Job 2 with job-restart-attempt 1, 2, 3. status.restarts, and "
    "so kube_jobset_restarts, stays 0 all along; jobsets.json shows jobRestarts "
    "[0, 0, 3, 0]. Jobs 0, 1 and 3 keep running; nodes are healthy.",
    Context(
        "orbit-ml-prod",
        "us-east5",
        "us-east5-a",
        "a3u-train-use5",
        "pretrain",
        "olmo-13b-pretrain",
        "2026-06-17T14:20:00Z",
    ),
    "out_of_memory",
    "fix_memory",
    kind=RestartsScenario,
)


scenario_recreated_after_ttl = declare(
    recreated_after_ttl,
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
    Context(
        "nimbus-ai-prod",
        "europe-west4",
        "europe-west4-b",
        "h100-ft-euw4",
        "finetune",
        "qwen3-32b-sft",
        "2026-09-24T05:40:00Z",
    ),
    "application",
    "inspect_application",
    kind=RestartsScenario,
)
