"""Hostile input at every entry point: no 5xx, no traceback, every valid entry counted once.

Real functions-framework servers (gunicorn, as deployed) serve ``functions/main.py``:
``on_log_entry``, ``on_alertmanager_webhook``, ``on_chat_action`` and
``on_remediation_request``, each on its own SQLite store. The seven payloads of issue 22
are named regression cases; then hypothesis sends each entry point random bytes, random
JSON, and plausible payloads with one field made hostile (a wrong type, nesting past the
limit, a number too long for Python, NaN, a lone surrogate, NUL, a 1 MiB string),
interleaved with valid entries, then redelivers the lot shuffled and concurrently. The
rule checked: bad input is acknowledged (CloudEvents) or refused with a 4xx naming it;
a 5xx only ever for a transient failure whose retry succeeds; no traceback in the server
log; and each valid entry is counted exactly once. ``loopbreaker replay`` gets the same
mixtures from a file.

``make test`` runs the derandomized, bounded ``ci`` profile; ``make bench`` (or anyone)
selects the longer one with ``LOOPBREAKER_HYPOTHESIS_PROFILE=long``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import os
import random
import re
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import chatkit as K
import pytest
from fakeservers.google_certs import CertsServer
from harness.functions import FunctionServer, start_function
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from strategies import json_values

from loopbreaker.app.chat_actions import REFUSAL_HEADER
from loopbreaker.approval.requests import TOKEN_VERSION
from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.replay import run as replay
from loopbreaker.settings.load import load_settings

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
PUBSUB = "google.cloud.pubsub.topic.v1.messagePublished"
PROJECT = "hostile-project"
WEBHOOK_TOKEN = "hostile-webhook-token-0123"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MIB = 1 << 20

# --- profiles -----------------------------------------------------------------------------

_COMMON: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
}
PROFILES = {
    # make test: the same examples every run, few enough to stay within seconds.
    "ci": settings(
        derandomize=True,
        max_examples=10,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        **_COMMON,
    ),
    # make bench, or LOOPBREAKER_HYPOTHESIS_PROFILE=long: fresh examples, many more.
    "long": settings(max_examples=300, **_COMMON),
}
PROFILE_NAME = os.environ.get("LOOPBREAKER_HYPOTHESIS_PROFILE", "ci")
if PROFILE_NAME not in PROFILES:
    raise ValueError(
        f"LOOPBREAKER_HYPOTHESIS_PROFILE={PROFILE_NAME!r}: choose one of {sorted(PROFILES)}"
    )
PROFILE = PROFILES[PROFILE_NAME]

# --- rendering hostile JSON ---------------------------------------------------------------

# Values json.dumps cannot write are planted as marker strings and put in afterwards.
_MARKER = re.compile(r'"@@(DEEP|DIGITS|RAW):([^@]*)@@"')
LONE_SURROGATES = ("\ud800", "\udbff", "\udc00", "\udfff")


def deep(levels: int) -> str:
    return f"@@DEEP:{levels}@@"


def digits(count: int) -> str:
    return f"@@DIGITS:{count}@@"


def raw(text: str) -> str:
    return f"@@RAW:{text}@@"


def render(value: object) -> bytes:
    """JSON text of ``value``: lone surrogates as ``\\udXXX`` escapes (ensure_ascii, as a
    hostile producer writes them), markers replaced by what json.dumps refuses to write."""

    def expand(match: re.Match[str]) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind == "DEEP":
            return "[" * int(arg) + "]" * int(arg)
        if kind == "DIGITS":
            return "7" * int(arg)
        return arg

    return _MARKER.sub(expand, json.dumps(value)).encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def set_path(document: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    """A copy of ``document`` with ``value`` at ``path`` (intermediate objects made)."""
    out = json.loads(json.dumps(document))
    here = out
    for key in path[:-1]:
        if not isinstance(here.get(key), dict):
            here[key] = {}
        here = here[key]
    here[path[-1]] = value
    return out


# --- strategies ---------------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = json_values(scalars=_SCALARS, keys=st.text(max_size=6), max_leaves=8)


def _with_surrogate(parts: tuple[str, str, str]) -> str:
    return parts[0] + parts[1] + parts[2]


HOSTILE = st.one_of(
    JSON_VALUES,
    st.integers(65, 3000).map(deep),
    st.integers(4301, 6000).map(digits),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]).map(raw),
    st.tuples(st.text(max_size=3), st.sampled_from(LONE_SURROGATES), st.text(max_size=3)).map(
        _with_surrogate
    ),
    st.tuples(st.text(max_size=3), st.just("\x00"), st.text(max_size=3)).map(_with_surrogate),
    st.just("x" * MIB),
)


# --- the servers --------------------------------------------------------------------------


@dataclass
class Server:
    function: FunctionServer
    store: Path
    _seen: int = 0

    @property
    def url(self) -> str:
        return self.function.url

    def new_log(self) -> str:
        """What the server printed since the last call."""
        text = self.function.log()
        fresh, self._seen = text[self._seen :], len(text)
        return fresh

    def post(self, body: bytes, headers: dict[str, str], path: str = "/") -> tuple[int, bytes]:
        """POST; a 5xx must be a transient failure whose retry succeeds."""
        status, reply, _ = self.post_full(body, headers, path)
        return status, reply

    def post_full(
        self, body: bytes, headers: dict[str, str], path: str = "/"
    ) -> tuple[int, bytes, dict[str, str]]:
        for _ in range(5):
            status, reply, answer = _post(self.url + path, body, headers)
            if status < 500:
                return status, reply, answer
        raise AssertionError(f"5xx on every retry: {status} {reply[:300]!r}")

    def click(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """on_chat_action's security status: the reply's, or for a refusal of a verified
        click (answered 200 so the clicker reads it) the one its refusal header names."""
        status, reply, answer = self.post_full(body, headers)
        refusal = answer.get(REFUSAL_HEADER)
        return (int(refusal), reply) if status == 200 and refusal else (status, reply)

    def incidents(self) -> list[Incident]:
        store = SqliteStore(self.store)
        try:
            return store.list_incidents(limit=10_000)
        finally:
            store.close()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with DIRECT.open(request, timeout=60) as response:
            return int(response.status), response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read(), dict(exc.headers)
    except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as exc:
        # No answer at all: as bad as a 5xx (the caller retries, then fails naming it).
        return 599, repr(exc).encode(), {}


@dataclass
class Lab:
    log_entry: Server
    webhook: Server
    chat: Server
    remediation: Server
    certs: CertsServer
    #: The faulty-host incident awaiting approval in the chat and remediation stores.
    awaiting: Incident


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("hostile")
    faulty = root / "faulty.sqlite"
    awaiting = K.make_faulty_store(faulty)
    base = {
        "LOOPBREAKER_LIVE_SOURCES": "false",
        "LOOPBREAKER_PROJECT": PROJECT,
        "LOOPBREAKER_NOTIFIER": "log",
        "LOOPBREAKER_ALERT_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
        # Nothing listens there: no hostile click may ever publish.
        "PUBSUB_EMULATOR_HOST": "127.0.0.1:9",
    }
    with CertsServer() as certs:
        chat_env = {
            **K.CHAT_ENV,
            "LOOPBREAKER_GOOGLE_CHAT_CERTS_URL": certs.certs_url,
            "LOOPBREAKER_REMEDIATION_TOPIC": f"projects/{PROJECT}/topics/remediation",
        }
        specs = {
            "log_entry": ("on_log_entry", "cloudevent", root / "log.sqlite", {}),
            "webhook": ("on_alertmanager_webhook", "http", root / "alerts.sqlite", {}),
            "chat": (
                "on_chat_action",
                "http",
                K.copy_store(faulty, root / "chat.sqlite"),
                chat_env,
            ),
            "remediation": (
                "on_remediation_request",
                "cloudevent",
                K.copy_store(faulty, root / "remediation.sqlite"),
                chat_env,
            ),
        }
        started: dict[str, Server] = {}
        errors: list[BaseException] = []

        def start(name: str) -> None:
            target, kind, store, extra = specs[name]
            env = {**base, **extra, "LOOPBREAKER_STORE": f"sqlite:{store}"}
            try:
                started[name] = Server(start_function(target, SOURCE, kind, env), store)
            except BaseException as exc:  # reported below, after every start returned
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(name,)) for name in specs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            if errors:
                raise errors[0]
            yield Lab(awaiting=awaiting, certs=certs, **started)
        finally:
            # In parallel: each gunicorn takes a few seconds to wind down.
            stoppers = [threading.Thread(target=s.function.stop) for s in started.values()]
            for thread in stoppers:
                thread.start()
            for thread in stoppers:
                thread.join()


def assert_no_traceback(*servers: Server) -> None:
    for server in servers:
        log = server.new_log()
        assert "Traceback" not in log, log[-4000:]
        assert "Exception on /" not in log, log[-4000:]


def log_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


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


def _hostile_template(insert_id: str, run: str) -> st.SearchStrategy[dict[str, Any]]:
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
            draw(_hostile_template(insert_id, run)),
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
        ("1-deep-nesting", _message(b"[" * 1000 + b"]" * 1000, "101"), "nests too deeply"),
        ("2-long-integer", _message(b"1" * 4301, "102"), "number too long"),
        (
            "3-surrogate-insert-id",
            _message(render({**good, "insertId": "i\ud800"}), "103"),
            "lone surrogate",
        ),
        (
            "3-surrogate-message-id",
            {**_message(render(good), "104"), "messageId": "m\ud800"},
            "lone surrogate",
        ),
        (
            "4-surrogate-cluster",
            _message(render(PREEMPTION_IN_BAD_CLUSTER), "105"),
            "lone surrogate",
        ),
        (
            "5-surrogate-fingerprint",
            _message(
                render(alertmanager(am_alert({"alertname": "JobSetRestarting"}, "f\ud800"))), "106"
            ),
            "lone surrogate",
        ),
        (
            "6-7-action-request",
            _message(render({"incident_id": "inc-\ud800", "expires_at": "soon"}), "107"),
            "lone surrogate",
        ),
    ]


def _message(data: bytes, message_id: str) -> dict[str, Any]:
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


def _refusals(server: Server, event: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(server.new_log()) if line.get("event") == event]


def test_1_deep_nesting_is_acknowledged_or_refused_everywhere(lab: Lab) -> None:
    deep_data = b64(b"[" * 1000 + b"]" * 1000)
    for server, event in (
        (lab.log_entry, "entry_rejected"),
        (lab.remediation, "remediation_request_rejected"),
    ):
        server.new_log()
        for binary in (False, True):
            status, _ = server.post(
                **_as_post(cloud_event(envelope(deep_data, "11"), "11", binary=binary))
            )
            assert status == 200  # acknowledged: Pub/Sub must not redeliver it
        lines = _refusals(server, event)
        assert len(lines) == 2 and all("nests too deeply" in line["reason"] for line in lines)
    # A Cloud Monitoring notification through a Pub/Sub push channel.
    status, reply = lab.webhook.post(render(pubsub_push(b"[" * 1000 + b"]" * 1000)), BEARER)
    assert status == 400 and "nests too deeply" in json.loads(reply)["error"]
    # The structured event itself too deep for functions-framework's own decoding.
    body = (
        b'{"specversion":"1.0","type":"'
        + PUBSUB.encode()
        + b'","source":"s","id":"12","data":'
        + b"[" * 5000
        + b"]" * 5000
        + b"}"
    )
    status, reply = lab.log_entry.post(body, {"Content-Type": "application/cloudevents+json"})
    assert status == 400 and b"nests too deeply" in reply
    assert_no_traceback(lab.log_entry, lab.remediation, lab.webhook)


def test_2_a_4301_digit_number_is_a_400(lab: Lab) -> None:
    status, reply = lab.webhook.post(b"1" * 4301, BEARER)
    assert status == 400 and "number too long" in json.loads(reply)["error"]
    lab.log_entry.new_log()
    status, _ = lab.log_entry.post(
        **_as_post(cloud_event(envelope(b64(b"1" * 4301), "21"), "21", binary=True))
    )
    assert status == 200
    [line] = _refusals(lab.log_entry, "entry_rejected")
    assert "number too long" in line["reason"] and line["message_id"] == "21"
    assert_no_traceback(lab.log_entry, lab.webhook)


def test_3_lone_surrogates_in_identifiers_are_refused_not_hashed(lab: Lab) -> None:
    good = host_error_entry("ok", "gke-c-p-1a2b3c4d-0001")
    bad_insert = b64(render({**good, "insertId": "i\ud800"}))
    lab.log_entry.new_log()
    assert (
        lab.log_entry.post(**_as_post(cloud_event(envelope(bad_insert, "31"), "31", binary=True)))[
            0
        ]
        == 200
    )
    # The messageId of a structured event, which functions-framework decodes itself.
    bad_id = cloud_event(envelope(b64(render(good)), "m\ud800"), "32", binary=False)
    assert lab.log_entry.post(**_as_post(bad_id))[0] == 200
    lines = _refusals(lab.log_entry, "entry_rejected")
    assert len(lines) == 2
    assert "lone surrogate \\ud800 at $.insertId" in lines[0]["reason"]
    assert "lone surrogate \\ud800 at $.message.messageId" in lines[1]["reason"]
    # A Cloud Monitoring push with the same messageId.
    status, reply = lab.webhook.post(
        render(pubsub_push(render(cloud_monitoring("i-1")), "m\ud800")), BEARER
    )
    assert status == 400
    assert "lone surrogate \\ud800 at $.message.messageId" in json.loads(reply)["error"]
    assert_no_traceback(lab.log_entry, lab.webhook)


def test_4_lone_surrogates_in_stored_fields_never_reach_the_store(lab: Lab) -> None:
    lab.log_entry.new_log()
    data = b64(render(PREEMPTION_IN_BAD_CLUSTER))
    assert (
        lab.log_entry.post(**_as_post(cloud_event(envelope(data, "41"), "41", binary=True)))[0]
        == 200
    )
    [line] = _refusals(lab.log_entry, "entry_rejected")
    assert "lone surrogate \\ud800 at $.resource.labels.cluster_name" in line["reason"]
    labels = {"alertname": "KubeNodeNotReady", "node": "n\ud800", "cluster": "c1"}
    status, reply = lab.webhook.post(render(alertmanager(am_alert(labels, "fp41"))), BEARER)
    assert status == 400 and "lone surrogate" in json.loads(reply)["error"]
    assert all("\\ud800" not in str(i.key) for i in lab.log_entry.incidents())
    assert_no_traceback(lab.log_entry, lab.webhook)


def test_5_lone_surrogates_in_alert_identities_are_a_400(lab: Lab) -> None:
    labels = {"alertname": "JobSetRestarting", "workload": "train", "namespace": "ml"}
    for body in (
        render(alertmanager(am_alert(labels, "f\ud800"))),
        render(cloud_monitoring("i\udfff")),
    ):
        status, reply = lab.webhook.post(body, BEARER)
        assert status == 400 and "lone surrogate" in json.loads(reply)["error"]
    assert_no_traceback(lab.webhook)


@pytest.mark.parametrize("expires_at", ["soon", "2026-02-30T00:00:00Z", raw("1e-22")])
def test_6_a_signed_request_with_a_bad_expiry_is_a_400(lab: Lab, expires_at: str) -> None:
    click = slack_click(signed(action_fields(lab.awaiting, expires_at=expires_at)))
    status, reply = lab.chat.click(click.body, click.headers)
    assert status == 400 and "expires_at" in json.loads(reply)["text"]
    assert _state(lab.chat, lab.awaiting) is State.AWAITING_APPROVAL
    assert_no_traceback(lab.chat)


def test_7_a_signed_request_whose_incident_id_holds_a_lone_surrogate_is_a_400(lab: Lab) -> None:
    click = slack_click(signed(action_fields(lab.awaiting, incident_id="inc-\ud800")))
    status, reply = lab.chat.click(click.body, click.headers)
    assert status == 400 and "incident_id is not valid Unicode" in json.loads(reply)["text"]
    assert _state(lab.chat, lab.awaiting) is State.AWAITING_APPROVAL
    assert_no_traceback(lab.chat)


def test_credentials_that_are_not_text_are_a_401(lab: Lab) -> None:
    body = render(alertmanager())
    status, _ = lab.webhook.post(
        body, {"Content-Type": "application/json"}, "/?auth_token=%ff%ed%a0%80"
    )
    assert status == 401
    # Header bytes beyond ASCII (latin-1 on the wire) in Slack's signature.
    click = slack_click("lb1.x.y")
    status, reply = lab.chat.post(click.body, {**click.headers, "X-Slack-Signature": "v0=\xff\xe9"})
    assert status == 401 and "do not verify" in json.loads(reply)["text"]
    assert_no_traceback(lab.webhook, lab.chat)


def test_a_transient_failure_is_a_5xx_for_the_retry_and_no_traceback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    import functions_framework
    from fakes import FakeStore

    from loopbreaker.app.bootstrap import build_responder
    from loopbreaker.errors import TransientError

    monkeypatch.setenv("LOOPBREAKER_STORE", f"sqlite:{tmp_path / 'incidents.sqlite'}")
    monkeypatch.setenv("LOOPBREAKER_LIVE_SOURCES", "false")
    client = functions_framework.create_app("on_log_entry", str(SOURCE), "cloudevent").test_client()
    main = sys.modules["main"]
    try:
        store = FakeStore(fail={"ingest": [TransientError("Firestore unavailable")]})
        main._built[build_responder] = build_responder(load_settings({}), store=store)
        delivery = valid_log_delivery("transient", 1, binary=True)
        first = client.post("/", data=delivery.body, headers=delivery.headers)
        assert first.status_code == 500 and b"Firestore unavailable" in first.data
        assert client.post("/", data=delivery.body, headers=delivery.headers).status_code == 200
        err = capsys.readouterr().err
        assert "Traceback" not in err
        # Flask logs an escaped exception with its traceback: there is none.
        assert [r.getMessage() for r in caplog.records if r.exc_info] == []
        [retry] = [line for line in log_lines(err) if line.get("event") == "entry_retry"]
        assert retry["severity"] == "ERROR" and "Firestore unavailable" in retry["reason"]
        assert len(store.incidents) == 1
    finally:
        main._built.clear()


def test_a_bug_in_loopbreaker_is_not_passed_off_as_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The catch-all for what functions-framework cannot read stops at our own code."""
    import functions_framework

    from loopbreaker.app.bootstrap import build_responder

    monkeypatch.setenv("LOOPBREAKER_STORE", f"sqlite:{tmp_path / 'incidents.sqlite'}")
    monkeypatch.setenv("LOOPBREAKER_LIVE_SOURCES", "false")
    client = functions_framework.create_app("on_log_entry", str(SOURCE), "cloudevent").test_client()
    main = sys.modules["main"]
    try:
        responder = build_responder(load_settings({}))

        def broken(delivery: object) -> None:
            raise KeyError("a bug")

        monkeypatch.setattr(responder, "handle_delivery", broken)
        main._built[build_responder] = responder
        delivery = valid_log_delivery("bug", 1, binary=True)
        assert client.post("/", data=delivery.body, headers=delivery.headers).status_code == 500
        # Flask's own "Exception on /" record, with the traceback.
        [record] = [r for r in caplog.records if r.exc_info and r.exc_info[0] is KeyError]
        assert "Exception on /" in record.getMessage()
    finally:
        main._built.clear()


