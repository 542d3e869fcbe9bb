"""jobsets.json: JobSet objects as ``kubectl get jobsets -o json`` prints them.

After sigs.k8s.io/jobset ``jobset_types.go``, with the status of their Jobs.
"""

from __future__ import annotations

from typing import Any

from .cluster import JobSetSpec
from .deterministic import fmt_ts, rand_int

JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def job_status(name: str, *, active: int, failed: int, ready: int, **more: Any) -> dict[str, Any]:
    """The status of one replicated Job (a JobSet's) or Job (a TrainJob's): none suspended,
    none succeeded."""
    return {
        "active": active,
        "failed": failed,
        **more,
        "name": name,
        "ready": ready,
        "succeeded": 0,
        "suspended": 0,
    }


def job_template(spec: JobSetSpec) -> dict[str, Any]:
    """The Job template of a replicated Job: Indexed, one pod per completion, no retries."""
    return {
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


def jobset_object(
    spec: JobSetSpec,
    namespace: str,
    *,
    uid: str,
    created_ns: int,
    version_key: str,
    failure_policy: dict[str, Any],
    status: dict[str, Any],
    ttl: int | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A JobSet; one that ``owner`` created names its subdomain and leaves the Job template
    to its runtime."""
    metadata: dict[str, Any] = {
        "creationTimestamp": fmt_ts(created_ns, 0),
        "generation": 1,
        "name": spec.name,
        "namespace": namespace,
        "resourceVersion": str(rand_int(10**7, 10**8, "jsrv", version_key)),
        "uid": uid,
    }
    network: dict[str, Any] = {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    replicated: dict[str, Any] = {"name": spec.rjob, "replicas": spec.replicas}
    if owner is None:
        replicated["template"] = job_template(spec)
    else:
        metadata["ownerReferences"] = [owner]
        network["subdomain"] = spec.name
    js_spec: dict[str, Any] = {
        "failurePolicy": failure_policy,
        "network": network,
        "replicatedJobs": [replicated],
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "successPolicy": {"operator": "All"},
        "suspend": False,
    }
    if ttl is not None:
        js_spec["ttlSecondsAfterFinished"] = ttl
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": metadata,
        "spec": js_spec,
        "status": status,
    }
