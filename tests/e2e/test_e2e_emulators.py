"""End to end through the real emulators: log sink -> Pub/Sub push -> on_log_entry -> Firestore.

Entries are published as a log sink publishes them (data = the LogEntry JSON, attribute
``logging.googleapis.com/timestamp``) to a topic whose PUSH subscription points at
``on_log_entry`` served by functions-framework (gunicorn, two worker processes). The push
emulator posts Pub/Sub push envelopes; functions-framework turns them into
``messagePublished`` CloudEvents. A recording relay sits between the two: it fails the
first delivery of some messages (Pub/Sub must redeliver them) and keeps every envelope so
the test can redeliver all of them again, concurrently, with their original messageIds.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.store.base import refresh
from loopbreaker.incidents.store.firestore import FirestoreStore

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
PROJECT, CLUSTER, POOL, JOBSET = "proj", "tpu-cluster-prod", "spot-pool", "llama-train"
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
PREEMPTIONS, TIMEOUTS = 48, 16


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: A regional pool: one managed instance group (and hash) per zone.
ZONES = {"us-east5-a": "1a2b3c4d", "us-east5-b": "5e6f7a8b", "us-east5-c": "9c0d1e2f"}
AUDITS = 12


def node_name(i: int) -> tuple[str, str]:
    zone = sorted(ZONES)[i % len(ZONES)]
    return f"gke-{CLUSTER}-{POOL}-{ZONES[zone]}-{i:04x}", zone


def compute_preempted(i: int) -> dict[str, Any]:
    """The Compute Engine sink's entry for the same preemption: it names only the VM."""
    node, zone = node_name(i)
    return {
        "insertId": f"audit-{i}",
        "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fsystem_event",
        "resource": {
            "type": "gce_instance",
            "labels": {"project_id": PROJECT, "zone": zone, "instance_id": str(7000 + i)},
        },
        "severity": "INFO",
        "timestamp": ts(T0 + timedelta(seconds=3 * i, milliseconds=400)),
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "methodName": "compute.instances.preempted",
            "resourceName": f"projects/{PROJECT}/zones/{zone}/instances/{node}",
            "status": {"message": "Instance was preempted."},
        },
    }


def preemption(i: int) -> dict[str, Any]:
    return {
        "insertId": f"pre-{i}",
        "logName": f"projects/{PROJECT}/logs/container.googleapis.com%2Fnodepool-events",
        "resource": {
            "type": "gke_nodepool",
            "labels": {"project_id": PROJECT, "cluster_name": CLUSTER, "node_pool_name": POOL},
        },
        "severity": "WARNING",
        "timestamp": ts(T0 + timedelta(seconds=3 * i)),
        "jsonPayload": {"message": f"PreemptionEvent: Node '{node_name(i)[0]}' preempted."},
    }


def nccl_timeout(i: int) -> dict[str, Any]:
    return {
        "insertId": f"nccl-{i}",
        "logName": f"projects/{PROJECT}/logs/stderr",
        "resource": {
            "type": "k8s_container",
            "labels": {
                "project_id": PROJECT,
                "cluster_name": CLUSTER,
                "namespace_name": "default",
                "pod_name": f"{JOBSET}-workers-0-{i}-abcde",
            },
        },
        "labels": {"k8s-pod/jobset_sigs_k8s_io/jobset-name": JOBSET},
        "severity": "ERROR",
        "timestamp": ts(T0 + timedelta(minutes=3, milliseconds=200 * i)),
        "textPayload": f"[Rank {i}] Watchdog caught collective operation timeout: WorkNCCL(...)",
    }


