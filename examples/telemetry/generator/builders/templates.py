"""Templates: GPU/TPU node labels, taints and selectors, JobSet and Kubeflow specs, expect()."""

from __future__ import annotations

from typing import Any

from .cluster import JobSetSpec, KubeflowSpec

TPU_TOLERATION = [{"effect": "NoSchedule", "key": "google.com/tpu", "operator": "Exists"}]
GPU_TOLERATION = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]
TPU_TAINT = [{"effect": "NoSchedule", "key": "google.com/tpu", "value": "present"}]
GPU_TAINT = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
SPOT = {"cloud.google.com/gke-spot": "true"}


def tpu_labels(accel: str, topology: str) -> dict[str, str]:
    return {
        "cloud.google.com/gke-tpu-accelerator": accel,
        "cloud.google.com/gke-tpu-topology": topology,
        "cloud.google.com/gke-accelerator-count": "4",
    }


def gpu_labels(accel: str, count: int = 8) -> dict[str, str]:
    return {
        "cloud.google.com/gke-accelerator": accel,
        "cloud.google.com/gke-accelerator-count": str(count),
        "cloud.google.com/gke-gpu": "true",
        "cloud.google.com/gke-gpu-driver-version": "latest",
    }


def tpu_capacity(cpu: int, mem_ki: int) -> dict[str, str]:
    return {"cpu": str(cpu), "memory": f"{mem_ki}Ki", "google.com/tpu": "4"}


def gpu_capacity(cpu: int, mem_ki: int, gpus: int = 8) -> dict[str, str]:
    return {"cpu": str(cpu), "memory": f"{mem_ki}Ki", "nvidia.com/gpu": str(gpus)}


def nodepool(name: str) -> dict[str, str]:
    """The node selector of one node pool."""
    return {"cloud.google.com/gke-nodepool": name}


def accelerator(name: str) -> dict[str, str]:
    """The node selector of one GPU model."""
    return {"cloud.google.com/gke-accelerator": name}


def resources(cpu: str | None = None, memory: str | None = None, gpus: int = 0) -> dict[str, str]:
    """Container resources (requests = limits); only what is given."""
    out = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus) if gpus else None}
    return {k: v for k, v in out.items() if v is not None}


def jobset(
    name: str,
    container: str,
    image: str,
    res: dict[str, str],
    select: dict[str, str],
    tolerations: list[dict[str, str]],
    *,
    rjob: str = "workers",
    replicas: int = 1,
    parallelism: int = 4,
    **kwargs: Any,
) -> JobSetSpec:
    """A JobSet of ``replicas`` Jobs of ``parallelism`` pods (1 x 4 unless told)."""
    return JobSetSpec(
        name, rjob, replicas, parallelism, container, image, res, select, tolerations, **kwargs
    )


def gpu_jobset(
    name: str,
    container: str,
    image: str,
    accel: str | None,
    *,
    gpus: int = 8,
    cpu: str | None = None,
    memory: str | None = None,
    spot: bool = False,
    **kwargs: Any,
) -> JobSetSpec:
    """A JobSet whose pods each take ``gpus`` GPUs of model ``accel`` (any model when None)."""
    select = {**(accelerator(accel) if accel else {}), **(SPOT if spot else {})}
    res = resources(cpu, memory, gpus)
    return jobset(name, container, image, res, select, GPU_TOLERATION, **kwargs)


def tpu_jobset(
    name: str, container: str, image: str, accel: str, topology: str, **kwargs: Any
) -> JobSetSpec:
    """A JobSet (one ``slice`` Job of 4 pods unless told) whose pods each take the 4 chips of
    one TPU host of a ``topology`` slice; ``spot=True`` asks for Spot nodes."""
    select = {
        "cloud.google.com/gke-tpu-accelerator": accel,
        "cloud.google.com/gke-tpu-topology": topology,
        **(SPOT if kwargs.pop("spot", False) else {}),
    }
    kwargs.setdefault("rjob", "slice")
    return jobset(name, container, image, {"google.com/tpu": "4"}, select, TPU_TOLERATION, **kwargs)


def kubeflow_job(
    api_kind: str,
    name: str,
    image: str,
    replicas: dict[str, tuple[Any, ...]],
    *,
    select_pool: bool = False,
    **kwargs: Any,
) -> KubeflowSpec:
    """A TFJob or PyTorchJob: replica type -> (the nodes its replicas run on, one each; cpu;
    memory[; GPUs]). Each type's node selector picks its nodes: GPU nodes by their model
    (by their pool with ``select_pool``), other nodes by their pool; the types that request
    GPUs tolerate the GPU taint."""
    res = {rtype: resources(*shape[1:]) for rtype, shape in replicas.items()}
    gpu = [rtype for rtype, r in res.items() if "nvidia.com/gpu" in r]
    select = {}
    for rtype, (nodes, *_) in replicas.items():
        model = nodes[0].labels.get("cloud.google.com/gke-accelerator")
        select[rtype] = nodepool(nodes[0].pool) if select_pool or not model else accelerator(model)
    return KubeflowSpec(
        name,
        api_kind,
        {rtype: len(shape[0]) for rtype, shape in replicas.items()},
        image,
        res,
        select,
        {rtype: GPU_TOLERATION for rtype in gpu},
        placement={
            (rtype, i): node
            for rtype, (nodes, *_) in replicas.items()
            for i, node in enumerate(nodes)
        },
        **kwargs,
    )


def expect(
    root: str, path: str, suspects: list[dict[str, Any]] | None = None, loop: bool = True
) -> dict[str, Any]:
    return {
        "restart_loop": loop,
        "root_cause": root,
        "remediation_path": path,
        "suspect_hosts": suspects or [],
    }


def suspect(host: str | None, node: str, failures: int) -> list[dict[str, Any]]:
    """The one suspect host of an expected diagnosis."""
    return [{"host": host, "nodes": [node], "failures": failures}]