# The real stores (the recording fake in tests/fakes.py keeps Python strings as they are).
@pytest.mark.parametrize("store_factory", ["sqlite", "firestore"], indirect=True)
def test_stores_keep_every_text_valid_utf8_whatever_a_caller_hands_them(
    store_factory: Callable[[], Any], tmp_path: Path
) -> None:
    """Defence in depth below the decoders: a lone surrogate that reaches a store through
    its Python API is escaped the one consistent way, never written raw, never a crash."""
    from loopbreaker import incidents
    from loopbreaker.incidents import Arrival, Policy
    from loopbreaker.model import HostFailureRecord, Signal, SignalKind

    store = store_factory()
    at = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
    signal = Signal(
        kind=SignalKind.JOB_RESTARTING,
        timestamp=at,
        project="p/\ud800",
        cluster="c\ud800",
        namespace="ml",
        workload="w\udfff",
        node="n\ud800",
        insert_id="i\ud800",
        log_name="projects/p/logs/events",
    )
    key = incidents.key_for(signal)
    assert key is not None and str(key) == "p%2F\\ud800/c\\ud800/workload/ml/w\\udfff"
    entry = {"insertId": "i\ud800", "logName": signal.log_name, "timestamp": "x"}
    arrival = Arrival(
        key=key,
        signal=signal,
        event_time=at,
        now=at,
        entry_id=incidents.entry_id(entry),
        message_id="m\ud800",
        policy=Policy(),
    )
    first = store.ingest(arrival)
    assert first.created and first.incident is not None
    assert store.ingest(arrival).duplicate  # the same escaped ids: recognised again
    stored = store.get(first.incident.id)
    assert stored is not None and stored.key == key
    record = HostFailureRecord("h\ud800", "n\ud800", at, first.incident.id)
    store.record_host_failures([record])
    [found] = store.host_history(["h\ud800"])
    assert found.host == "h\\ud800"
    # Ids no store can hold are incidents that do not exist.
    for forged in ("inc-\ud800", "a/b", "__x__", ""):
        assert store.get(forged) is None
        assert store.update(forged, lambda i: i).incident is None
    if isinstance(store, SqliteStore):
        import sqlite3

        raw = sqlite3.connect(store.path)
        raw.text_factory = bytes
        for table in ("incidents", "signals", "dedup", "host_failures"):
            for row in raw.execute(f"SELECT * FROM {table}"):
                for column in row:
                    if isinstance(column, bytes):
                        column.decode("utf-8")  # never a raw surrogate
        raw.close()


