"""Write the bundled event storms (deterministic: run it again and nothing changes).

storm.jsonl          LogEntries, one per line, as ``gcloud logging read`` would give them
storm.pubsub.json    the same storm as Pub/Sub push envelopes (base64 ``message.data``)
oom-storm.jsonl      OOM kills in one JobSet, as the log sinks deliver them

The storm: 256 PreemptionEvents from one Spot node pool within four minutes, 64 NCCL
watchdog timeouts from the workers of one JobSet, four unrelated log lines, redeliveries
(24 in each file) and a few malformed items, shuffled so some entries arrive out of order.
The payload of gke_nodepool interruption entries is not documented publicly; these follow
the golden fixture tests/data/signals/preemption_gke_nodepool.json.
"""

from __future__ import annotations

import base64
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROJECT = "example-project"
CLUSTER = "tpu-cluster-prod"
LOCATION = "us-central2-b"
POOL = "spot-v5e-pool"
JOBSET = "llama3-70b-training"
START = datetime(2026, 5, 20, 8, 0, 0, tzinfo=UTC)
SUBSCRIPTION = f"projects/{PROJECT}/subscriptions/loopbreaker-log-entries"


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def preemption(i: int) -> dict[str, Any]:
    node = f"gke-{CLUSTER}-{POOL}-1a2b3c4d-{i:04x}"
    at = START + timedelta(milliseconds=937 * i)  # 256 entries in four minutes
    return {
        "insertId": f"pre-{i:04d}",
        "logName": f"projects/{PROJECT}/logs/container.googleapis.com%2Fnode-pool-events",
        "resource": {
            "type": "gke_nodepool",
            "labels": {
                "project_id": PROJECT,
                "location": LOCATION,
                "cluster_name": CLUSTER,
                "node_pool_name": POOL,
            },
        },
        "severity": "WARNING",
        "timestamp": ts(at),
        "receiveTimestamp": ts(at + timedelta(seconds=2)),
        "textPayload": f"PreemptionEvent: Node '{node}' in node pool '{POOL}' was preempted.",
    }


def nccl_timeout(i: int) -> dict[str, Any]:
    job, pod_index = divmod(i, 16)
    pod = f"{JOBSET}-workers-{job}-{pod_index}-x{i:04d}"
    at = START + timedelta(minutes=6, milliseconds=450 * i)
    line = (
        f"[rank{i}]:[E520 08:06:{i % 60:02d}.426415540 ProcessGroupNCCL.cpp:629] [Rank {i}] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, "
        "NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran for 600081 "
        "milliseconds before timing out."
    )
    return {
        "insertId": f"nccl-{i:04d}",
        "logName": f"projects/{PROJECT}/logs/stderr",
        "resource": {
            "type": "k8s_container",
            "labels": {
                "project_id": PROJECT,
                "location": LOCATION,
                "cluster_name": CLUSTER,
                "namespace_name": "default",
                "pod_name": pod,
                "container_name": "trainer",
            },
        },
        "labels": {
            "k8s-pod/jobset_sigs_k8s_io/jobset-name": JOBSET,
            "k8s-pod/jobset_sigs_k8s_io/job-index": str(job),
            "k8s-pod/batch_kubernetes_io/job-completion-index": str(pod_index),
        },
        "severity": "ERROR",
        "timestamp": ts(at),
        "receiveTimestamp": ts(at + timedelta(seconds=1)),
        "textPayload": line,
    }


def noise(i: int) -> dict[str, Any]:
    entry = nccl_timeout(i)
    entry["insertId"] = f"noise-{i:04d}"
    entry["severity"] = "INFO"
    entry["logName"] = f"projects/{PROJECT}/logs/stdout"
    entry["textPayload"] = f"step {1200 + i}: loss=1.{i:03d} tokens/s=51234"
    return entry


def storm() -> list[dict[str, Any]]:
    rng = random.Random(20260520)
    entries = [preemption(i) for i in range(256)] + [nccl_timeout(i) for i in range(64)]
    entries += [noise(i) for i in range(4)]
    # Out of order, but only locally, as late deliveries are.
    ordered = sorted(entries, key=lambda e: e["timestamp"])
    for i in range(0, len(ordered) - 8, 8):
        window = ordered[i : i + 8]
        rng.shuffle(window)
        ordered[i : i + 8] = window
    preemptions = [e for e in ordered if e["insertId"].startswith("pre-")]
    timeouts = [e for e in ordered if e["insertId"].startswith("nccl-")]
    redeliveries = rng.sample(preemptions, 16) + rng.sample(timeouts, 8)
    return ordered + redeliveries


