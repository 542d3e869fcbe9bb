"""The Kubeflow Trainer v2 TrainJob scenario, with ``jobs.json`` and ``jobsets.json``."""

from __future__ import annotations

import math

from ..builders.cluster import Context, JobSetSpec
from ..builders.deterministic import NS, fmt_ts, rand_int, rand_uuid
from ..builders.gpu import a3_pool
from ..builders.scenario import Scenario
from ..builders.templates import GPU_TOLERATION, expect
from ..builders.workload import jobset_event

SLUG = "trainjob-faulty-host"


FAULTY_HOST = "5d0e8c3b7a9f41e2b6c4d8a1f0e3b7c9"


TRAINER_API = "trainer.kubeflow.org/v1alpha1"


JOBSET_API = "jobset.x-k8s.io/v1alpha2"


IMAGE = "us-central1-docker.pkg.dev/orbit-ml-prod/train/llama-ft:2026-11-10"


#: The JobSet fails when its second failure finds the one allowed restart used.
MAX_RESTARTS = 1


def scenario_trainjob_faulty_host() -> Scenario:
    """The scenario, with its jobs.json (the TrainJob) and jobsets.json (its JobSet)."""
    ctx = Context(
        "orbit-ml-prod",
        "us-central1",
        "us-central1-a",
        "a3-ft-usc1",
        "ml",
        "llama-ft",
        "2026-11-17T09:30:00Z",
        workload_kind="trainjob",
    )
    node_name = "gke-a3-ft-usc1-a3-pool-fb43a2ee-t5n8"
    sc = Scenario(
        SLUG,
        "Kubeflow Trainer v2 TrainJob llama-ft (runtime torch-distributed, 4 nodes of 8 x "
        "H100) runs as the JobSet llama-ft it owns; the runtime sets failurePolicy "
        f"maxRestarts {MAX_RESTARTS}. Node {node_name} on physical host {FAULTY_HOST} "
        "fails twice: at T-19m (kernel BUG, hostError, TerminationEvent, NodeNotReady, "
        "automaticRestart) and at T+6m (machine check, kernel panic, same chain). The "
        "first failure restarts the JobSet (kube_jobset_restarts 0 -> 1, Restarting "
        "event); the second finds the restart used: the JobSet fails with "
        "ReachedMaxRestarts, its Jobs are deleted, and the TrainJob copies the condition "
        "as Failed. The pods carry only the JobSet's labels: jobs.json (the TrainJob) and "
        "jobsets.json (the JobSet's ownerReference) say it is a TrainJob.",
        ctx,
        expect(
            "faulty_host",
            "isolate_host",
            [{"host": FAULTY_HOST, "nodes": [node_name], "failures": 2}],
        ),
    )
    nodes = a3_pool(
        sc,
        4,
        suffixes=["c2k7", "t5n8", "m9w3", "p4x6"],
        host_ids={1: FAULTY_HOST},
    )
    # a3_pool's hash comes from the cluster and pool; the description names the node.
    bad = nodes[1]
    assert bad.name == node_name, bad.name
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="node",
        replicas=1,
        parallelism=4,
        container="node",
        image=IMAGE,
        resources={"cpu": "200", "memory": "1700Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    ep1, ep2 = -19.3, 6.2
    r1 = -17
    failed_m = 6.9  # the JobSet controller sees the Job fail and gives up
    gone = math.ceil(failed_m) + 1  # its active Jobs and their pods deleted
    sc.add_jobset(spec, 0, [r1])
    sc.host_failure(
        bad,
        ep1,
        [
            ("kernel", "BUG: unable to handle page fault for address: ffffb8a1c2d3e000"),
            ("kernel", "#PF: supervisor read access in kernel mode"),
            ("kernel", "Oops: 0000 [#1] PREEMPT SMP NOPTI"),
        ],
    )
    back1 = max(bad.not_ready) + 1
    sc.host_failure(
        bad,
        ep2,
        [
            (
                "kernel",
                "mce: [Hardware Error]: CPU 12: Machine Check Exception: 5 Bank 5: "
                "be00000000800400",
            ),
            ("kernel", "mce: [Hardware Error]: Run the above through 'mcelog --ascii'"),
            ("kernel", "Kernel panic - not syncing: Fatal machine check"),
        ],
    )
    msg = (
        "0/4 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }, 3 Insufficient nvidia.com/gpu. preemption: "
        "0/4 nodes are available: 1 Preemption is not helpful for scheduling, 3 No "
        "preemption victims found for incoming pod."
    )
    sc.attempt(spec, 0, -500, r1, nodes, failed_at={1: math.ceil(ep1)})
    sc.attempt(
        spec,
        1,
        r1,
        gone,
        nodes,
        running_from={1: back1 + 1},
        failed_at={1: math.ceil(ep2)},
        unsched={1: (r1, back1)},
        sched_message=msg,
    )
    pod = sc.pod(spec, 1, 1)
    sc.event_pod(
        pod, r1 - 0.84, "FailedScheduling", msg, component="default-scheduler", etype="Warning"
    )
    sc.event_pod(
        pod,
        back1 - 0.2,
        "Scheduled",
        f"Successfully assigned {pod.namespace}/{pod.name} to {bad.name}",
        component="default-scheduler",
    )
    jobset_event(sc, spec, r1 - 0.55, "Restarting", "restarting jobset, attempt 1")
    failed_message = (
        "jobset failed due to reaching max number of restarts "
        f"(first failed job: {spec.job_name(0)})"
    )
    jobset_event(sc, spec, failed_m, "ReachedMaxRestarts", failed_message)
    coord = sc.coordinator_at(spec, ep1)
    if coord:
        sc.container_log(
            coord,
            ep1 + 1.1,
            "Terminating: job controller requested shutdown (SIGTERM)",
            key="sigterm",
        )
    sc.training_noise(spec, "maxtext")
    sc.kubelet_noise()

    failed_at = fmt_ts(ctx.at(failed_m, "failed", spec.name), 0)
    condition = {
        "lastTransitionTime": failed_at,
        "message": failed_message,
        "reason": "ReachedMaxRestarts",
        "status": "True",
        "type": "Failed",
    }
    created = fmt_ts(ctx.at(-500 - 1.2, "trainjob", spec.name), 0)
    trainjob_uid = rand_uuid("trainjob", ctx.cluster, spec.name)
    trainjob = {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {
            "creationTimestamp": created,
            "generation": 1,
            "name": spec.name,
            "namespace": ctx.namespace,
            "resourceVersion": str(rand_int(10**7, 10**8, "tjrv", spec.name)),
            "uid": trainjob_uid,
        },
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": "torch-distributed",
            },
            "trainer": {
                "image": IMAGE,
                "numNodes": spec.parallelism,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}},
            },
        },
        "status": {
            "conditions": [condition],
            "jobsStatus": [
                {
                    "active": 0,
                    "failed": 1,
                    "name": spec.rjob,
                    "ready": 0,
                    "succeeded": 0,
                    "suspended": 0,
                }
            ],
        },
    }
    jobset = {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            "creationTimestamp": created,
            "generation": 1,
            "name": spec.name,
            "namespace": ctx.namespace,
            "ownerReferences": [
                {
                    "apiVersion": TRAINER_API,
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "TrainJob",
                    "name": spec.name,
                    "uid": trainjob_uid,
                }
            ],
            "resourceVersion": str(rand_int(10**7, 10**8, "jsrv", spec.name)),
            "uid": sc.jobset_uid(spec.name),
        },
        "spec": {
            "failurePolicy": {"maxRestarts": MAX_RESTARTS, "restartStrategy": "Recreate"},
            "network": {
                "enableDNSHostnames": True,
                "publishNotReadyAddresses": True,
                "subdomain": spec.name,
            },
            "replicatedJobs": [{"name": spec.rjob, "replicas": spec.replicas}],
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "successPolicy": {"operator": "All"},
            "suspend": False,
        },
        "status": {
            "conditions": [condition],
            "replicatedJobsStatus": [
                {
                    "active": 0,
                    "failed": 1,
                    "name": spec.rjob,
                    "ready": 0,
                    "succeeded": 0,
                    "suspended": 0,
                }
            ],
            "restarts": 1,
            "restartsCountTowardsMax": 1,
            "terminalState": "Failed",
        },
    }
    assert ctx.at(failed_m, "x") > ctx.t_ns + 6 * 60 * NS
    sc.documents.update({"jobs.json": [trainjob], "jobsets.json": [jobset]})
    return sc