def _as_post(delivery: Delivery) -> dict[str, Any]:
    return {"body": delivery.body, "headers": delivery.headers}


def _state(server: Server, incident: Incident) -> State:
    [found] = [i for i in server.incidents() if i.id == incident.id]
    return found.state


# --- properties, one per entry point -------------------------------------------------------


def survives(server: Any, mixture: tuple[str, list[Delivery]], seed: int, key: str) -> None:
    """Every delivery answered without a 5xx that stays one, each valid entry counted once
    in the incident of ``key`` (after a shuffled, concurrent redelivery), no traceback."""
    rng = random.Random(seed)  # drawn up front: shuffles never change what is drawn
    _, deliveries = mixture
    deliver_all(server, deliveries, rng)
    valid = {d.valid for d in deliveries if d.valid}
    assert counted(server, key) == len(valid)
    assert_no_traceback(server)


@PROFILE
@given(mixture=mixtures(log_deliveries, valid_log_delivery), seed=st.integers(0, 2**32))
def test_on_log_entry_survives_anything(
    lab: Lab, mixture: tuple[str, list[Delivery]], seed: int
) -> None:
    run, _ = mixture
    survives(lab.log_entry, mixture, seed, f"{PROJECT}/-/pool/gke-valid{run}-p")


AM_PATHS: tuple[tuple[str, ...], ...] = (
    ("version",),
    ("alerts",),
    ("commonLabels",),
    ("alerts", "0"),
    ("alerts", "0", "labels"),
    ("alerts", "0", "labels", "node"),
    ("alerts", "0", "labels", "workload"),
    ("alerts", "0", "labels", "loopbreaker_signal"),
    ("alerts", "0", "annotations"),
    ("alerts", "0", "status"),
    ("alerts", "0", "startsAt"),
    ("alerts", "0", "endsAt"),
    ("alerts", "0", "fingerprint"),
)
CM_PATHS: tuple[tuple[str, ...], ...] = (
    ("incident",),
    ("incident", "incident_id"),
    ("incident", "state"),
    ("incident", "started_at"),
    ("incident", "ended_at"),
    ("incident", "resource"),
    ("incident", "resource", "labels"),
    ("incident", "metric"),
    ("incident", "metric", "type"),
    ("incident", "policy_user_labels"),
    ("incident", "policy_name"),
    ("incident", "summary"),
)


