"""Write the bundled event storm (deterministic: run it again and nothing changes).

storm.jsonl          LogEntries, one per line, as ``gcloud logging read`` would give them
storm.pubsub.json    the same storm as Pub/Sub push envelopes (base64 ``message.data``)

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


def main() -> None:
    entries = storm()
    write_jsonl(entries)
    write_pubsub(entries)


if __name__ == "__main__":
    main()