class Relay:
    """A push endpoint that records every envelope and forwards it to the function."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.failed_first: set[str] = set()
        self.envelopes: dict[str, bytes] = {}  # messageId -> the body Pub/Sub pushed
        self.statuses: dict[str, list[int]] = {}
        self.lock = threading.Lock()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = relay.deliver(body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def deliver(self, body: bytes) -> int:
        message = json.loads(body)["message"]
        message_id = message["messageId"]
        with self.lock:
            self.envelopes.setdefault(message_id, body)
            first = message_id not in self.statuses
            self.statuses.setdefault(message_id, [])
        if first and zlib.crc32(message["data"].encode()) % 4 == 0:
            self.failed_first.add(message_id)
            status = 503  # as if the function had raised TransientError
        else:
            status = post(self.target, body)
        with self.lock:
            self.statuses[message_id].append(status)
        return status

    def acked(self) -> set[str]:
        with self.lock:
            return {m for m, s in self.statuses.items() if 200 in s}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def post(url: str, body: bytes) -> int:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with DIRECT.open(request, timeout=60) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code


def wait_for(what: str, check: Any, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def firestore_store(
    firestore_emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FirestoreStore, str]]:
    for name, value in firestore_emulator.env.items():
        monkeypatch.setenv(name, value)
    prefix = "e2e" + uuid.uuid4().hex[:10]
    store = FirestoreStore.connect(
        project=firestore_emulator.project, database="(default)", prefix=prefix
    )
    yield store, prefix
    store.close()


def test_a_storm_through_pubsub_push_and_functions_lands_in_firestore(
    pubsub_emulator: Any,
    firestore_store: tuple[FirestoreStore, str],
    firestore_emulator: Any,
    function_server_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    store, prefix = firestore_store
    notes = tmp_path / "notifications"
    env = {
        **firestore_emulator.env,
        "LOOPBREAKER_STORE": "firestore",
        "LOOPBREAKER_COLLECTION_PREFIX": prefix,
        "LOOPBREAKER_SETTLE_TIME": "3s",
        "LOOPBREAKER_LIVE_SOURCES": "false",  # no Google APIs here: signals only
        "LOOPBREAKER_NOTIFIER": f"file:{notes}",
        "WORKERS": "2",  # two gunicorn processes: real cross-process concurrency
        "THREADS": "8",
    }
    on_log_entry = function_server_factory("on_log_entry", SOURCE, "cloudevent", env)

    rng = random.Random(4)
    entries = [preemption(i) for i in range(PREEMPTIONS)] + [nccl_timeout(i) for i in range(16)]
    entries += [compute_preempted(i) for i in range(AUDITS)]  # the other sink, all zones
    rng.shuffle(entries)
    payloads: list[tuple[bytes, dict[str, str]]] = [
        (json.dumps(e).encode(), {"logging.googleapis.com/timestamp": e["timestamp"]})
        for e in entries
    ]
    payloads.insert(10, (b"{not json", {}))
    payloads.insert(30, (json.dumps({"textPayload": "no resource"}).encode(), {}))

    from google.cloud import pubsub_v1

    for name, value in pubsub_emulator.env.items():
        monkeypatch.setenv(name, value)
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(pubsub_emulator.project, f"log-sink-{prefix}")
    subscription = subscriber.subscription_path(pubsub_emulator.project, f"push-{prefix}")
    publisher.create_topic(name=topic)

    # The relay fails the first push of about a quarter of the messages, so Pub/Sub
    # itself must redeliver them.
    relay = Relay(on_log_entry.url)
    try:
        subscriber.create_subscription(
            request={
                "name": subscription,
                "topic": topic,
                "push_config": {"push_endpoint": relay.url},
                "ack_deadline_seconds": 10,
            }
        )
        futures = [publisher.publish(topic, data, **attrs) for data, attrs in payloads]
        message_ids = [f.result(timeout=30) for f in futures]
        wait_for("every message acknowledged", lambda: relay.acked() >= set(message_ids))
        retried = sorted(relay.failed_first)

        # Redeliver every envelope again, exactly as pushed, 16 at a time.
        bodies = list(relay.envelopes.values())
        rng.shuffle(bodies)
        with ThreadPoolExecutor(max_workers=16) as pool:
            statuses = list(pool.map(lambda b: post(on_log_entry.url, b), bodies))
    finally:
        subscriber.delete_subscription(request={"subscription": subscription})
        publisher.delete_topic(request={"topic": topic})
        relay.close()

    assert retried, "no first delivery was failed, so no redelivery was exercised"
    assert statuses == [200] * len(bodies)

    found = {i.key.name: i for i in store.list_incidents()}
    pool_key = f"gke-{CLUSTER}-{POOL}"  # the pool's naming prefix
    assert set(found) == {pool_key, f"default/{JOBSET}"}  # one incident per key, no duplicates
    # Firestore's ingest writes only each arrival's own documents; counting happens once,
    # when the incident is settled.
    pool_incident = refresh(store, found[pool_key].id, 500)
    jobset_incident = refresh(store, found[f"default/{JOBSET}"].id, 500)
    assert pool_incident is not None and jobset_incident is not None
    # One incident for the regional pool's storm, through both sinks, in every zone.
    assert pool_incident.signal_count == PREEMPTIONS + AUDITS  # no lost update or double count
    assert pool_incident.counts == {"preemption": PREEMPTIONS + AUDITS}
    assert pool_incident.cluster == CLUSTER
    assert jobset_incident.counts == {"nccl_timeout": TIMEOUTS}
    assert len(store.signals(pool_incident.id)) == PREEMPTIONS + AUDITS
    assert {i.state for i in found.values()} == {State.OPEN}

    log = [json.loads(line) for line in on_log_entry.log().splitlines() if line.startswith("{")]
    rejected = [line for line in log if line.get("event") == "entry_rejected"]
    duplicates = [line for line in log if line.get("event") == "entry_duplicate"]
    # Each bad message is logged once per delivery (first push + our redelivery).
    assert len(rejected) == 4 and all(line["severity"] == "ERROR" for line in rejected)
    assert {line["message_id"] for line in rejected} <= set(message_ids)
    assert len(duplicates) == PREEMPTIONS + TIMEOUTS + AUDITS  # every redelivery recognised

    # on_schedule, as Cloud Scheduler calls it, once the incidents have settled.
    on_schedule = function_server_factory("on_schedule", SOURCE, "http", env)
    time.sleep(3.5)
    report = json.loads(_http_post_json(on_schedule.url))
    assert sorted(report["diagnosed"]) == sorted(i.id for i in found.values())
    assert json.loads(_http_post_json(on_schedule.url))["diagnosed"] == []

    diagnosed = {i.key.name: i for i in store.list_incidents()}
    causes = {
        name: i.diagnosis.root_cause if i.diagnosis else None for name, i in diagnosed.items()
    }
    assert causes == {pool_key: "spot_preemption", f"default/{JOBSET}": "application"}
    assert all(i.state is State.DIAGNOSED and i.diagnoses == 1 for i in diagnosed.values())
    assert _one_message_per_incident(notes, diagnosed.values())


def _http_post_json(url: str) -> str:
    request = urllib.request.Request(url, data=b"{}", method="POST")
    request.add_header("Content-Type", "application/json")
    with DIRECT.open(request, timeout=60) as response:
        body: str = response.read().decode()
        return body


def _one_message_per_incident(notes: Path, found: Any) -> bool:
    messages = sorted(p.stem for p in notes.glob("inc-*.json"))
    posts = (notes / "posts.jsonl").read_text().splitlines()
    incidents: list[Incident] = list(found)
    return messages == sorted(i.id for i in incidents) and len(posts) == len(incidents)