def _set_alert_path(
    document: dict[str, Any], path: tuple[str, ...], value: object
) -> dict[str, Any]:
    if path[:2] == ("alerts", "0") and len(path) > 2:
        out = json.loads(json.dumps(document))
        out["alerts"][0] = set_path(out["alerts"][0], path[2:], value)
        return out
    if path == ("alerts", "0"):
        out = json.loads(json.dumps(document))
        out["alerts"][0] = value
        return out
    return set_path(document, path, value)


@st.composite
def webhook_deliveries(draw: st.DrawFn, run: str) -> Delivery:
    kind = draw(st.sampled_from(["bytes", "json", "alertmanager", "cloud-monitoring", "push"]))
    if kind == "bytes":
        return Delivery(draw(st.binary(max_size=64)), BEARER)
    if kind == "json":
        return Delivery(render(draw(st.one_of(JSON_VALUES, HOSTILE))), BEARER)
    labels = {"alertname": "JobSetRestarting", "workload": f"hostile-{run}", "namespace": "ml"}
    am = alertmanager(am_alert(labels, f"h{draw(st.integers(0, 10**9))}"))
    cm = cloud_monitoring(f"hostile-{run}-{draw(st.integers(0, 10**9))}")
    if kind == "alertmanager":
        body = render(_set_alert_path(am, draw(st.sampled_from(AM_PATHS)), draw(HOSTILE)))
    elif kind == "cloud-monitoring":
        body = render(set_path(cm, draw(st.sampled_from(CM_PATHS)), draw(HOSTILE)))
    else:
        inner = draw(st.sampled_from([am, cm]))
        push = pubsub_push(render(inner), str(draw(st.integers(0, 10**9))))
        push = set_path(push, draw(st.sampled_from(ENVELOPE_PATHS)), draw(HOSTILE))
        body = render(push)
    return Delivery(body, BEARER)


