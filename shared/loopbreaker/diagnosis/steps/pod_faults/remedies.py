"""Step 4's findings, summaries and actions for the workload's pods stopped by Kubernetes
itself, naming the workload's own objects (pure)."""

from __future__ import annotations

from loopbreaker.diagnosis.steps.common import Notes, short_list
from loopbreaker.diagnosis.steps.pod_faults import (
    STEP,
    Fault,
    at_text,
    class_text,
    limit_text,
    priority_text,
)
from loopbreaker.model import (
    Context,
    RootCause,
)


def describe(fault: Fault, notes: Notes, coordinators: frozenset[str]) -> None:
    d = fault.details
    # The coordinator first (a Kubeflow Chief or Master): the replica the job waits on.
    pods = sorted(fault.pods, key=lambda p: (p not in coordinators, p))
    lead = " (the coordinator first)" if pods and pods[0] in coordinators else ""
    what = f"{len(pods)} pod(s){lead} ({short_list(pods)})" if pods else "its pods"
    example = _example(fault)
    if fault.cause is RootCause.OUT_OF_MEMORY:
        memory = ""
        if d.get("limit") and d.get("peak"):
            memory = f"; working set peaked at {d['peak']} of its {d['limit']} limit ({d['share']})"
        elif d.get("limit"):
            memory = f"; memory limit {d['limit']}"
        when = f" {at_text(fault).rstrip()}" if fault.first else ""
        text = f"Container {d['container']} was OOM-killed in {what}{when}{memory}: {example}"
    elif fault.cause is RootCause.GPU_OUT_OF_MEMORY:
        ranks = f" (rank {d['ranks']})" if d.get("ranks") else ""
        text = (
            f"The accelerator ran out of memory in {what}{ranks} {at_text(fault)}"
            f"{gpu_numbers(d)}: {example}"
        )
    elif fault.cause is RootCause.PRIORITY_PREEMPTION:
        more = f" (and {int(d['preemptors']) - 1} more)" if int(d["preemptors"]) > 1 else ""
        text = (
            f"The scheduler preempted {what} {at_text(fault)}for {d['preemptor']}{more}"
            f"{class_text(d['preemptor_class'])}{priority_text(d)}, a higher priority than the "
            f"workload's{class_text(d['victim_class'], default='(no PriorityClass)')}: {example}"
        )
    elif fault.cause is RootCause.NODE_PRESSURE_EVICTION:
        text = (
            f"The kubelet evicted {what} {at_text(fault)}from {d['nodes']}, low on "
            f"{d['resource']}: {example}"
        )
        if d.get("pressure"):
            notes.add(
                STEP,
                f"Node pressure on {d['nodes']}: {d['pressure']}",
                fault.cause,
                source=d.get("pressure_sources") or None,
            )
    else:
        text = (
            f"{what.capitalize()} cannot pull image {d['image']} {at_text(fault)}"
            f"(scheduled, waiting on the registry, not on capacity): {example}"
        )
    notes.add(STEP, text[:600], fault.cause, source=fault.sources())


