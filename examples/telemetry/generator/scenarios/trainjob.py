"""The Kubeflow Trainer v2 TrainJob scenario, with its jobs.json and jobsets.json.

``jobs.json`` is ``kubectl get tfjobs,pytorchjobs,trainjobs -A -o json``, ``jobsets.json``
``kubectl get jobsets -A -o json``.

The objects follow kubeflow/trainer v2.1.0 and sigs.k8s.io/jobset v0.10.1 (the version its
go.mod pins):
- the TrainJob (``pkg/apis/trainer/v1alpha1/trainjob_types.go``): ``spec.runtimeRef``
  (``apiGroup``, ``kind``, ``name``), ``spec.trainer`` (``image``, ``numNodes``,
  ``resourcesPerNode``), ``status.conditions`` (``metav1.Condition``) and
  ``status.jobsStatus`` (``name``, ``ready``, ``succeeded``, ``failed``, ``active``,
  ``suspended``);
- its JobSet (``pkg/runtime/framework/plugins/jobset/jobset.go`` ``Build``): the TrainJob's
  name and namespace, a controller ownerReference to it; the ``torch-distributed``
  runtime's replicated job ``node`` with container ``node``
  (``manifests/base/runtimes/torch_distributed.yaml``);
- the failure (jobset ``pkg/controllers/failure_policy.go``): with
  ``restartsCountTowardsMax >= maxRestarts`` the RestartJobSet action fails the JobSet,
  reason ``ReachedMaxRestarts``, message ``jobset failed due to reaching max number of
  restarts (first failed job: <job>)``, a Warning Event of the same reason; the finished
  JobSet's active Jobs are deleted (``jobset_controller.go``); the trainer copies the
  condition to the TrainJob as ``Failed`` (``jobset.go`` ``Status``).
"""

from __future__ import annotations

import math

from ..builders.cluster import Context
from ..builders.deterministic import NS, fmt_ts, rand_int, rand_uuid
from ..builders.gpu import a3_jobset, a3_pool
from ..builders.jobsets import job_status, jobset_object
from ..builders.scenario import Scenario, declare
from ..builders.workload import jobset_event, jobset_restarting

FAULTY_HOST = "5d0e8c3b7a9f41e2b6c4d8a1f0e3b7c9"
#: a3_pool's hash comes from the cluster and pool; the description names the node.
FAULTY_NODE = "gke-a3-ft-usc1-a3-pool-fb43a2ee-t5n8"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
IMAGE = "us-central1-docker.pkg.dev/orbit-ml-prod/train/llama-ft:2026-11-10"
#: The JobSet fails when its second failure finds the one allowed restart used.
MAX_RESTARTS = 1


def trainjob_faulty_host(sc: Scenario, ctx: Context) -> None:
    nodes = a3_pool(sc, 4, suffixes=["c2k7", "t5n8", "m9w3", "p4x6"], host_ids={1: FAULTY_HOST})
    bad = nodes[1]
    assert bad.name == FAULTY_NODE, bad.name
    sc.suspect(bad, 2)
    spec = a3_jobset(ctx, IMAGE, "node", rjob="node")
    ep1, ep2 = -19.3, 6.2
    r1 = -17
    failed_m = 6.9  # the JobSet controller sees the Job fail and gives up
    gone = math.ceil(failed_m) + 1  # its active Jobs and their pods deleted
    sc.add_jobset(spec, 0, [r1])
    sc.host_failure(
        bad,
        ep1,
        [
            "BUG: unable to handle page fault for address: ffffb8a1c2d3e000",
            "#PF: supervisor read access in kernel mode",
            "Oops: 0000 [#1] PREEMPT SMP NOPTI",
        ],
    )
    sc.host_failure(
        bad,
        ep2,
        [
            "mce: [Hardware Error]: CPU 12: Machine Check Exception: 5 Bank 5: be00000000800400",
            "mce: [Hardware Error]: Run the above through 'mcelog --ascii'",
            "Kernel panic - not syncing: Fatal machine check",
        ],
    )
    sc.attempt(spec, 0, -500, r1, nodes, failed_at={1: math.ceil(ep1)})
    sc.waiting_attempt(spec, 1, 1, r1, gone, nodes, failed=math.ceil(ep2))
    jobset_restarting(sc, spec, r1, 1)
    failed_message = (
        "jobset failed due to reaching max number of restarts "
        f"(first failed job: {spec.job_name(0)})"
    )
    jobset_event(sc, spec, failed_m, "ReachedMaxRestarts", failed_message)
    sc.coordinator_stops(spec, ep1)
    sc.training_noise(spec, "maxtext")

    condition = {
        "lastTransitionTime": fmt_ts(ctx.at(failed_m, "failed", spec.name), 0),
        "message": failed_message,
        "reason": "ReachedMaxRestarts",
        "status": "True",
        "type": "Failed",
    }
    created = ctx.at(-500 - 1.2, "trainjob", spec.name)
    trainjob_uid = rand_uuid("trainjob", ctx.cluster, spec.name)
    ended = job_status(spec.rjob, active=0, failed=1, ready=0)
    trainjob = {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {
            "creationTimestamp": fmt_ts(created, 0),
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
        "status": {"conditions": [condition], "jobsStatus": [ended]},
    }
    owner = {
        "apiVersion": TRAINER_API,
        "blockOwnerDeletion": True,
        "controller": True,
        "kind": "TrainJob",
        "name": spec.name,
        "uid": trainjob_uid,
    }
    jobset = jobset_object(
        spec,
        ctx.namespace,
        uid=sc.jobset_uid(spec.name),
        created_ns=created,
        version_key=spec.name,
        failure_policy={"maxRestarts": MAX_RESTARTS, "restartStrategy": "Recreate"},
        status={
            "conditions": [condition],
            "replicatedJobsStatus": [ended],
            "restarts": 1,
            "restartsCountTowardsMax": 1,
            "terminalState": "Failed",
        },
        owner=owner,
    )
    assert ctx.at(failed_m, "x") > ctx.t_ns + 6 * 60 * NS
    sc.documents.update({"jobs.json": [trainjob], "jobsets.json": [jobset]})


scenario_trainjob_faulty_host = declare(
    trainjob_faulty_host,
    "trainjob-faulty-host",
    "Kubeflow Trainer v2 TrainJob llama-ft (runtime torch-distributed, 4 nodes of 8 x "
    "H100) runs as the JobSet llama-ft it owns; the runtime sets failurePolicy "
    f"maxRestarts {MAX_RESTARTS}. Node {FAULTY_NODE} on physical host {FAULTY_HOST} "
    "fails twice: at T-19m (kernel BUG, hostError, TerminationEvent, NodeNotReady, "
    "automaticRestart) and at T+6m (machine check, kernel panic, same chain). The "
    "first failure restarts the JobSet (kube_jobset_restarts 0 -> 1, Restarting "
    "event); the second finds the restart used: the JobSet fails with "
    "ReachedMaxRestarts, its Jobs are deleted, and the TrainJob copies the condition "
    "as Failed. The pods carry only the JobSet's labels: jobs.json (the TrainJob) and "
    "jobsets.json (the JobSet's ownerReference) say it is a TrainJob.",
    Context(
        "orbit-ml-prod",
        "us-central1",
        "us-central1-a",
        "a3-ft-usc1",
        "ml",
        "llama-ft",
        "2026-11-17T09:30:00Z",
        "trainjob",
    ),
    "faulty_host",
    "isolate_host",
)
