"""The Firestore store's documents: conditioned writes, and the shapes it reads and writes."""

from __future__ import annotations

import json
from typing import Any

from loopbreaker.incidents import Arrival, Incident, IndexEntry
from loopbreaker.signals.decode import escape_surrogates
from loopbreaker.timeutil import format_rfc3339


class _Writes:
    """The writes of one attempt, each conditioned on the snapshot it was decided from."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.batch = client.batch()
        self.count = 0
        self.paths: list[str] = []

    def put(self, ref: Any, data: dict[str, Any], read: Any | None) -> None:
        """Create ``ref`` if ``read`` says it did not exist, else replace that version."""
        self.count += 1
        self.paths.append(ref.path)
        if read is None or not read.exists:
            self.batch.create(ref, data)
            return
        # update() with every top-level field replaces the document; the precondition
        # makes the commit fail if anyone wrote it since we read it.
        option = self._client.write_option(last_update_time=read.update_time)
        self.batch.update(ref, data, option=option)


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(escape_surrogates(text).encode()).hexdigest()[:32]


def _opt(text: str | None) -> str | None:
    return None if text is None else escape_surrogates(text)


def _valid_id(doc_id: str) -> bool:
    """Whether Firestore can hold a document with this id (no "/", not "." or "..", not
    ``__x__``, at most 1500 bytes, valid UTF-8): ours always can, forged ones may not."""
    if not doc_id or "/" in doc_id or doc_id in (".", ".."):
        return False
    if doc_id.startswith("__") and doc_id.endswith("__"):
        return False
    return escape_surrogates(doc_id) == doc_id and len(doc_id.encode()) <= 1500


def _clean(value: Any) -> Any:
    """Signal fields as valid UTF-8 (a protobuf string field holds nothing else)."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {escape_surrogates(str(k)): _clean(v) for k, v in value.items()}
    return value


def _recent(snap: Any) -> list[dict[str, Any]]:
    if not snap.exists:
        return []
    return [d for d in snap.get("deletions") or () if isinstance(d, dict)]


#: The signal fields counting needs (the rest of a signal is read only for diagnoses).
_TALLY_FIELDS = (
    "kind",
    "timestamp",
    "cluster",
    "location",
    "node_pool",
    "node",
    "instance",
    "physical_host",
    "namespace",
    "workload",
    # The recount rebuilds workload_kinds from these: without it every incident would be
    # settled as the default kind.
    "workload_kind",
)


def _signal_doc(arrival: Arrival) -> dict[str, Any]:
    doc: dict[str, Any] = {**_clean(arrival.signal.to_dict()), "entry_id": arrival.entry_id}
    doc["event_time"] = format_rfc3339(arrival.event_time)
    doc["arrived_at"] = arrival.now
    if arrival.signal.timestamp is None:
        doc["timestamp"] = doc["event_time"]
    return doc


def _index(key_snap: Any) -> list[IndexEntry]:
    if not key_snap.exists:
        return []
    return [IndexEntry.from_dict(e) for e in key_snap.get("incidents") or ()]


def _incident(snap: Any) -> Incident:
    return Incident.from_dict(json.loads(snap.get("data")))


def _incident_doc(incident: Incident) -> dict[str, Any]:
    # The head is stored as JSON text: Firestore forbids some shapes JSON allows (nested
    # arrays), and the diagnosis document is free-form. Query fields sit beside it.
    return {
        "data": json.dumps(incident.to_dict(), separators=(",", ":")),
        "key": str(incident.key),
        "state": incident.state.value,
        "final": incident.final,
        "opened_at": incident.opened_at,
        "settle_at": incident.settle_at,
        "expires_at": incident.expires_at,
        "signal_count": incident.signal_count,
        "root_cause": incident.diagnosis.root_cause if incident.diagnosis else None,
    }