def valid_alert(run: str, number: int, via_push: bool) -> Delivery:
    labels = {
        "alertname": "LoopbreakerJobSetRestartLoop",
        "loopbreaker_signal": "restart_loop",
        "workload": f"valid-{run}",
        "namespace": "ml",
        "cluster": "c1",
    }
    fingerprint = f"{run}{number:08x}"
    body = render(alertmanager(am_alert(labels, fingerprint, f"2026-05-20T07:5{number}:00Z")))
    if via_push:
        body = render(pubsub_push(body, str(int(fingerprint, 16))))
    return Delivery(body, BEARER, fingerprint)


@PROFILE
@given(mixture=mixtures(webhook_deliveries, valid_alert), seed=st.integers(0, 2**32))
def test_on_alertmanager_webhook_survives_anything(
    lab: Lab, mixture: tuple[str, list[Delivery]], seed: int
) -> None:
    run, _ = mixture
    survives(lab.webhook, mixture, seed, f"{PROJECT}/c1/workload/ml/valid-{run}")


SLACK_PATHS: tuple[tuple[str, ...], ...] = (
    ("type",),
    ("response_url",),
    ("user",),
    ("user", "id"),
    ("user", "username"),
    ("actions",),
    ("container",),
    ("container", "message_ts"),
)
CHAT_PATHS: tuple[tuple[str, ...], ...] = (
    ("type",),
    ("user",),
    ("user", "email"),
    ("user", "displayName"),
    ("common",),
    ("common", "invokedFunction"),
    ("common", "parameters"),
    ("common", "parameters", "action_request"),
    ("action",),
    ("action", "parameters"),
    ("message",),
    ("message", "name"),
)
TOKEN_FIELDS = (
    "v",
    "incident_id",
    "approval_id",
    "action",
    "node",
    "instance",
    "instance_id",
    "zone",
    "project",
    "expires_at",
)


