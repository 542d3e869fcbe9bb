"""Image pull scenarios: a deleted tag (JobSet), a registry the nodes may not read (TFJob)."""

from __future__ import annotations

from ..builders.cluster import FIRST_MINUTE, Context, spans
from ..builders.deterministic import py_stamp, rand_int
from ..builders.gpu import a3_pool
from ..builders.scenario import Scenario, declare
from ..builders.templates import gpu_jobset, kubeflow_job
from ..builders.workload import image_pull_fails, jobset_restarting


def jobset_image_pull(sc: Scenario, ctx: Context) -> None:
    image = "us-east5-docker.pkg.dev/saffron-genai/train/rlhf-runner:2026.02.26-rc4"
    error = (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )
    suffixes = ["c8j2", "g4w7", "n6r1", "t2x9"]
    nodes = a3_pool(sc, 4, "h100-pool", hosts=False, suffixes=suffixes)
    h100 = "nvidia-h100-80gb"
    spec = gpu_jobset(ctx.workload, "trainer", image, h100, cpu="96", memory="800Gi")
    restarts = [-36, -20, -4, 12, 28]
    sc.add_jobset(spec, 6, restarts)
    for k, start, end in spans([-52, *restarts]):
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
            sc.scheduled(pod, start - 0.85)
        image_pull_fails(sc, pod, start, start - 0.8, end, image, error)
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
            jobset_restarting(sc, spec, end, 6 + k)


def tfjob_image_pull(sc: Scenario, ctx: Context) -> None:
    image = "europe-west4-docker.pkg.dev/fjord-speech/private/conformer-worker:3.1.0"
    host = "europe-west4-docker.pkg.dev"
    error = (
        f'rpc error: code = Unknown desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": failed to authorize: failed to fetch oauth '
        f"token: unexpected status from GET request to https://{host}/v2/token?scope="
        "repository%3Afjord-speech%2Fprivate%2Fconformer-worker%3Apull&service="
        f"{host}: 403 Forbidden"
    )
    cpus = sc.cpu_pool("cpu-pool", "n2-standard-16", 1, 16)
    gpus = sc.gpu_pool("l4-pool-v2", "g2-standard-24", 4, "nvidia-l4", 24, 98903572, 2)
    spec = kubeflow_job(
        "TFJob",
        ctx.workload,
        image,
        {"Chief": (cpus, "8", "24Gi"), "Worker": (gpus, "20", "80Gi", 2)},
        command=["timeout", "--preserve-status", "900", "python3", "-m", "conformer.train"],
        select_pool=True,
    )
    only = [("Worker", i) for i in range(4)]
    workers = sc.kf_pods(spec, ctx.namespace, 0, -60, None, only=only, run_delay=10_000)
    for i, pod in enumerate(workers):
        image_pull_fails(sc, pod, -60, -59.7 + 0.07 * i, None, image, error)
    restarts = [-43, -27, -11, 5, 21]
    chiefs = sc.kf_incarnations(spec, ctx.namespace, ("Chief", 0), [-59, *restarts])
    waiting = "Still waiting for 4 workers (/job:worker/replica:0/task:0..3) to become available."
    for k, (chief, end) in enumerate(zip(chiefs, restarts, strict=False)):
        at = ctx.at(end - 1.3, "chief-wait", k)
        tid = rand_int(100, 999, "ctid", k)
        if end >= FIRST_MINUTE:
            sc.glog_line(chief, end - 1.3, at, tid, "cluster_coordinator.py:1042", waiting, "W")
            sc.kf_restart([chief], end, 143)
    sc.operator_counter(ctx.namespace, "tensorflow", 2, [r for r in restarts if r >= FIRST_MINUTE])


scenario_jobset_image_pull = declare(
    jobset_image_pull,
    "jobset-image-pull",
    "H100 JobSet (1 x 4 pods, imagePullPolicy IfNotPresent). The tag rlhf-runner:"
    "2026.02.26-rc4 was deleted by an Artifact Registry cleanup policy; three nodes "
    "still have it cached, the fourth (re-created by auto-repair the day before) does "
    "not. Worker 3 is scheduled there and waits on the pull (Failed to pull image: not "
    "found, ErrImagePull, ImagePullBackOff), Pending. torchrun's rendezvous on worker 0 "
    "times out after 15 minutes, the Job fails and the JobSet restarts (7 -> 10, at "
    "T-20m, T-4m, T+12m, T+28m); the new worker 3 lands on the same node. Pending for 15 "
    "minutes, yet scheduled: an image pull, not capacity.",
    Context(
        "saffron-genai",
        "us-east5",
        "us-east5-a",
        "h100-dev-use5",
        "team-agents",
        "qwen-rlhf",
        "2026-03-02T12:45:00Z",
    ),
    "image_pull",
    "fix_image",
)


scenario_tfjob_image_pull = declare(
    tfjob_image_pull,
    "tfjob-image-pull",
    "Kubeflow TFJob (Chief on CPU, 4 GPU Workers on a new L4 node pool, restartPolicy "
    "ExitCode). The worker image lives in a private Artifact Registry repository the new "
    "pool's node service account cannot read: every worker waits on the pull (403 "
    "Forbidden, ErrImagePull, ImagePullBackOff) and stays Pending, scheduled. The Chief "
    "waits for its workers under `timeout --preserve-status 900` and exits 143; the "
    "operator re-creates it (ExitedWithCode 143, TFJobRestarting; counter 2 -> 7, at "
    "T-43m, then T-27m, T-11m, T+5m and T+21m inside the window).",
    Context(
        "fjord-speech",
        "europe-west4",
        "europe-west4-b",
        "speech-train-euw4",
        "asr",
        "conformer-ps",
        "2026-11-02T09:30:00Z",
        "tfjob",
    ),
    "image_pull",
    "fix_image",
)
