"""Unwrap a log-sink delivery into (messageId, LogEntry) (pure, stdlib only).

Accepted shapes:
  * an Eventarc CloudEvent ``google.cloud.pubsub.topic.v1.messagePublished`` (structured JSON,
    or attributes + data as functions-framework hands them over), ``data.message.data``
    being the base64 LogEntry a log sink published;
  * a Pub/Sub push envelope ``{"message": {...}, "subscription": "..."}``;
  * a bare PubsubMessage ``{"data": ..., "messageId": ...}``;
  * a bare LogEntry (no messageId).
Both ``messageId``/``publishTime`` and ``message_id``/``publish_time`` are read, and
``attributes`` may be absent. Anything else raises :class:`UndecodableMessage` (an
InvalidEvent) whose text says what is wrong and which carries the messageId when known.
Every JSON text goes through :mod:`loopbreaker.signals.decode` (depth, numbers, valid
Unicode), and so does an envelope functions-framework decoded itself.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loopbreaker.errors import InvalidEvent
from loopbreaker.signals import decode as hardened
from loopbreaker.signals.decode import InvalidJson

PUBSUB_EVENT_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"
#: The attribute a log sink sets to the entry's own timestamp.
SINK_TIMESTAMP_ATTRIBUTE = "logging.googleapis.com/timestamp"
#: Pub/Sub's limit on a message's data.
MAX_DATA_BYTES = 10_000_000


class UndecodableMessage(InvalidEvent):
    """The delivery is not a log-sink message; ``message_id`` is set when it could be read."""

    def __init__(self, reason: str, message_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.message_id = message_id


@dataclass(frozen=True)
class Delivery:
    """One decoded delivery."""

    message_id: str | None
    entry: Any
    publish_time: str | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)

    @property
    def sink_timestamp(self) -> str | None:
        return self.attributes.get(SINK_TIMESTAMP_ATTRIBUTE)


def decode(document: object) -> Delivery:
    """Decode any accepted shape (used for files: replay, tests)."""
    # Exact type tests first: a replay decodes every item of its files here.
    if type(document) is not dict and not isinstance(document, Mapping):
        raise UndecodableMessage(f"expected a JSON object, got {_type_name(document)}")
    if is_bare_entry(document):
        # A bare LogEntry: whether it really is one is classify's job.
        return Delivery(message_id=None, entry=dict(document))
    if "specversion" in document:
        return from_cloud_event(document, document.get("data"))
    message = document.get("message")
    if (
        message is not None
        and isinstance(message, Mapping)
        and ("subscription" in document or "data" in message)
    ):
        return from_pubsub_message(message)
    if "message" in document and "subscription" in document:
        raise UndecodableMessage(f"'message' must be an object, got {_type_name(message)}")
    if "data" in document and ("messageId" in document or "message_id" in document):
        return from_pubsub_message(document)
    return Delivery(message_id=None, entry=dict(document))


def is_bare_entry(document: Mapping[str, Any]) -> bool:
    """True when the object has none of the keys of an envelope (a CloudEvent's
    ``specversion``, a push's ``message``, a message's ``data``): :func:`decode` reads
    it as a bare LogEntry, without looking further."""
    return "specversion" not in document and "message" not in document and "data" not in document


def from_cloud_event(attributes: Mapping[str, Any], data: object) -> Delivery:
    """Decode a CloudEvent given its context attributes and its ``data``."""
    event_id = attributes.get("id")
    # Only for the log line: an id is never hashed or stored unless the event is valid.
    event_id = hardened.escape_surrogates(str(event_id)) if event_id is not None else None
    event_type = attributes.get("type")
    if event_type != PUBSUB_EVENT_TYPE:
        shown = hardened.escape_surrogates(repr(event_type))
        raise UndecodableMessage(f"event type {shown} is not {PUBSUB_EVENT_TYPE}", event_id)
    try:
        if isinstance(data, bytes | str):
            # Binary-mode events may arrive with the JSON body undecoded.
            data = hardened.loads(data, what="event data", max_bytes=2 * MAX_DATA_BYTES)
        else:
            # Structured mode: functions-framework decoded the body with plain json.
            hardened.check(data, what="event data")
        hardened.check(attributes, what="event attributes")
    except InvalidJson as exc:
        raise UndecodableMessage(exc.reason, event_id) from None
    if not isinstance(data, Mapping):
        raise UndecodableMessage(
            f"event data must be an object, got {_type_name(data)}", message_id=event_id
        )
    message = data.get("message")
    if not isinstance(message, Mapping):
        raise UndecodableMessage(
            f"event data has no 'message' object (got {_type_name(message)})", message_id=event_id
        )
    return from_pubsub_message(message, fallback_id=event_id)


def from_pubsub_message(message: Mapping[str, Any], *, fallback_id: str | None = None) -> Delivery:
    """Decode a PubsubMessage whose ``data`` is a base64 LogEntry."""
    message_id = _first_str(message, "messageId", "message_id") or fallback_id
    publish_time = _first_str(message, "publishTime", "publish_time")
    for name, value in (("messageId", message_id), ("publishTime", publish_time)):
        if value is not None and hardened.escape_surrogates(value) != value:
            shown = hardened.escape_surrogates(value)
            raise UndecodableMessage(f"message {name} {shown!r} is not valid Unicode", shown)
    raw_attributes = message.get("attributes")
    if raw_attributes is not None and not isinstance(raw_attributes, Mapping):
        raise UndecodableMessage(
            f"message.attributes must be an object, got {_type_name(raw_attributes)}", message_id
        )
    attributes = {str(k): str(v) for k, v in (raw_attributes or {}).items()}
    try:
        hardened.check(attributes, what="message.attributes")
    except InvalidJson as exc:
        raise UndecodableMessage(exc.reason, message_id) from None
    data = message.get("data")
    if data is None or data == "":
        raise UndecodableMessage("message has no data (a log sink always sends one)", message_id)
    if not isinstance(data, str):
        raise UndecodableMessage(
            f"message.data must be a base64 string, got {_type_name(data)}", message_id
        )
    if len(data) > MAX_DATA_BYTES * 4 // 3 + 4:
        raise UndecodableMessage(
            f"message.data of {len(data)} characters is over Pub/Sub's {MAX_DATA_BYTES} bytes",
            message_id,
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UndecodableMessage(f"message.data is not base64: {exc}", message_id) from None
    try:
        entry = hardened.loads(raw, what="message.data")
    except InvalidJson as exc:
        raise UndecodableMessage(exc.reason, message_id) from None
    return Delivery(
        message_id=message_id, entry=entry, publish_time=publish_time, attributes=attributes
    )


def encode_push(entry: Mapping[str, Any], message_id: str, publish_time: str) -> dict[str, Any]:
    """Build the push envelope a log sink's subscription would deliver (tests, examples)."""
    data = base64.b64encode(json.dumps(entry, separators=(",", ":")).encode()).decode()
    attributes = {}
    if isinstance(entry.get("timestamp"), str):
        attributes[SINK_TIMESTAMP_ATTRIBUTE] = entry["timestamp"]
    return {
        "message": {
            "attributes": attributes,
            "data": data,
            "messageId": message_id,
            "message_id": message_id,
            "publishTime": publish_time,
            "publish_time": publish_time,
        },
        "subscription": "projects/example-project/subscriptions/loopbreaker-log-entries",
    }


def _first_str(mapping: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


_type_name = hardened.type_name