@st.composite
def chat_deliveries(draw: st.DrawFn, lab: Lab) -> Delivery:
    token = draw(
        st.one_of(
            st.text(max_size=40),
            HOSTILE,
            st.builds(
                lambda name, value: signed(action_fields(lab.awaiting, **{name: value})),
                st.sampled_from(TOKEN_FIELDS),
                HOSTILE,
            ),
        )
    )
    kind = draw(st.sampled_from(["slack", "slack-body", "slack-header", "chat", "chat-token"]))
    if kind == "slack":
        payload = K.slack_payload(token)
        if draw(st.booleans()):
            payload = set_path(payload, draw(st.sampled_from(SLACK_PATHS)), draw(HOSTILE))
        return slack_click(token, payload=payload)
    if kind == "slack-body":
        headers, body = K.slack_request(draw(st.binary(max_size=64)), datetime.now(UTC))
        return Delivery(body, headers)
    if kind == "slack-header":
        click = slack_click(token)
        name = draw(st.sampled_from(["X-Slack-Signature", "X-Slack-Request-Timestamp"]))
        # Header bytes beyond ASCII arrive as latin-1 text.
        value = draw(
            st.text(
                alphabet=st.characters(max_codepoint=255, exclude_characters="\r\n"), max_size=30
            )
        )
        return Delivery(click.body, {**click.headers, name: value})
    event = json.loads(K.chat_event(token if isinstance(token, str) else "x"))
    event["common"]["parameters"]["action_request"] = token
    if draw(st.booleans()):
        event = set_path(event, draw(st.sampled_from(CHAT_PATHS)), draw(HOSTILE))
    body = render(event)
    if kind == "chat":
        bearer = lab.certs.token(K.AUDIENCE)
    else:
        header = base64.urlsafe_b64encode(render(draw(st.one_of(JSON_VALUES, HOSTILE)))).decode()
        bearer = draw(st.sampled_from([f"{header}.e30.c2ln", "not.a.jwt", header]))[:16384]
    return Delivery(body, {"Content-Type": "application/json", "Authorization": f"Bearer {bearer}"})