def write_jsonl(entries: list[dict[str, Any]]) -> None:
    lines = [json.dumps(e, separators=(",", ":")) for e in entries]
    malformed = [
        '{"insertId": "truncated", "resource": {"type": "k8s_container"',  # not JSON
        "[1, 2, 3]",  # not an object
        '{"message": "hello"}',  # no resource, no logName: not a LogEntry
        json.dumps(
            {
                "insertId": "bad-time",
                "logName": f"projects/{PROJECT}/logs/stderr",
                "resource": {"type": "k8s_container", "labels": {"cluster_name": CLUSTER}},
                "timestamp": "yesterday at noon",
                "textPayload": "NCCL WARN timeout",
            }
        ),
        json.dumps(
            {
                "insertId": "bad-payload",
                "logName": f"projects/{PROJECT}/logs/stderr",
                "resource": {"type": "k8s_container", "labels": {"cluster_name": CLUSTER}},
                "timestamp": ts(START),
                "textPayload": 42,
            }
        ),
    ]
    # Spread the malformed lines through the file.
    for n, bad in enumerate(malformed):
        lines.insert(40 + 60 * n, bad)
    (HERE / "storm.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def envelope(
    entry: Any, message_id: str, publish_time: str, raw: str | None = None
) -> dict[str, Any]:
    data = raw if raw is not None else json.dumps(entry, separators=(",", ":"))
    message: dict[str, Any] = {
        "data": base64.b64encode(data.encode()).decode(),
        "messageId": message_id,
        "message_id": message_id,
        "publishTime": publish_time,
        "publish_time": publish_time,
    }
    if isinstance(entry, dict) and "timestamp" in entry:
        message["attributes"] = {"logging.googleapis.com/timestamp": entry["timestamp"]}
    return {"message": message, "subscription": SUBSCRIPTION}


def write_pubsub(entries: list[dict[str, Any]]) -> None:
    envelopes: list[dict[str, Any]] = []
    ids: dict[str, str] = {}
    for n, entry in enumerate(entries):
        key = entry["insertId"]
        # A redelivery carries the messageId of the first delivery.
        message_id = ids.setdefault(key, str(9_000_000_000_000 + n))
        envelopes.append(envelope(entry, message_id, entry["receiveTimestamp"]))
    published = ts(START)
    bad_base64 = envelope({}, "9100000000000001", published)
    bad_base64["message"]["data"] = "not base64 at all!"
    envelopes[50:50] = [bad_base64]
    envelopes[120:120] = [envelope(None, "9100000000000002", published, raw="not json")]
    envelopes[200:200] = [envelope([1, 2], "9100000000000003", published)]
    envelopes[260:260] = [envelope({"message": "hi"}, "9100000000000004", published)]
    envelopes[300:300] = [
        {
            "specversion": "1.0",
            "type": "google.cloud.storage.object.v1.finalized",
            "source": "//storage.googleapis.com/projects/_/buckets/example",
            "id": "9100000000000005",
            "data": {"bucket": "example", "name": "x"},
        }
    ]
    text = json.dumps(envelopes, indent=1)
    (HERE / "storm.pubsub.json").write_text(text + "\n", encoding="utf-8")


# --- a storm of OOM kills in one JobSet ------------------------------------------------------

OOM_CLUSTER = "a3-train-usc1"
OOM_LOCATION = "us-central1"
OOM_NAMESPACE = "llm"
OOM_JOBSET = "mistral-7b-sft"
OOM_START = datetime(2026, 8, 12, 10, 0, 0, tzinfo=UTC)
OOM_IMAGE = "us-central1-docker.pkg.dev/example-project/llm/sft-trainer:2026.08.05"
ACTIVITY_LOG = f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Factivity"
GKE_VERSION = "v1.32.4-gke.1767000"


def _uid(*parts: object) -> str:
    import hashlib

    h = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _cluster_resource() -> dict[str, Any]:
    return {
        "type": "k8s_cluster",
        "labels": {"project_id": PROJECT, "location": OOM_LOCATION, "cluster_name": OOM_CLUSTER},
    }


def _oom_status(pod: str, uid: str, finished: datetime) -> dict[str, Any]:
    cid = "containerd://" + _uid("cid", pod).replace("-", "") * 2
    return {
        "containerStatuses": [
            {
                "containerID": cid,
                "image": OOM_IMAGE,
                "lastState": {},
                "name": "trainer",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "containerID": cid,
                        "exitCode": 137,
                        "finishedAt": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "reason": "OOMKilled",
                        "startedAt": (finished - timedelta(minutes=9)).strftime(
                            "%Y-%m-%dT%H:%M:%SZ"
                        ),
                    }
                },
            }
        ],
        "phase": "Failed",
    }


def _audit(
    insert_id: str, at: datetime, method: str, resource: str, principal: str, **bodies: Any
) -> dict[str, Any]:
    proto: dict[str, Any] = {
        "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
        "authenticationInfo": {"principalEmail": principal},
        "authorizationInfo": [{"granted": True, "permission": method, "resource": resource}],
        "methodName": method,
        "resourceName": resource,
        "serviceName": "k8s.io",
        "status": {"code": 0},
        **bodies,
    }
    return {
        "insertId": insert_id,
        "labels": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""},
        "logName": ACTIVITY_LOG,
        "protoPayload": proto,
        "resource": _cluster_resource(),
        "severity": "NOTICE",
        "timestamp": ts(at),
        "receiveTimestamp": ts(at + timedelta(seconds=3)),
    }