def remediation_actions(fault: Fault, ctx: Context) -> tuple[str, ...]:
    """Concrete actions naming the workload's objects, for the cause ``fault`` is."""
    d = fault.details
    job = (
        f"{ctx.workload_kind.api_kind} {ctx.namespace + '/' if ctx.namespace else ''}{ctx.workload}"
    )
    if fault.cause is RootCause.OUT_OF_MEMORY:
        limit = d.get("limit") or "its limit (not read: no pod status or resource limits metric)"
        peak = (
            f", peak working set {d['peak']} ({d['share']} of the limit)" if d.get("peak") else ""
        )
        return (
            f"Raise the memory limit (and request) of container {d['container']} in {job}'s "
            f"pod template above its peak: limit {limit}{peak}.",
            "Or cut its memory use: a smaller per-device batch, fewer data-loader workers "
            "and prefetch, sharded optimizer state, activation checkpointing.",
            "Keep requests equal to limits for training containers (Guaranteed QoS) so "
            "other pods on the node are evicted before them.",
            "No node action: an OOM kill at the container's limit is not a node fault.",
        )
    if fault.cause is RootCause.GPU_OUT_OF_MEMORY:
        return _gpu_memory_actions(d, job)
    if fault.cause is RootCause.PRIORITY_PREEMPTION:
        victim = class_text(d.get("victim_class") or "", default="no PriorityClass (priority 0)")
        preemptor = class_text(d.get("preemptor_class") or "", default="a higher priority")
        quota_ns = d.get("preemptor_namespace")
        quota = f"namespace {quota_ns}" if quota_ns else "the preemptor's namespace"
        node = f" on node {d['node']}" if d.get("node") else ""
        return (
            f"{job} runs at{victim}; {d['preemptor']} runs at{preemptor}{priority_text(d)} and "
            f"preempted its pods{node}: by design the scheduler evicts the lower priority.",
            "If the training must not be interrupted, give it a PriorityClass at least as "
            f"high as{preemptor}, or set preemptionPolicy: Never on the preemptor's "
            "PriorityClass so it waits instead of evicting.",
            f"Cap {quota} with a ResourceQuota (CPU, memory, GPUs; scopeSelector on its "
            "PriorityClass) so online services cannot take the training job's share, and "
            "give the training namespace its own quota.",
            "Or keep training on its own nodes (a tainted node pool with a toleration and "
            "nodeSelector on the job), and checkpoint often so a preemption loses little.",
        )
    if fault.cause is RootCause.NODE_PRESSURE_EVICTION:
        resource = d.get("resource", "a resource")
        nodes = d.get("nodes", "the node")
        if resource == "ephemeral-storage":
            fix = (
                "Give the training containers ephemeral-storage requests and limits; write "
                "checkpoints, datasets and scratch to a PersistentVolume or Cloud Storage, "
                "not the node's boot disk; or use larger boot disks or local SSDs."
            )
        elif resource == "memory":
            fix = (
                "Set memory requests equal to limits for the training containers "
                f"(Guaranteed QoS, evicted last) and find what else grew on {nodes} "
                "(pods without memory limits, node daemons)."
            )
        else:
            fix = f"Find what exhausted {resource} on {nodes} and bound it per pod."
        return (
            f"The kubelet on {nodes} evicted pods of {job}: the node ran low on {resource}.",
            fix,
            "Keep other workloads off the training nodes (taints, a dedicated node pool) "
            "or raise the node's eviction headroom (kubelet system reserved, node size).",
            "No cordon and no VM action: the node and its host are healthy.",
        )
    image = d.get("image", "the image")
    error = d.get("error") or "the pull failed"
    registry = image.split("/", 1)[0] if "/" in image else "docker.io"
    low = error.lower()
    if "not found" in low or "notfound" in low or "manifest unknown" in low:
        check = (
            f"The reference does not exist in {registry}: check the tag or digest "
            f"(gcloud artifacts docker images list) and fix the image of {job}."
        )
    elif any(w in low for w in ("403", "denied", "unauthorized", "permission", "401")):
        check = (
            f"Grant the nodes' service account roles/artifactregistry.reader on the "
            f"repository in {registry}, or set imagePullSecrets on {job}'s pods for a "
            "private registry."
        )
    else:
        check = (
            f"Check that the nodes reach {registry} (Private Google Access or Cloud NAT for "
            "private nodes) and pre-pull or mirror the image next to the cluster."
        )
    container = f"Container {d['container']} of " if d.get("container") else ""
    return (
        f"{container}{job} cannot pull {image}: {error}.",
        check,
        "Configure imagePullSecrets and sync images to a registry the cluster reaches "
        "before submitting the job.",
        "No capacity or node action: the pods are scheduled and wait on the image.",
    )


def summary_tail(fault: Fault) -> str:
    d = fault.details
    if fault.cause is RootCause.OUT_OF_MEMORY:
        return f"container {d['container']} was OOM-killed{limit_text(d)}."
    if fault.cause is RootCause.GPU_OUT_OF_MEMORY:
        return f"the accelerator ran out of memory{gpu_numbers(d)}."
    if fault.cause is RootCause.PRIORITY_PREEMPTION:
        return f"its pods were preempted by {d['preemptor']}{class_text(d['preemptor_class'])}."
    if fault.cause is RootCause.NODE_PRESSURE_EVICTION:
        return f"the kubelet evicted its pods from {d['nodes']} (low on {d['resource']})."
    return f"its pods cannot pull image {d['image']}."


def _example(fault: Fault) -> str:
    """A line that shows the fault best: a log line or pod status before a metric name."""
    ranked = sorted(
        fault.seen,
        key=lambda s: (
            s.text.startswith("kube_"),
            "Error: " in s.text,  # "Error: ImagePullBackOff" says less than the pull error
            s.at.timestamp() if s.at else float("inf"),
        ),
    )
    return ranked[0].text


def gpu_numbers(d: dict[str, str]) -> str:
    """ ", asked 2.00 GiB with 1.25 GiB free of 79.15 GiB on device GPU 0": what is known."""
    parts = []
    if d.get("asked"):
        parts.append(f"asked {d['asked']}")
    if d.get("free"):
        parts.append(f"with {d['free']} free")
    if d.get("total"):
        parts.append(f"of {d['total']}")
    if d.get("in_use"):
        parts.append(f"({d['in_use']} in use)")
    if d.get("memory_space"):
        parts.append(f"in memory space {d['memory_space']}")
    if d.get("device"):
        parts.append(f"on device {d['device']}")
    return (", " + " ".join(parts)) if parts else ""


def _gpu_memory_actions(d: dict[str, str], job: str) -> tuple[str, ...]:
    container = f"container {d['container']} of " if d.get("container") else ""
    head = f"The accelerator memory of {container}{job} is exhausted{gpu_numbers(d)}."
    if d.get("xla"):
        return (
            head,
            "Read the XLA memory profile of the step (HBM use by buffer) and rematerialise: "
            "jax.checkpoint / remat policies on the largest activations.",
            "Shard parameters and optimizer state further across the slice (more "
            "data or FSDP-style sharding), or lower the per-device batch.",
            "No node action: running out of accelerator memory is the workload's, not the host's.",
        )
    return (
        head,
        "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on the training container: "
        "it cuts the fragmentation that leaves memory reserved but unallocated.",
        "Lower the per-device micro-batch and keep the global batch with gradient accumulation.",
        "Turn on activation checkpointing, and shard parameters, gradients and optimizer "
        "state (FSDP, ZeRO).",
        "No node action: running out of accelerator memory is the workload's, not the host's.",
    )