@PROFILE
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_on_chat_action_survives_anything(lab: Lab, data: st.DataObject, seed: int) -> None:
    rng = random.Random(seed)  # drawn up front: shuffles never change what is drawn
    deliveries = data.draw(st.lists(chat_deliveries(lab), min_size=1, max_size=5))
    for delivery in deliveries:
        status, reply = lab.chat.click(delivery.body, delivery.headers)
        # 4xx, each naming the problem (gunicorn itself answers 431 to a header over 8 KiB).
        assert 400 <= status < 500, (status, reply[:300])
    rng.shuffle(deliveries)
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda d: lab.chat.click(d.body, d.headers)[0], deliveries))
    assert all(400 <= s < 500 for s in statuses), statuses
    # No hostile click decides anything.
    assert _state(lab.chat, lab.awaiting) is State.AWAITING_APPROVAL
    assert_no_traceback(lab.chat)


REQUEST_PATHS: tuple[tuple[str, ...], ...] = (
    ("incident_id",),
    ("approval_id",),
    ("dedup_id",),
    ("action",),
    ("target",),
    ("target", "node"),
    ("target", "instance"),
    ("target", "instance_id"),
    ("target", "zone"),
    ("target", "project"),
    ("target", "host_known"),
)


@st.composite
def remediation_deliveries(draw: st.DrawFn, lab: Lab) -> Delivery:
    request = lab.awaiting.approval_request
    assert request is not None
    plausible = {
        "incident_id": lab.awaiting.id,
        "approval_id": request.id,
        "dedup_id": f"{lab.awaiting.id}:{request.id}",
        "action": request.action,
        "target": request.target.to_dict(),
    }
    kind = draw(st.sampled_from(["bytes", "json", "request"]))
    if kind == "bytes":
        data = draw(st.binary(max_size=64))
    elif kind == "json":
        data = render(draw(st.one_of(JSON_VALUES, HOSTILE)))
    else:
        data = render(set_path(plausible, draw(st.sampled_from(REQUEST_PATHS)), draw(HOSTILE)))
    message_id = str(draw(st.integers(0, 10**9)))
    return cloud_event(envelope(b64(data), message_id), message_id, binary=draw(st.booleans()))


