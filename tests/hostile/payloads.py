"""Hostile deliveries for each entry point, and the seven payloads of issue 22."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import chatkit as K
from hypothesis import strategies as st

from hostile.servers import (
    HOSTILE,
    JSON_VALUES,
    PROJECT,
    PUBSUB,
    WEBHOOK_TOKEN,
    Server,
    b64,
    log_lines,
    render,
    set_path,
)
from loopbreaker.approval.requests import TOKEN_VERSION
from loopbreaker.incidents import Incident, State

# --- deliveries ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    body: bytes
    headers: dict[str, str]
    #: The valid entry (or alert) this delivery carries, if any.
    valid: str | None = None


def cloud_event(
    envelope: object, event_id: str, *, binary: bool, event: dict[str, Any] | None = None
) -> Delivery:
    """An Eventarc delivery of a Pub/Sub message, as functions-framework receives it."""
    if binary:
        headers = {
            "Content-Type": "application/json",
            "ce-specversion": "1.0",
            "ce-type": PUBSUB,
            "ce-source": f"//pubsub.googleapis.com/projects/{PROJECT}/topics/t",
            "ce-id": event_id,
        }
        return Delivery(render(envelope), headers)
    document = {
        "specversion": "1.0",
        "type": PUBSUB,
        "source": f"//pubsub.googleapis.com/projects/{PROJECT}/topics/t",
        "id": event_id,
        "datacontenttype": "application/json",
        "data": envelope,
        **(event or {}),
    }
    return Delivery(render(document), {"Content-Type": "application/cloudevents+json"})


def envelope(data: str, message_id: str, **message: object) -> dict[str, Any]:
    return {
        "message": {
            "data": data,
            "messageId": message_id,
            "publishTime": "2026-05-20T08:00:01Z",
            "attributes": {"logging.googleapis.com/timestamp": "2026-05-20T08:00:00Z"},
            **message,
        },
        "subscription": f"projects/{PROJECT}/subscriptions/sink",
    }


def host_error_entry(insert_id: str, vm: str, second: int = 0) -> dict[str, Any]:
    return {
        "insertId": insert_id,
        "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fsystem_event",
        "resource": {
            "type": "gce_instance",
            "labels": {"project_id": PROJECT, "zone": "us-east1-d"},
        },
        "timestamp": f"2026-05-20T08:00:{second % 60:02d}.102868Z",
        "protoPayload": {
            "methodName": "compute.instances.hostError",
            "resourceName": f"projects/{PROJECT}/zones/us-east1-d/instances/{vm}",
        },
    }


def preemption_entry(insert_id: str, cluster: str, node: str) -> dict[str, Any]:
    return {
        "insertId": insert_id,
        "logName": f"projects/{PROJECT}/logs/container.googleapis.com%2Fnode-pool-events",
        "resource": {
            "type": "gke_nodepool",
            "labels": {
                "project_id": PROJECT,
                "location": "us-east1",
                "cluster_name": cluster,
                "node_pool_name": "spot-pool",
            },
        },
        "timestamp": "2026-05-20T08:00:05Z",
        "textPayload": f"PreemptionEvent: Node '{node}' in node pool 'spot-pool' preempted.",
    }


def event_entry(insert_id: str) -> dict[str, Any]:
    return {
        "insertId": insert_id,
        "logName": f"projects/{PROJECT}/logs/events",
        "resource": {
            "type": "k8s_cluster",
            "labels": {"project_id": PROJECT, "location": "us-east1", "cluster_name": "c1"},
        },
        "timestamp": "2026-05-20T08:00:07Z",
        "jsonPayload": {
            "reason": "JobSetRestarting",
            "message": "restarting",
            "involvedObject": {"kind": "JobSet", "name": "train", "namespace": "ml"},
        },
        "labels": {"k8s-pod/jobset_sigs_k8s_io/jobset-name": "train"},
    }


ENTRY_PATHS: tuple[tuple[str, ...], ...] = (
    ("insertId",),
    ("logName",),
    ("timestamp",),
    ("receiveTimestamp",),
    ("severity",),
    ("resource",),
    ("resource", "type"),
    ("resource", "labels"),
    ("resource", "labels", "project_id"),
    ("resource", "labels", "cluster_name"),
    ("resource", "labels", "node_pool_name"),
    ("resource", "labels", "node_name"),
    ("labels",),
    ("labels", "k8s-pod/jobset_sigs_k8s_io/jobset-name"),
    ("textPayload",),
    ("jsonPayload",),
    ("jsonPayload", "reason"),
    ("jsonPayload", "involvedObject"),
    ("jsonPayload", "involvedObject", "name"),
    ("protoPayload",),
    ("protoPayload", "methodName"),
    ("protoPayload", "resourceName"),
    ("protoPayload", "status"),
)
ENVELOPE_PATHS: tuple[tuple[str, ...], ...] = (
    ("message",),
    ("message", "data"),
    ("message", "messageId"),
    ("message", "publishTime"),
    ("message", "attributes"),
    ("message", "attributes", "logging.googleapis.com/timestamp"),
    ("subscription",),
)


def hostile_template(insert_id: str, run: str) -> st.SearchStrategy[dict[str, Any]]:
    # Another pool than the valid entries': a hostile entry that is still valid may
    # open an incident of its own, never join the one being counted.
    return st.sampled_from(
        [
            host_error_entry(insert_id, f"gke-hostile{run}-h-1a2b3c4d-0001"),
            preemption_entry(insert_id, "c1", f"gke-c1-spot-pool-1a2b3c4d-{run[:4]}"),
            event_entry(insert_id),
        ]
    )


@st.composite
def log_deliveries(draw: st.DrawFn, run: str) -> Delivery:
    """One hostile delivery for on_log_entry."""
    binary = draw(st.booleans())
    message_id = str(draw(st.integers(0, 10**12)))
    insert_id = f"hostile-{run}-{draw(st.integers(0, 10**9))}"
    kind = draw(st.sampled_from(["bytes", "data-bytes", "data-json", "entry", "envelope", "event"]))
    if kind == "bytes":
        content = draw(st.sampled_from(["application/json", "application/cloudevents+json"]))
        return Delivery(
            draw(st.binary(max_size=64)),
            {"Content-Type": content, "ce-id": message_id} if binary else {"Content-Type": content},
        )
    if kind == "data-bytes":
        return cloud_event(
            envelope(b64(draw(st.binary(max_size=64))), message_id), message_id, binary=binary
        )
    if kind == "data-json":
        value = draw(st.one_of(JSON_VALUES, HOSTILE))
        return cloud_event(envelope(b64(render(value)), message_id), message_id, binary=binary)
    if kind == "entry":
        entry = set_path(
            draw(hostile_template(insert_id, run)),
            draw(st.sampled_from(ENTRY_PATHS)),
            draw(HOSTILE),
        )
        return cloud_event(envelope(b64(render(entry)), message_id), message_id, binary=binary)
    entry = host_error_entry(insert_id, f"gke-hostile{run}-h-1a2b3c4d-0002")
    wrapped = envelope(b64(render(entry)), message_id)
    if kind == "envelope":
        wrapped = set_path(wrapped, draw(st.sampled_from(ENVELOPE_PATHS)), draw(HOSTILE))
        return cloud_event(wrapped, message_id, binary=binary)
    # The event itself (structured mode: functions-framework decodes it).
    where = draw(st.sampled_from(["id", "type", "data", "specversion"]))
    hostile = draw(HOSTILE)
    return cloud_event(wrapped, message_id, binary=False, event={where: hostile})


def valid_log_delivery(run: str, number: int, binary: bool) -> Delivery:
    insert_id = f"valid-{run}-{number}"
    entry = host_error_entry(insert_id, f"gke-valid{run}-p-1a2b3c4d-{number:04x}", number)
    message_id = str(int(hashlib.sha256(insert_id.encode()).hexdigest()[:12], 16))
    made = cloud_event(envelope(b64(render(entry)), message_id), message_id, binary=binary)
    return Delivery(made.body, made.headers, insert_id)


def counted(server: Server, key: str) -> int:
    return sum(i.signal_count for i in server.incidents() if str(i.key) == key)


def deliver_all(
    server: Server, deliveries: list[Delivery], rng: random.Random, path: str = "/"
) -> None:
    """In order, then once more shuffled and concurrently (Pub/Sub redelivers so)."""
    for delivery in deliveries:
        server.post(delivery.body, delivery.headers, path)
    again = list(deliveries)
    rng.shuffle(again)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda d: server.post(d.body, d.headers, path), again))


@st.composite
def mixtures(
    draw: st.DrawFn,
    hostile: Callable[[str], st.SearchStrategy[Delivery]],
    valid: Callable[[str, int, bool], Delivery],
) -> tuple[str, list[Delivery]]:
    run = uuid.uuid4().hex[:8]
    bad = draw(st.lists(hostile(run), min_size=1, max_size=5))
    good = [valid(run, n, draw(st.booleans())) for n in range(draw(st.integers(1, 3)))]
    mixed = list(bad)
    for delivery in good:
        mixed.insert(draw(st.integers(0, len(mixed))), delivery)
    return run, mixed


# --- the seven payloads of issue 22 -------------------------------------------------------


def alertmanager(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {
        "receiver": "loopbreaker",
        "status": "firing",
        "alerts": list(alerts),
        "groupLabels": {},
        "commonLabels": {"loopbreaker": "true"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "version": "4",
        "groupKey": "{}:{}",
        "truncatedAlerts": 0,
    }


def am_alert(
    labels: dict[str, str], fingerprint: str, starts: str = "2026-05-20T07:58:45Z"
) -> dict[str, Any]:
    return {
        "status": "firing",
        "labels": labels,
        "annotations": {"summary": "restarts"},
        "startsAt": starts,
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph",
        "fingerprint": fingerprint,
    }


def cloud_monitoring(incident_id: str) -> dict[str, Any]:
    return {
        "version": "1.2",
        "incident": {
            "incident_id": incident_id,
            "state": "open",
            "started_at": 1779264000,
            "policy_name": "JobSet restarts",
            "metric": {
                "type": "prometheus.googleapis.com/kube_jobset_restarts/counter",
                "labels": {},
            },
            "resource": {
                "type": "prometheus_target",
                "labels": {"project_id": PROJECT, "cluster": "c1"},
            },
            "policy_user_labels": {"workload": "train", "namespace": "ml"},
            "summary": "restarts",
        },
    }


def pubsub_push(data: bytes, message_id: str = "5150") -> dict[str, Any]:
    return {
        "message": {
            "data": b64(data),
            "messageId": message_id,
            "publishTime": "2026-05-20T08:00:01Z",
        },
        "subscription": f"projects/{PROJECT}/subscriptions/alerts",
    }


#: The seven crash sites as LogEntry-sink data (for on_log_entry and replay files).
PREEMPTION_IN_BAD_CLUSTER = preemption_entry("pre-1", "c\ud800", "gke-c-spot-pool-1a2b3c4d-0001")


def seven_dead_letters() -> list[tuple[str, dict[str, Any], str]]:
    """(name, Pub/Sub message as a dead-letter pull holds it, words of the reason)."""
    good = host_error_entry("x", "gke-c-p-1a2b3c4d-0001")
    return [
        ("1-deep-nesting", pubsub_message(b"[" * 1000 + b"]" * 1000, "101"), "nests too deeply"),
        ("2-long-integer", pubsub_message(b"1" * 4301, "102"), "number too long"),
        (
            "3-surrogate-insert-id",
            pubsub_message(render({**good, "insertId": "i\ud800"}), "103"),
            "lone surrogate",
        ),
        (
            "3-surrogate-message-id",
            {**pubsub_message(render(good), "104"), "messageId": "m\ud800"},
            "lone surrogate",
        ),
        (
            "4-surrogate-cluster",
            pubsub_message(render(PREEMPTION_IN_BAD_CLUSTER), "105"),
            "lone surrogate",
        ),
        (
            "5-surrogate-fingerprint",
            pubsub_message(
                render(alertmanager(am_alert({"alertname": "JobSetRestarting"}, "f\ud800"))), "106"
            ),
            "lone surrogate",
        ),
        (
            "6-7-action-request",
            pubsub_message(render({"incident_id": "inc-\ud800", "expires_at": "soon"}), "107"),
            "lone surrogate",
        ),
    ]


def pubsub_message(data: bytes, message_id: str) -> dict[str, Any]:
    return {"data": b64(data), "messageId": message_id, "publishTime": "2026-05-20T08:00:01Z"}


def signed(fields: dict[str, Any], key: str = K.SIGNING_KEY) -> str:
    """An lb1 token over ``fields`` exactly as rendered (hostile values included)."""
    payload = render(dict(sorted(fields.items())))
    part = f"{TOKEN_VERSION}.{base64.urlsafe_b64encode(payload).rstrip(b'=').decode()}"
    mac = hmac.new(key.encode(), part.encode(), hashlib.sha256).digest()
    return f"{part}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def action_fields(incident: Incident, **changes: object) -> dict[str, Any]:
    request = incident.approval_request
    assert request is not None
    t = request.target
    fields: dict[str, Any] = {
        "v": 1,
        "incident_id": incident.id,
        "approval_id": request.id,
        "action": request.action,
        "node": t.node,
        "instance": t.instance,
        "instance_id": t.instance_id,
        "zone": t.zone,
        "project": t.project,
        "expires_at": (datetime.now(UTC) + timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    fields.update(changes)
    return fields


def slack_click(token: object, *, payload: object = None) -> Delivery:
    body = urlencode(
        {"payload": render(payload if payload is not None else K.slack_payload(token)).decode()}
    ).encode()
    headers, body = K.slack_request(body, datetime.now(UTC))
    return Delivery(body, headers)


BEARER = {"Authorization": f"Bearer {WEBHOOK_TOKEN}", "Content-Type": "application/json"}


def refusals(server: Server, event: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(server.new_log()) if line.get("event") == event]


def as_post(delivery: Delivery) -> dict[str, Any]:
    return {"body": delivery.body, "headers": delivery.headers}


def state_of(server: Server, incident: Incident) -> State:
    [found] = [i for i in server.incidents() if i.id == incident.id]
    return found.state
