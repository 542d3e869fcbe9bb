"""The responder's inputs: LOOPBREAKER_* settings and the delivery envelopes it unwraps."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from pathlib import Path

import pytest

from loopbreaker.errors import ConfigError, InvalidEvent
from loopbreaker.settings import load as S
from loopbreaker.settings.load import Runtime, StoreKind, load_settings
from loopbreaker.signals.envelope import (
    PUBSUB_EVENT_TYPE,
    UndecodableMessage,
    decode,
    encode_push,
    from_cloud_event,
)

ENTRY = {"insertId": "a", "logName": "projects/p/logs/x", "resource": {"type": "k8s_node"}}


# --- settings ------------------------------------------------------------------------


def test_defaults_differ_only_where_the_runtime_matters() -> None:
    cloud = load_settings({}, runtime=Runtime.CLOUD)
    local = load_settings({}, runtime=Runtime.LOCAL)
    assert cloud.store.kind is StoreKind.FIRESTORE and cloud.live_sources
    assert local.store.kind is StoreKind.SQLITE and not local.live_sources
    assert local.store.path == Path(".loopbreaker/incidents.sqlite")
    for s in (cloud, local):
        assert s.grouping_window == S.DEFAULT_GROUPING_WINDOW == timedelta(minutes=30)
        assert s.settle_time == timedelta(seconds=60)
        assert s.stale_after == timedelta(hours=6)
        assert (s.max_signals, s.query_budget, s.dry_run) == (500, 16, True)


def test_every_variable_is_parsed(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    env = {
        "LOOPBREAKER_STORE": "sqlite:/tmp/x.sqlite",
        "LOOPBREAKER_PROJECT": "proj",
        "LOOPBREAKER_FIRESTORE_DATABASE": "incidents",
        "LOOPBREAKER_COLLECTION_PREFIX": "lb-test",
        "LOOPBREAKER_GROUPING_WINDOW": "15m",
        "LOOPBREAKER_SETTLE_TIME": "90s",
        "LOOPBREAKER_STALE_AFTER": "1.5h",
        "LOOPBREAKER_MAX_SIGNALS": "50",
        "LOOPBREAKER_QUERY_BUDGET": "0",
        "LOOPBREAKER_SETTLE_BATCH": "5",
        "LOOPBREAKER_DEDUP_RETENTION": "9d",
        "LOOPBREAKER_VERIFY_WINDOW": "3h",
        "LOOPBREAKER_VERIFY_EVERY": "5m",
        "LOOPBREAKER_DRY_RUN": "off",
        "LOOPBREAKER_LIVE_SOURCES": "yes",
        "LOOPBREAKER_TELEMETRY_DIR": str(tmp_path),
        "LOOPBREAKER_NOTIFIER": "file:/tmp/notes",
        "LOOPBREAKER_LOG_LEVEL": "debug",
        "LOOPBREAKER_SLACK_BOT_TOKEN": "xoxb-1-2-abc",
        "LOOPBREAKER_SLACK_CHANNEL": "C0123ABC",
        "LOOPBREAKER_SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
        "LOOPBREAKER_SLACK_API_URL": "http://127.0.0.1:9/api",
        "LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX": "http://127.0.0.1:9/actions/",
        "LOOPBREAKER_GOOGLE_CHAT_WEBHOOK_URL": "https://chat.googleapis.com/v1/spaces/AAA/messages?key=k",
        "LOOPBREAKER_GOOGLE_CHAT_SPACE": "spaces/AAAAX5_xtFM",
        "LOOPBREAKER_GOOGLE_CHAT_AUDIENCE": "123456789012",
        "LOOPBREAKER_GOOGLE_CHAT_CERTS_URL": "http://127.0.0.1:9/certs",
        "LOOPBREAKER_GOOGLE_CHAT_API_URL": "http://127.0.0.1:9/chat",
        "LOOPBREAKER_APPROVERS": "U0123ABC, Alice@Example.com",
        "LOOPBREAKER_ACTION_SIGNING_KEY": "0123456789abcdef0123",
        "LOOPBREAKER_APPROVAL_TTL": "45m",
        "LOOPBREAKER_REMEDIATION_TOPIC": "remediation-requests",
        "LOOPBREAKER_MAX_DELETIONS_PER_HOUR": "3",
        "LOOPBREAKER_MAX_UNREADY_SHARE": "25%",
        "LOOPBREAKER_NODE_POOLS": "tpu-pool, gpu-pool",
        "LOOPBREAKER_DRAIN_MODE": "delete-after-timeout",
        "LOOPBREAKER_DRAIN_TIMEOUT": "20m",
        "LOOPBREAKER_REPAIR_PATH": "Report",
        "LOOPBREAKER_REPORT_DISRUPTION_SCHEDULE": "Immediate",
        "LOOPBREAKER_GKE_REPAIR_TIMEOUT": "1h",
        "LOOPBREAKER_GKE_REPAIR_STALL": "30m",
        "LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS": (
            "NVSentinel:label:dgxc.nvidia.com/nvsentinel-state, taint:example.com/repair=on"
        ),
        "LOOPBREAKER_SUPPORT_PARENT": "projects/proj",
        "LOOPBREAKER_SUPPORT_CLASSIFICATION": "100H41Q3DTMN0TBKCKD0SGRVNRMMPH5SQ",
        "LOOPBREAKER_KUBECONFIG": str(kubeconfig),
        "LOOPBREAKER_COMPUTE_ENDPOINT": "http://127.0.0.1:9/compute",
        "LOOPBREAKER_SUPPORT_ENDPOINT": "http://127.0.0.1:9/support",
        "LOOPBREAKER_WORKLOAD_KIND": "PyTorchJob",
        "LOOPBREAKER_ALERT_WEBHOOK_TOKEN": "alert-token-0123456789",
        "LOOPBREAKER_ALERT_WEBHOOK_BASIC_AUTH": "alertmanager:s3cret",
        "LOOPBREAKER_ALERT_CLUSTER": "gpu-cluster",
        "LOOPBREAKER_PROMETHEUS_URL": "http://kube-prometheus-stack-prometheus.monitoring:9090",
        "LOOPBREAKER_PROMETHEUS_CLUSTER_LABEL": "none",
        "LOOPBREAKER_PROMETHEUS_USERNAME": "loopbreaker",
        "LOOPBREAKER_PROMETHEUS_PASSWORD": "prom-pass-0123",
        "LOOPBREAKER_SETTLE_TIMES": "typo",
        "LOOPBREAKER_PROJECTS": "ml-prod-1234, ml-team-prod",
        "LOOPBREAKER_ROUTES": (
            "routes:\n  - {name: team, match: {namespaces: [team-*]}, slack_channel: C0TEAM0001,"
            " approvers: [U0TEAM0001]}\ndefault: {name: platform}\n"
        ),
    }
    s = load_settings(env)
    assert str(s.store) == "sqlite:/tmp/x.sqlite" and s.project == "proj"
    assert (s.firestore_database, s.collection_prefix) == ("incidents", "lb-test")
    assert s.grouping_window == timedelta(minutes=15)
    assert s.settle_time == timedelta(seconds=90)
    assert s.stale_after == timedelta(minutes=90)
    assert (s.max_signals, s.query_budget, s.settle_batch) == (50, 0, 5)
    assert s.dedup_retention == timedelta(days=9)
    assert (s.verify_window, s.verify_every) == (timedelta(hours=3), timedelta(minutes=5))
    assert (s.dry_run, s.live_sources) == (False, True)
    assert s.telemetry_dir == tmp_path
    assert s.notifier.kind == "file" and s.notifier.path == Path("/tmp/notes")
    assert s.log_level == "DEBUG"
    assert s.unknown == ("LOOPBREAKER_SETTLE_TIMES",)
    assert s.workload_kind.value == "pytorchjob" and s.alert_cluster == "gpu-cluster"
    chat = s.chatops
    assert chat.slack_bot_token is not None and chat.slack_bot_token.get() == "xoxb-1-2-abc"
    assert chat.slack_channel == "C0123ABC" and chat.slack_api_url == "http://127.0.0.1:9/api/"
    assert chat.slack_response_url_prefix == "http://127.0.0.1:9/actions/"
    assert chat.slack_signing_secret is not None
    assert chat.google_chat_space == "spaces/AAAAX5_xtFM"
    assert chat.google_chat_webhook_url is not None
    assert chat.google_chat_audience == "123456789012"
    assert chat.google_chat_certs_url == "http://127.0.0.1:9/certs"
    assert chat.google_chat_api_url == "http://127.0.0.1:9/chat"
    assert chat.approvers == {"U0123ABC", "alice@example.com"}
    assert chat.action_signing_key is not None and chat.approvals_enabled
    assert chat.approval_ttl == timedelta(minutes=45)
    assert chat.remediation_topic == "projects/proj/topics/remediation-requests"
    assert s.projects == {"ml-prod-1234", "ml-team-prod"}
    assert chat.routes is not None and [r.name for r in chat.routes.all()] == ["team", "platform"]
    assert chat.routes.routes[0].approvers == {"U0TEAM0001"} and not chat.routes.default.approvers
    # Secret values never show in a repr (settings end up in logs and tracebacks).
    assert "xoxb" not in repr(s) and "0123456789abcdef" not in repr(s)
    assert "s3cret" not in repr(s) and "alert-token" not in repr(s)
    assert chat.alert_webhook_token is not None
    assert chat.alert_webhook_token.get() == "alert-token-0123456789"
    assert chat.alert_webhook_basic_auth is not None
    r = s.remediation
    p = r.policy
    assert (p.dry_run, p.max_deletions_per_hour, p.max_unready_share) == (False, 3, 0.25)
    assert p.node_pools == {"tpu-pool", "gpu-pool"} and p.drain_timeout == timedelta(minutes=20)
    assert (p.drain_mode.value, p.repair.value) == ("delete-after-timeout", "report")
    assert p.disruption_schedule.value == "IMMEDIATE"
    assert (p.gke_repair_timeout, p.gke_repair_stall) == (timedelta(hours=1), timedelta(minutes=30))
    assert [(m.system, str(m)) for m in p.foreign_markers] == [
        ("NVSentinel", "label dgxc.nvidia.com/nvsentinel-state"),
        (None, "taint example.com/repair=on"),
    ]
    assert (r.support_parent, r.kubeconfig) == ("projects/proj", kubeconfig)
    assert r.support_classification == "100H41Q3DTMN0TBKCKD0SGRVNRMMPH5SQ"
    assert r.compute_endpoint == "http://127.0.0.1:9/compute"
    assert r.support_endpoint == "http://127.0.0.1:9/support"
    prom = s.prometheus
    assert prom.url == "http://kube-prometheus-stack-prometheus.monitoring:9090"
    assert (prom.cluster_label, prom.username) == ("none", "loopbreaker")
    assert prom.password is not None and prom.password.get() == "prom-pass-0123"
    assert "prom-pass" not in repr(s)
    # The bearer token excludes basic auth: tests/settings/test_prometheus_settings.py parses
    # it. The old name of REPAIR_PATH excludes it: parsed below.
    exclusive = {"LOOPBREAKER_PROMETHEUS_BEARER_TOKEN", "LOOPBREAKER_HOST_ACTION"}
    documented = {v.name for v in S.VARIABLES if "<" not in v.name}
    assert documented == {k for k in env if k != "LOOPBREAKER_SETTLE_TIMES"} | exclusive


def test_the_project_falls_back_on_google_cloud_project() -> None:
    assert load_settings({"GOOGLE_CLOUD_PROJECT": "gcp"}).project == "gcp"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("STORE", "postgres://x"),
        ("STORE", "sqlite:"),
        ("GROUPING_WINDOW", "soon"),
        ("GROUPING_WINDOW", "0m"),
        ("GROUPING_WINDOW", "30"),  # seconds or minutes? a unit is required
        ("TELEMETRY_DIR", "/nonexistent/telemetry"),
        ("SETTLE_TIME", "-5s"),
        ("STALE_AFTER", "1 fortnight"),
        ("MAX_SIGNALS", "lots"),
        ("MAX_SIGNALS", "0"),
        ("QUERY_BUDGET", "-1"),
        ("SETTLE_BATCH", "1.5"),
        ("DEDUP_RETENTION", "1h"),
        ("VERIFY_WINDOW", "30s"),
        ("VERIFY_EVERY", "often"),
        ("DRY_RUN", "maybe"),
        ("LIVE_SOURCES", "2"),
        ("NOTIFIER", "slack"),
        ("LOG_LEVEL", "LOUD"),
        ("COLLECTION_PREFIX", "9bad/prefix"),
        ("FOREIGN_REMEDIATION_MARKERS", "node:dgxc.nvidia.com/nvsentinel-state"),
        ("REPAIR_PATH", "replace"),
        ("REPORT_DISRUPTION_SCHEDULE", "later"),
        # Compute's discovery document: "Required field, only allows IMMEDIATE".
        ("REPORT_DISRUPTION_SCHEDULE", "future"),
        ("GKE_REPAIR_TIMEOUT", "forever"),
        ("GKE_REPAIR_STALL", "2h"),  # longer than the 45m timeout
        ("HOST_ACTION", "recreate"),
    ],
)
def test_a_bad_value_names_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"LOOPBREAKER_{name}"):
        load_settings({f"LOOPBREAKER_{name}": value})


def test_the_readme_table_lists_every_variable() -> None:
    table = S.markdown_table()
    assert all(f"`{v.name}`" in table for v in S.VARIABLES)


# --- envelopes -----------------------------------------------------------------------


def b64(value: object) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def cloud_event(message: dict[str, object], **attributes: str) -> dict[str, object]:
    return {
        "specversion": "1.0",
        "type": PUBSUB_EVENT_TYPE,
        "source": "//pubsub.googleapis.com/projects/p/topics/t",
        "id": "ce-1",
        **attributes,
        "data": {"message": message, "subscription": "projects/p/subscriptions/s"},
    }


def test_a_structured_cloud_event() -> None:
    delivery = decode(
        cloud_event(
            {
                "data": b64(ENTRY),
                "messageId": "42",
                "publishTime": "2026-05-20T08:00:01Z",
                "attributes": {"logging.googleapis.com/timestamp": "2026-05-20T08:00:00Z"},
            }
        )
    )
    assert delivery.message_id == "42" and delivery.entry == ENTRY
    assert delivery.publish_time == "2026-05-20T08:00:01Z"
    assert delivery.sink_timestamp == "2026-05-20T08:00:00Z"


def test_snake_case_names_and_no_attributes() -> None:
    delivery = decode(
        cloud_event({"data": b64(ENTRY), "message_id": "7", "publish_time": "2026-05-20T08Z"})
    )
    assert (delivery.message_id, delivery.publish_time) == ("7", "2026-05-20T08Z")
    assert delivery.attributes == {}


def test_the_event_id_stands_in_for_a_missing_message_id() -> None:
    assert decode(cloud_event({"data": b64(ENTRY)})).message_id == "ce-1"


def test_binary_mode_data_may_arrive_as_bytes() -> None:
    body = json.dumps({"message": {"data": b64(ENTRY), "messageId": "5"}}).encode()
    delivery = from_cloud_event({"type": PUBSUB_EVENT_TYPE, "id": "5"}, body)
    assert delivery.entry == ENTRY


def test_push_envelopes_bare_messages_and_bare_entries() -> None:
    push = encode_push(ENTRY, "99", "2026-05-20T08:00:01Z")
    assert decode(push).message_id == "99" and decode(push).entry == ENTRY
    bare_message = {"data": b64(ENTRY), "messageId": "98"}
    assert decode(bare_message).message_id == "98"
    bare = decode(ENTRY)
    assert bare.message_id is None and bare.entry == ENTRY


@pytest.mark.parametrize(
    ("document", "reason", "message_id"),
    [
        ([1, 2], "expected a JSON object, got an array", None),
        ({"message": "x", "subscription": "s"}, "'message' must be an object", None),
        ({"message": {"messageId": "1"}, "subscription": "s"}, "has no data", "1"),
        ({"message": {"messageId": "1", "data": 5}, "subscription": "s"}, "base64 string", "1"),
        ({"message": {"messageId": "1", "data": "@@@"}, "subscription": "s"}, "not base64", "1"),
        (
            {"message": {"messageId": "1", "data": b64("x")[:-2] + "=="}, "subscription": "s"},
            "not",
            "1",
        ),
        (
            {"message": {"messageId": "2", "data": base64.b64encode(b"{x").decode()}},
            "not JSON",
            "2",
        ),
        (
            {"message": {"messageId": "3", "data": base64.b64encode(b"\xff").decode()}},
            "not UTF-8",
            "3",
        ),
        (
            {"message": {"messageId": "4", "data": "", "attributes": []}, "subscription": "s"},
            "attributes must be an object",
            "4",
        ),
        (
            {**cloud_event({"data": b64(ENTRY)}), "type": "google.cloud.storage.object.v1"},
            "is not google.cloud.pubsub.topic.v1.messagePublished",
            "ce-1",
        ),
        ({**cloud_event({}), "data": "not json"}, "event data is not JSON", "ce-1"),
        ({**cloud_event({}), "data": {"nothing": 1}}, "no 'message' object", "ce-1"),
    ],
)
def test_undecodable_deliveries_say_why_and_keep_the_message_id(
    document: object, reason: str, message_id: str | None
) -> None:
    with pytest.raises(UndecodableMessage, match=reason) as caught:
        decode(document)
    assert isinstance(caught.value, InvalidEvent)
    assert caught.value.message_id == message_id


def test_gcloud_pull_output_replays_like_a_push() -> None:
    # `gcloud pubsub subscriptions pull --format=json` (e.g. from the dead-letter topic)
    pulled = {"ackId": "ack-1", "message": {"data": b64(ENTRY), "messageId": "11"}}
    delivery = decode(pulled)
    assert (delivery.message_id, delivery.entry) == ("11", ENTRY)


@pytest.mark.parametrize("name", ["STALE_AFTER", "GROUPING_WINDOW", "DRAIN_TIMEOUT"])
def test_absurd_durations_are_refused_naming_the_variable(name: str) -> None:
    with pytest.raises(ConfigError, match=f"LOOPBREAKER_{name}=.*longer than 366d"):
        load_settings({f"LOOPBREAKER_{name}": "99999999999d"})


# --- every safety setting out of range is refused at start --------------------------------

APPROVALS = {"LOOPBREAKER_APPROVERS": "U024BE7LH"}


@pytest.mark.parametrize(
    ("name", "bad", "good"),
    [
        ("LOOPBREAKER_ACTION_SIGNING_KEY", "fifteen-chars!!", "sixteen-chars!!!"),
        ("LOOPBREAKER_APPROVAL_TTL", "25h", "24h"),
        ("LOOPBREAKER_MAX_UNREADY_SHARE", "30", "30%"),  # 30 is not 3000%
        ("LOOPBREAKER_MAX_UNREADY_SHARE", "1.01", "1"),
        ("LOOPBREAKER_MAX_UNREADY_SHARE", "-0.1", "0"),
        ("LOOPBREAKER_MAX_DELETIONS_PER_HOUR", "101", "100"),
        ("LOOPBREAKER_MAX_DELETIONS_PER_HOUR", "-1", "0"),
    ],
)
def test_a_safety_setting_out_of_range_stops_the_start(name: str, bad: str, good: str) -> None:
    base = {**APPROVALS, "LOOPBREAKER_ACTION_SIGNING_KEY": "a-long-enough-signing-key"}
    load_settings({**base, name: good}, runtime=Runtime.LOCAL)  # the edge itself is fine
    with pytest.raises(ConfigError, match=name):
        load_settings({**base, name: bad}, runtime=Runtime.LOCAL)


@pytest.mark.parametrize(
    ("legacy", "path"), [("delete", "delete"), ("report-faulty", "report"), (None, "auto")]
)
def test_the_old_host_action_still_chooses_its_path(legacy: str | None, path: str) -> None:
    env = {"LOOPBREAKER_HOST_ACTION": legacy} if legacy else {}
    assert load_settings(env).remediation.policy.repair.value == path


def test_the_old_and_the_new_repair_setting_together_are_refused() -> None:
    env = {"LOOPBREAKER_HOST_ACTION": "delete", "LOOPBREAKER_REPAIR_PATH": "gke"}
    with pytest.raises(ConfigError, match="old name of LOOPBREAKER_REPAIR_PATH"):
        load_settings(env)