@PROFILE
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_on_remediation_request_survives_anything(lab: Lab, data: st.DataObject, seed: int) -> None:
    rng = random.Random(seed)  # drawn up front: shuffles never change what is drawn
    deliveries = data.draw(st.lists(remediation_deliveries(lab), min_size=1, max_size=5))
    for delivery in deliveries:
        status, reply = lab.remediation.post(delivery.body, delivery.headers)
        assert status == 200, (status, reply[:300])  # acknowledged, never retried
    rng.shuffle(deliveries)
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(lambda d: lab.remediation.post(d.body, d.headers)[0], deliveries)) == {
            200
        }
    # Nothing was acted on: the incident still awaits its approval, with no plan.
    [incident] = [i for i in lab.remediation.incidents() if i.id == lab.awaiting.id]
    assert incident.state is State.AWAITING_APPROVAL and incident.remediation is None
    assert_no_traceback(lab.remediation)


# --- replay: the same mixtures from a file ---------------------------------------------------


@st.composite
def replay_items(draw: st.DrawFn, run: str) -> bytes:
    """One line of a dead-letter file: a hostile item (anything a file can hold)."""
    kind = draw(st.sampled_from(["text", "json", "entry", "message"]))
    if kind == "text":
        # Never blank, never JSON: "#" starts no JSON text.
        return b"#" + draw(st.binary(max_size=40)).replace(b"\n", b" ")
    if kind == "json":
        return render(draw(st.one_of(JSON_VALUES, HOSTILE)))
    insert_id = f"hostile-{run}-{draw(st.integers(0, 10**9))}"
    entry = set_path(
        draw(_hostile_template(insert_id, run)), draw(st.sampled_from(ENTRY_PATHS)), draw(HOSTILE)
    )
    if kind == "entry":
        return render(entry)
    message = set_path(
        {"message": _message(render(entry), str(draw(st.integers(0, 10**9))))},
        draw(st.sampled_from(ENVELOPE_PATHS)),
        draw(HOSTILE),
    )
    return render(message)


def valid_replay_item(run: str, number: int, as_message: bool) -> bytes:
    entry = host_error_entry(
        f"valid-{run}-{number}", f"gke-valid{run}-p-1a2b3c4d-{number:04x}", number
    )
    if as_message:
        return render(
            {"ackId": f"ack-{number}", "message": _message(render(entry), f"{number + 1}")}
        )
    return render(entry)


@PROFILE
@given(data=st.data(), as_array=st.booleans(), seed=st.integers(0, 2**32))
def test_replay_reads_every_mixture_to_the_end(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    as_array: bool,
    seed: int,
) -> None:
    rng = random.Random(seed)
    run = uuid.uuid4().hex[:8]
    bad = data.draw(st.lists(replay_items(run), min_size=1, max_size=6))
    good = [
        valid_replay_item(run, n, data.draw(st.booleans()))
        for n in range(data.draw(st.integers(1, 4)))
    ]
    lines = list(bad)
    for item in good:
        lines.insert(data.draw(st.integers(0, len(lines))), item)
    folder = tmp_path_factory.mktemp("replay")
    path = folder / ("dead.json" if as_array else "dead.jsonl")
    if as_array:
        # An array only holds JSON: the raw-text items become strings.
        items = [
            render(line.decode("utf-8", "replace")) if line[:1] == b"#" else line for line in lines
        ]
        path.write_bytes(b"[" + b",\n".join(items) + b"]")
    else:
        path.write_bytes(b"\n".join(lines) + b"\n")
    settings = load_settings({"LOOPBREAKER_PROJECT": PROJECT})
    store = folder / "incidents.sqlite"
    first = replay.run([path], settings=settings, store_path=store)
    assert first.read == len(lines) and first.unreadable == []
    assert first.accepted + first.duplicates + first.rejected_total == first.read
    [incident] = [i for i in first.incidents if str(i.key) == f"{PROJECT}/-/pool/gke-valid{run}-p"]
    assert incident.signal_count == len(good)
    assert {r["index"] for r in first.rejected} <= set(range(len(lines)))
    # The same items again, shuffled, into the same store: every valid one a duplicate.
    rng.shuffle(lines)
    again = folder / "again.jsonl"
    again.write_bytes(b"\n".join(lines) + b"\n")
    second = replay.run([again], settings=settings, store_path=store)
    [incident] = [i for i in second.incidents if str(i.key) == f"{PROJECT}/-/pool/gke-valid{run}-p"]
    assert incident.signal_count == len(good)


if __name__ == "__main__":  # pragma: no cover - a convenience for running one profile
    sys.exit(pytest.main([__file__, "-q"]))
