"""Image pull scenarios: a deleted tag (JobSet), a registry the nodes may not read (TFJob)."""

from __future__ import annotations

from ..builders.cluster import FIRST_MINUTE, LAST_MINUTE, Context, JobSetSpec, KubeflowSpec
from ..builders.deterministic import glog_prefix, py_stamp, rand_int
from ..builders.pods import waiting_on_image
from ..builders.scenario import Scenario
from ..builders.templates import GPU_TAINT, GPU_TOLERATION, expect, gpu_capacity, gpu_labels
from ..builders.workload import image_pull_events, image_waiting_series, jobset_event


def scenario_jobset_image_pull() -> Scenario:
    ctx = Context(
        project="saffron-genai",
        location="us-east5",
        zone="us-east5-a",
        cluster="h100-dev-use5",
        namespace="team-agents",
        workload="qwen-rlhf",
        issue_time="2026-03-02T12:45:00Z",
    )
    image = "us-east5-docker.pkg.dev/saffron-genai/train/rlhf-runner:2026.02.26-rc4"
    error = (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )
    sc = Scenario(
        "jobset-image-pull",
        "H100 JobSet (1 x 4 pods, imagePullPolicy IfNotPresent). The tag rlhf-runner:"
        "2026.02.26-rc4 was deleted by an Artifact Registry cleanup policy; three nodes "
        "still have it cached, the fourth (re-created by auto-repair the day before) does "
        "not. Worker 3 is scheduled there and waits on the pull (Failed to pull image: not "
        "found, ErrImagePull, ImagePullBackOff), Pending. torchrun's rendezvous on worker 0 "
        "times out after 15 minutes, the Job fails and the JobSet restarts (7 -> 10, at "
        "T-20m, T-4m, T+12m, T+28m); the new worker 3 lands on the same node. Pending for 15 "
        "minutes, yet scheduled: an image pull, not capacity.",
        ctx,
        expect("image_pull", "fix_image"),
    )
    nodes = sc.add_pool(
        "h100-pool",
        "a3-highgpu-8g",
        4,
        suffixes=["c8j2", "g4w7", "n6r1", "t2x9"],
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image=image,
        resources={"cpu": "96", "memory": "800Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    restarts = [-36, -20, -4, 12, 28]
    sc.add_jobset(spec, 6, restarts)
    starts = [-52, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        pods = sc.attempt(
            spec,
            5 + k,
            start,
            end,
            nodes,
            running_from={3: None},
            failed_at={0: end - 1} if end is not None else None,
        )
        pod = pods[3]
        if start >= FIRST_MINUTE:
            sc.event_pod(
                pod,
                start - 0.85,
                "Scheduled",
                f"Successfully assigned {pod.namespace}/{pod.name} to {nodes[3].name}",
                component="default-scheduler",
            )
        image_pull_events(
            sc, pod, start - 0.8, end if end is not None else LAST_MINUTE + 1, image, error
        )
        image_waiting_series(sc, pod, start, end if end is not None else LAST_MINUTE + 1)
        if end is None:
            sc.pod_hooks[pod.uid] = waiting_on_image(
                sc, pod, "ImagePullBackOff", f'Back-off pulling image "{image}"'
            )
        coord = pods[0]
        if end is not None and end >= FIRST_MINUTE:
            at = sc.ctx.at(end - 1.2, "rdzv", coord.name)
            sc.container_log(
                coord,
                end - 1.2,
                f"[{py_stamp(at)}] torch.distributed.elastic.rendezvous.api."
                "RendezvousTimeoutError: "
                "The node 'qwen-rlhf-workers-0-0' has failed to reach rendezvous: 3 of 4 nodes "
                "joined within 900 seconds.",
                stderr=True,
                at_ns=at,
            )
            jobset_event(sc, spec, end - 0.55, "Restarting", f"restarting jobset, attempt {6 + k}")
    sc.kubelet_noise()
    return sc


def scenario_tfjob_image_pull() -> Scenario:
    ctx = Context(
        project="fjord-speech",
        location="europe-west4",
        zone="europe-west4-b",
        cluster="speech-train-euw4",
        namespace="asr",
        workload="conformer-ps",
        issue_time="2026-11-02T09:30:00Z",
        workload_kind="tfjob",
    )
    image = "europe-west4-docker.pkg.dev/fjord-speech/private/conformer-worker:3.1.0"
    host = "europe-west4-docker.pkg.dev"
    error = (
        f'rpc error: code = Unknown desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": failed to authorize: failed to fetch oauth '
        f"token: unexpected status from GET request to https://{host}/v2/token?scope="
        "repository%3Afjord-speech%2Fprivate%2Fconformer-worker%3Apull&service="
        f"{host}: 403 Forbidden"
    )
    sc = Scenario(
        "tfjob-image-pull",
        "Kubeflow TFJob (Chief on CPU, 4 GPU Workers on a new L4 node pool, restartPolicy "
        "ExitCode). The worker image lives in a private Artifact Registry repository the new "
        "pool's node service account cannot read: every worker waits on the pull (403 "
        "Forbidden, ErrImagePull, ImagePullBackOff) and stays Pending, scheduled. The Chief "
        "waits for its workers under `timeout --preserve-status 900` and exits 143; the "
        "operator re-creates it (ExitedWithCode 143, TFJobRestarting; counter 2 -> 7, at "
        "T-43m, then T-27m, T-11m, T+5m and T+21m inside the window).",
        ctx,
        expect("image_pull", "fix_image"),
    )
    cpus = sc.add_pool("cpu-pool", "n2-standard-16", 1, capacity={"cpu": "16"})
    gpus = sc.add_pool(
        "l4-pool-v2",
        "g2-standard-24",
        4,
        labels=gpu_labels("nvidia-l4", 2),
        capacity=gpu_capacity(24, 98903572, 2),
        taints=GPU_TAINT,
    )
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "Worker": 4},
        image=image,
        resources={
            "Chief": {"cpu": "8", "memory": "24Gi"},
            "Worker": {"cpu": "20", "memory": "80Gi", "nvidia.com/gpu": "2"},
        },
        node_selector={
            "Chief": {"cloud.google.com/gke-nodepool": "cpu-pool"},
            "Worker": {"cloud.google.com/gke-nodepool": "l4-pool-v2"},
        },
        tolerations={"Worker": GPU_TOLERATION},
        command=["timeout", "--preserve-status", "900", "python3", "-m", "conformer.train"],
    )
    placement = {("Chief", 0): cpus[0]}
    placement.update({("Worker", i): gpus[i] for i in range(4)})
    workers = sc.kf_pods(
        spec,
        ctx.namespace,
        0,
        -60,
        None,
        placement,
        only=[("Worker", i) for i in range(4)],
        run_delay=10_000,
    )
    for i, pod in enumerate(workers):
        image_pull_events(sc, pod, -59.7 + 0.07 * i, LAST_MINUTE + 1, image, error)
        image_waiting_series(sc, pod, -60, LAST_MINUTE + 1)
        sc.pod_hooks[pod.uid] = waiting_on_image(
            sc, pod, "ImagePullBackOff", f'Back-off pulling image "{image}"'
        )
    restarts = [-43, -27, -11, 5, 21]
    starts = [-59, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        (chief,) = sc.kf_pods(
            spec,
            ctx.namespace,
            k,
            start,
            end,
            placement,
            only=[("Chief", 0)],
            failed_at={("Chief", 0): end - 1} if end is not None else None,
            created_m=start - 0.58 if k else None,
        )
        if end is None:
            continue
        at = ctx.at(end - 1.3, "chief-wait", k)
        tid = rand_int(100, 999, "ctid", k)
        if end >= FIRST_MINUTE:
            sc.container_log(
                chief,
                end - 1.3,
                f"{glog_prefix('W', at, tid, 'cluster_coordinator.py:1042')} Still waiting "
                "for 4 workers (/job:worker/replica:0/task:0..3) to become available.",
                stderr=True,
                at_ns=at,
            )
            sc.kf_restart([chief], end, 143)
    sc.operator_counter(ctx.namespace, "tensorflow", 2, [r for r in restarts if r >= FIRST_MINUTE])
    sc.kubelet_noise()
    return sc
