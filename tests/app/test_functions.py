"""functions/main.py through functions-framework's own app, with SDK-built CloudEvents."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import functions_framework
import pytest
from cloudevents.conversion import to_binary, to_structured
from cloudevents.http import CloudEvent
from fakes import FakeStore

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.errors import TransientError
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.settings.load import Runtime, load_settings

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
PUBSUB = "google.cloud.pubsub.topic.v1.messagePublished"
ENTRY = {
    "insertId": "fjpkr2e6yi26",
    "logName": "projects/proj/logs/cloudaudit.googleapis.com%2Fsystem_event",
    "resource": {"type": "gce_instance", "labels": {"project_id": "proj", "zone": "us-east1-d"}},
    "timestamp": "2026-05-20T08:00:00.102868Z",
    "protoPayload": {
        "methodName": "compute.instances.hostError",
        "resourceName": "projects/proj/zones/us-east1-d/instances/gke-c-p-1a2b3c4d-0001",
    },
}


def b64(payload: object) -> str:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return base64.b64encode(raw).decode()


def pubsub_event(data: str, message_id: str = "4242", **message: Any) -> CloudEvent:
    body = {
        "message": {
            "data": data,
            "messageId": message_id,
            "publishTime": "2026-05-20T08:00:01Z",
            "attributes": {"logging.googleapis.com/timestamp": ENTRY["timestamp"]},
            **message,
        },
        "subscription": "projects/proj/subscriptions/sink",
    }
    attributes = {"type": PUBSUB, "source": "//pubsub.googleapis.com/projects/proj/topics/t"}
    return CloudEvent({**attributes, "id": message_id}, body)


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "incidents.sqlite"
    monkeypatch.setenv("LOOPBREAKER_STORE", f"sqlite:{path}")
    monkeypatch.setenv("LOOPBREAKER_SETTLE_TIME", "0s")
    # Diagnose from the incident's own signals: no calls to Google APIs from tests.
    monkeypatch.setenv("LOOPBREAKER_LIVE_SOURCES", "false")
    return path


@pytest.fixture
def app(store_path: Path) -> Iterator[Any]:
    yield functions_framework.create_app("on_log_entry", str(SOURCE), "cloudevent").test_client()
    _main()._built.clear()


def _main() -> Any:
    return sys.modules["main"]


def post(client: Any, event: CloudEvent, *, binary: bool = False) -> Any:
    headers, body = to_binary(event) if binary else to_structured(event)
    return client.post("/", headers=headers, data=body)


def error_lines(text: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [line for line in lines if line["severity"] == "ERROR"]


def incidents_in(path: Path) -> list[Any]:
    store = SqliteStore(path)
    try:
        return store.list_incidents()
    finally:
        store.close()


def test_importing_main_loads_no_heavy_client_library() -> None:
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('main', {str(SOURCE)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "heavy = ('google.cloud.compute', 'google.cloud.logging', 'google.cloud.monitoring',\n"
        "         'google.cloud.firestore', 'google.cloud.pubsub', 'kubernetes', 'grpc')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "LOOPBREAKER_STORE": "firestore"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_cold_start_imports_no_builder_and_parses_no_catalog() -> None:
    """The builders (and the pipeline behind them) come with the first call of an entry
    point; the signature catalog with the first thing that reads it, never an import."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('main', {str(SOURCE)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "at_start = sorted(m for m in ('loopbreaker.app.bootstrap', 'loopbreaker.signals.catalog',"
        " 'tomllib') if m in sys.modules)\n"
        "import loopbreaker.app.bootstrap, loopbreaker.cli.validate\n"
        "from loopbreaker.signals import catalog\n"
        "print(at_start, catalog.load.cache_info().misses)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "LOOPBREAKER_STORE": "firestore"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "[] 0"


def test_a_bad_setting_stops_the_function_from_starting() -> None:
    code = f"import runpy; runpy.run_path({str(SOURCE)!r})"
    env = {"PATH": "/usr/bin:/bin", "LOOPBREAKER_SETTLE_TIME": "soon"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()  # one line, no traceback
    assert "LOOPBREAKER_SETTLE_TIME='soon'" in json.loads(line)["message"]


@pytest.mark.parametrize("binary", [False, True], ids=["structured", "binary"])
def test_a_log_sink_message_becomes_an_incident(app: Any, store_path: Path, binary: bool) -> None:
    response = post(app, pubsub_event(b64(ENTRY)), binary=binary)
    assert response.status_code == 200
    [incident] = incidents_in(store_path)
    assert incident.signal_count == 1 and incident.counts == {"host_error": 1}


def test_snake_case_fields_and_missing_attributes_are_accepted(app: Any, store_path: Path) -> None:
    event = pubsub_event(b64(ENTRY))
    message = event.data["message"]
    message["message_id"] = message.pop("messageId")
    message["publish_time"] = message.pop("publishTime")
    del message["attributes"]
    assert post(app, event).status_code == 200
    assert post(app, event).status_code == 200  # the same messageId again
    [incident] = incidents_in(store_path)
    assert incident.signal_count == 1
    assert _main()._once(build_responder).stats["duplicate"] == 1


def test_a_raw_pubsub_push_envelope_is_converted_by_the_framework(
    app: Any, store_path: Path
) -> None:
    envelope = {
        "message": {"data": b64(ENTRY), "messageId": "77", "publishTime": "2026-05-20T08:00:01Z"},
        "subscription": "projects/proj/subscriptions/sink",
    }
    response = app.post("/", json=envelope)
    assert response.status_code == 200
    assert incidents_in(store_path)[0].signal_count == 1


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("%%% not base64 %%%", "not base64"),
        (b64(b"\xff\xfe"), "not UTF-8"),
        (b64(b"{not json"), "not JSON"),
        (b64([1, 2, 3]), "must be a JSON object"),
        (b64({"textPayload": "no resource"}), "not a LogEntry"),
        (b64({**ENTRY, "timestamp": "yesterday"}), "relative time"),
    ],
    ids=["base64", "utf8", "json", "array", "not-log-entry", "bad-timestamp"],
)
def test_bad_input_is_logged_once_and_acknowledged(
    app: Any,
    store_path: Path,
    capsys: pytest.CaptureFixture[str],
    data: str,
    reason: str,
) -> None:
    response = post(app, pubsub_event(data, message_id="31337"))
    assert response.status_code == 200  # acked: Pub/Sub must not redeliver it forever
    [line] = error_lines(capsys.readouterr().err)
    assert line["message_id"] == "31337" and reason in line["reason"]
    assert line["event"] == "entry_rejected"
    assert incidents_in(store_path) == []
    assert _main()._once(build_responder).stats["rejected"] == 1


def test_an_event_of_another_type_is_logged_and_acknowledged(
    app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    event = CloudEvent(
        {"type": "google.cloud.storage.object.v1.finalized", "source": "//storage", "id": "9"},
        {"bucket": "b"},
    )
    assert post(app, event).status_code == 200
    [line] = error_lines(capsys.readouterr().err)
    assert line["message_id"] == "9" and "google.cloud.storage" in line["reason"]


def test_a_transient_store_error_fails_the_delivery_so_it_is_retried(app: Any) -> None:
    settings = load_settings({}, runtime=Runtime.LOCAL)
    store = FakeStore(fail={"ingest": [TransientError("Firestore unavailable")]})
    _main()._built[build_responder] = build_responder(settings, store=store)
    assert post(app, pubsub_event(b64(ENTRY))).status_code == 500
    assert post(app, pubsub_event(b64(ENTRY))).status_code == 200
    assert len(store.incidents) == 1


def test_on_schedule_diagnoses_settled_incidents(app: Any, store_path: Path) -> None:
    post(app, pubsub_event(b64(ENTRY)))
    schedule = functions_framework.create_app("on_schedule", str(SOURCE), "http").test_client()
    response = schedule.post("/")
    assert response.status_code == 200
    report = response.get_json()
    [incident] = incidents_in(store_path)
    assert report["diagnosed"] == [incident.id] and report["failed"] == []
    assert incident.state.value == "diagnosed"
    assert incident.diagnosis and incident.diagnosis.root_cause == "host_error"
    assert schedule.post("/").get_json()["diagnosed"] == []


def test_the_cloud_wiring_uses_live_sources_and_local_runs_do_not(tmp_path: Path) -> None:
    from loopbreaker.app.bootstrap import build_evidence
    from loopbreaker.diagnosis.evidence import NoEvidence, TelemetryDirEvidence
    from loopbreaker.diagnosis.readers.sources import LiveEvidence

    cloud = load_settings({}, runtime=Runtime.CLOUD)
    assert isinstance(build_evidence(cloud), LiveEvidence)
    local = load_settings({}, runtime=Runtime.LOCAL)
    assert isinstance(build_evidence(local), NoEvidence)
    offline = load_settings({"LOOPBREAKER_TELEMETRY_DIR": str(tmp_path)}, runtime=Runtime.LOCAL)
    assert isinstance(build_evidence(offline), TelemetryDirEvidence)