def oom_storm() -> list[dict[str, Any]]:
    """Three restarts of a JobSet of 16 workers, 8 OOM-killed each time. Per kill the
    kubelet's status patch (names the pod only: ignored); at each restart the JobSet's
    ``Restarting`` Event and the garbage collector's deletion of every killed pod, whose
    audit response is the pod with its labels and its OOMKilled status."""
    entries: list[dict[str, Any]] = []
    for attempt in range(3):
        base = OOM_START + timedelta(minutes=11 * attempt)
        killed = []
        for n in range(8):
            index = 2 * n + 1
            pod = f"{OOM_JOBSET}-workers-{index // 4}-{index % 4}-a{attempt}k{n:02d}"
            uid = _uid("pod", pod)
            node = f"gke-{OOM_CLUSTER}-a3-pool-5e1d9c2b-{attempt}{n:03x}"
            at = base + timedelta(seconds=7 * n, milliseconds=113 * n)
            status = _oom_status(pod, uid, at)
            entries.append(
                _audit(
                    f"oomk-{attempt}-{n:02d}",
                    at + timedelta(seconds=1),
                    "io.k8s.core.v1.pods.status.patch",
                    f"core/v1/namespaces/{OOM_NAMESPACE}/pods/{pod}/status",
                    f"system:node:{node}",
                    request={"@type": "k8s.io/Patch", "metadata": {"uid": uid}, "status": status},
                    requestMetadata={
                        "callerIp": f"10.128.0.{10 + n}",
                        "callerSuppliedUserAgent": f"kubelet/{GKE_VERSION} (linux/amd64)",
                    },
                )
            )
            killed.append((pod, uid, index, status))
        restart = base + timedelta(minutes=1, seconds=20)
        entries.append(
            {
                "insertId": f"jsrestart-{attempt}",
                "jsonPayload": {
                    "apiVersion": "v1",
                    "involvedObject": {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": OOM_JOBSET,
                        "namespace": OOM_NAMESPACE,
                        "uid": _uid("jobset", OOM_JOBSET),
                    },
                    "kind": "Event",
                    "message": f"restarting jobset, attempt {4 + attempt}",
                    "metadata": {
                        "name": f"{OOM_JOBSET}.{attempt:016x}",
                        "namespace": OOM_NAMESPACE,
                    },
                    "reason": "Restarting",
                    "reportingComponent": "jobset",
                    "source": {"component": "jobset"},
                    "type": "Warning",
                },
                "logName": f"projects/{PROJECT}/logs/events",
                "resource": _cluster_resource(),
                "severity": "WARNING",
                "timestamp": ts(restart),
                "receiveTimestamp": ts(restart + timedelta(seconds=2)),
            }
        )
        for n, (pod, uid, index, status) in enumerate(killed):
            at = restart + timedelta(seconds=2, milliseconds=250 * n)
            labels = {
                "batch.kubernetes.io/job-completion-index": str(index % 4),
                "jobset.sigs.k8s.io/job-index": str(index // 4),
                "jobset.sigs.k8s.io/jobset-name": OOM_JOBSET,
                "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                "jobset.sigs.k8s.io/restart-attempt": str(3 + attempt),
            }
            response = {
                "@type": "core.k8s.io/v1.Pod",
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"labels": labels, "name": pod, "namespace": OOM_NAMESPACE, "uid": uid},
                "spec": {
                    "containers": [
                        {
                            "image": OOM_IMAGE,
                            "name": "trainer",
                            "resources": {
                                "limits": {"memory": "160Gi", "nvidia.com/gpu": "8"},
                                "requests": {"memory": "160Gi", "nvidia.com/gpu": "8"},
                            },
                        }
                    ],
                    "restartPolicy": "Never",
                },
                "status": status,
            }
            entries.append(
                _audit(
                    f"oomgc-{attempt}-{n:02d}",
                    at,
                    "io.k8s.core.v1.pods.delete",
                    f"core/v1/namespaces/{OOM_NAMESPACE}/pods/{pod}",
                    "system:serviceaccount:kube-system:generic-garbage-collector",
                    request={
                        "@type": "core.k8s.io/v1.DeleteOptions",
                        "propagationPolicy": "Background",
                    },
                    response=response,
                )
            )
    rng = random.Random(20260812)
    entries.sort(key=lambda e: e["timestamp"])
    redeliveries = rng.sample([e for e in entries if e["insertId"].startswith("oomgc")], 6)
    return entries + redeliveries


def main() -> None:
    entries = storm()
    write_jsonl(entries)
    write_pubsub(entries)
    oom = oom_storm()
    (HERE / "oom-storm.jsonl").write_text(
        "\n".join(json.dumps(e, separators=(",", ":")) for e in oom) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
