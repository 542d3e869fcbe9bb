"""Turn one Cloud Logging LogEntry (v2 JSON, as sinks publish it) into a typed Signal.

Pure and total: any JSON value either yields a Signal (``unrecognized`` when nothing
matches) or raises :class:`InvalidLogEntry` naming what is wrong. What a line, Event or
audit method means comes from the signature catalog (:mod:`loopbreaker.signals.catalog`);
this module reads the entry's fields around it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, NoReturn, TypeGuard

from loopbreaker.errors import InvalidContext, InvalidLogEntry
from loopbreaker.model import Signal, SignalKind
from loopbreaker.signals import capacity, kube_events, matching
from loopbreaker.signals.decode import type_name as _type_name
from loopbreaker.signals.labels import (
    fill_coordinator,
    fill_from_text,
    kubeflow_kind,
    workload_fields,
    workload_of,
)
from loopbreaker.timeutil import fast_utc, parse_rfc3339

__all__ = [
    "Identity",
    "Quiet",
    "classify",
    "identity",
    "kubeflow_kind",
    "prepare",
    "screen",
    "triage",
]

MAX_EXCERPT = 300

_PAYLOADS = ("textPayload", "jsonPayload", "protoPayload")
_SEVERITIES = frozenset(
    {"DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"}
)
_TERMINATION_REASON = re.compile(r"terminated due to:?\s*(?P<reason>[^.\n]+)", re.I)
_INSTANCE = re.compile(r"(?:^|/)zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)$")
# A pod's memory cgroup (cgroupfs ``/kubepods/burstable/pod<uid>/<id>``, systemd
# ``kubepods-burstable-pod<uid with _>.slice``) in the kernel line that is an OOM kill's
# signal: the oom-kill: summary (5.0+), or the task's cgroup of 'Task in <cgroup> killed as
# a result of limit of <cgroup>' (before 5.0).
_MEMCG_POD = re.compile(
    r"(?:(?:task_memcg|oom_memcg)=|\bTask in )[^,\s]*?pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}"
    r"[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)
#: Every match of _MEMCG_POD starts with one of these.
_MEMCG_LEADS = ("task_memcg=", "oom_memcg=", "Task in ")


def classify(entry: object) -> Signal:
    """Classify one LogEntry; raise InvalidLogEntry if ``entry`` is not one."""
    return _classify(_parts(entry))


def prepare() -> None:
    """Compile the signature catalog's rules now rather than at the first classification:
    for a caller with time to spare (a replay while its reader process starts)."""
    matching.rules()


def triage(entry: object) -> Quiet | Signal:
    """:func:`screen`, else :func:`classify`, with the entry's fields checked once."""
    parts = _parts(entry)
    quiet = _screen(parts)
    return quiet if quiet is not None else _classify(parts)


def _classify(parts: _Parts) -> Signal:
    # Unpacked at once: one step instead of a descriptor call per field read.
    (
        resource_type,
        rlabels,
        labels,
        log_name,
        text_payload,
        json_payload,
        proto_payload,
        timestamp,
        severity,
        insert_id,
    ) = parts
    # Every entry comes through here: the label maps' bound get, read once each.
    rget, lget = rlabels.get, labels.get
    zone = rget("zone")
    # The Signal's __dict__ itself, defaults first (see _new_signal): no second copy.
    fields: dict[str, Any] = {
        **_SIGNAL_DEFAULTS,
        "timestamp": timestamp,
        "severity": severity,
        "project": rget("project_id") or _project_from_log_name(log_name),
        "cluster": rget("cluster_name"),
        "location": rget("location") or zone,
        "node_pool": rget("node_pool_name") or lget("k8s-node/cloud_google_com/gke-nodepool"),
        "node": rget("node_name") or lget("compute.googleapis.com/resource_name"),
        "namespace": rget("namespace_name"),
        "pod": rget("pod_name"),
        "container": rget("container_name"),
        "instance_id": rget("instance_id"),
        "zone": zone,
        "insert_id": insert_id,
        "log_name": log_name,
        "resource_type": resource_type,
    }
    workload_fields(labels, fields)

    kind, text, reason, lowered = _classify_payload(
        resource_type, text_payload, json_payload, proto_payload, fields
    )
    if reason:
        fields["reason"] = reason
    fill_from_text(text, fields, lowered)
    # Only a pod that names its workload can be placed by its name: most entries name none.
    if fields["coordinator"] is None and fields["pod"] and fields["workload"] is not None:
        fill_coordinator(fields)
    fields["kind"] = kind
    # Cut before folding white space so a huge payload costs no more than a short one.
    fields["excerpt"] = _excerpt(text[: MAX_EXCERPT * 4])
    return _new_signal(fields)


class Identity(NamedTuple):
    """Where an entry comes from, as far as the entries that match no rule matter: what
    the logs name (projects, clusters, namespaces, workloads, nodes)."""

    project: str | None
    cluster: str | None
    namespace: str | None
    workload: str | None
    workload_kind: str | None
    node: str | None


def identity(signal: Signal) -> Identity:
    """The :class:`Identity` of a Signal."""
    return Identity(
        signal.project,
        signal.cluster,
        signal.namespace,
        signal.workload,
        signal.workload_kind,
        signal.node,
    )


class Quiet(NamedTuple):
    """An entry that matches no rule: its :class:`Identity`, time and insertId."""

    identity: Identity
    timestamp: datetime | None
    insert_id: str | None


def screen(entry: object) -> Quiet | None:
    """The identity, time and insertId of an entry that :func:`classify` certainly calls
    ``unrecognized``, found without building its Signal; None when it may match a rule.

    Most entries of a training job's logs are its own output and match nothing: reading
    a large file, this is what they cost. It raises InvalidLogEntry exactly when
    classify() does, and agrees with it on identity and time
    (``tests/signals/test_functions_hot_path.py``).
    """
    return _screen(_parts(entry))


def _screen(parts: _Parts) -> Quiet | None:
    (
        resource_type,
        rlabels,
        labels,
        log_name,
        text,
        json_payload,
        proto_payload,
        timestamp,
        _,
        insert_id,
    ) = parts
    if proto_payload is not None:
        return None  # audit entries: the method decides, not the text
    is_container = resource_type == "k8s_container"
    if json_payload is not None:
        if not is_container:
            return None  # may be a Kubernetes Event: its reason decides
        text = _json_text(json_payload)
    if matching.rules()[is_container].scan.holds_any(text):
        return None
    node = rlabels.get("node_name") or labels.get("compute.googleapis.com/resource_name")
    if not node:
        # "node_pool" is not part of the identity: spare the search for it.
        found: dict[str, Any] = {"node": node, "node_pool": True}
        fill_from_text(text, found)
        node = found["node"]
    workload, kind, _ = workload_of(labels)
    # tuple.__new__ directly, as _parts does: a NamedTuple's own __new__ is a Python call.
    where = (
        rlabels.get("project_id") or _project_from_log_name(log_name),
        rlabels.get("cluster_name"),
        rlabels.get("namespace_name"),
        workload,
        kind,
        node,
    )
    return _new_tuple(Quiet, (_new_tuple(Identity, where), timestamp, insert_id))


class _Parts(NamedTuple):
    """A LogEntry's fields once checked, as classify() and screen() read them."""

    resource_type: str | None
    rlabels: Mapping[str, str]
    labels: Mapping[str, str]
    log_name: str | None
    #: ``textPayload``, or "" when the entry has none.
    text: str
    json_payload: Mapping[str, Any] | None
    proto_payload: Mapping[str, Any] | None
    timestamp: datetime | None
    severity: str
    insert_id: str | None


def _parts(entry: object) -> _Parts:
    """Check the fields every classification reads; InvalidLogEntry names what is wrong.

    Every entry of a file goes through here: exact type tests come first (JSON gives
    dicts and strs), the general ones only when they fail.
    """
    if type(entry) is not dict and not _is_map(entry):
        raise InvalidLogEntry(f"a LogEntry must be a JSON object, got {_type_name(entry)}")
    get = entry.get
    resource = get("resource")
    log_name = get("logName")
    if resource is None:
        if log_name is None:
            raise InvalidLogEntry("not a LogEntry: it has neither 'resource' nor 'logName'")
        # The LogEntry reference marks 'resource' as required: without it nothing says
        # where the entry came from (which cluster, node pool or VM).
        raise InvalidLogEntry("not a LogEntry: 'resource' is missing (it is required)")
    if type(resource) is not dict and not _is_map(resource):
        raise InvalidLogEntry(f"'resource' must be an object, got {_type_name(resource)}")
    if log_name is not None and not isinstance(log_name, str):
        raise InvalidLogEntry(f"'logName' must be a string, got {_type_name(log_name)}")
    resource_type = resource.get("type")
    if resource_type is not None and not isinstance(resource_type, str):
        raise InvalidLogEntry(f"'resource.type' must be a string, got {_type_name(resource_type)}")
    rlabels = _str_map(resource.get("labels"), "resource.labels")
    labels = _str_map(get("labels"), "labels")

    text_payload = get("textPayload")
    raw_json = get("jsonPayload")
    raw_proto = get("protoPayload")
    # One payload, and only the one present is checked further (most are text).
    if text_payload is not None:
        if raw_json is not None or raw_proto is not None:
            _payloads(get)
        if not isinstance(text_payload, str):
            raise InvalidLogEntry(f"'textPayload' must be a string, got {_type_name(text_payload)}")
        json_payload = proto_payload = None
    elif raw_json is not None:
        if raw_proto is not None:
            _payloads(get)
        # JSON objects are dicts: only anything else needs the general check.
        json_payload = raw_json if type(raw_json) is dict else _opt_map(raw_json, "jsonPayload")
        proto_payload = None
    else:
        json_payload = None
        proto_payload = (
            raw_proto if type(raw_proto) is dict else _opt_map(raw_proto, "protoPayload")
        )

    # The form sinks write, parsed at once; anything else (and every error) by _timestamp.
    stamp = get("timestamp")
    timestamp = (fast_utc(stamp) if type(stamp) is str else None) or _timestamp(entry)
    severity = get("severity", "DEFAULT")
    if type(severity) is not str:
        if not isinstance(severity, str | int) or isinstance(severity, bool):
            raise InvalidLogEntry(f"'severity' must be a string, got {_type_name(severity)}")
        severity = str(severity)
    if severity not in _SEVERITIES:
        severity = severity.upper()
        if severity not in _SEVERITIES:
            severity = "DEFAULT"
    insert_id = get("insertId")
    if insert_id is not None and not isinstance(insert_id, str):
        raise InvalidLogEntry(f"'insertId' must be a string, got {_type_name(insert_id)}")
    # tuple.__new__ directly: the NamedTuple's own __new__ is a Python-level call.
    return _new_tuple(
        _Parts,
        (
            resource_type,
            rlabels,
            labels,
            log_name,
            text_payload or "",
            json_payload,
            proto_payload,
            timestamp,
            severity,
            insert_id,
        ),
    )


_new_tuple = tuple.__new__


def _payloads(get: Any) -> NoReturn:
    """Raise for an entry that carries more than one payload, naming them."""
    present = [p for p in _PAYLOADS if get(p) is not None]
    raise InvalidLogEntry(f"a LogEntry carries one payload, this one has {', '.join(present)}")


# Signal is a frozen dataclass of 25 fields: its generated __init__ calls
# object.__setattr__ once per field, about 4 us, a third of classify's time. The fast
# path gives the instance, as its __dict__, the dict _classify built: every field, the
# defaults first (their order, then the other fields in the order they were set), which
# is what that __init__ would leave behind; tests compare the two on every fixture.
_SIGNAL_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(Signal) if f.default is not dataclasses.MISSING
}
_SIGNAL_FAST = not hasattr(Signal, "__slots__") and not hasattr(Signal, "__post_init__")
_new_object = object.__new__
_set_attribute = object.__setattr__


def _new_signal(values: dict[str, Any]) -> Signal:
    """A Signal of ``values``: every field, the defaults included. The Signal owns the
    dict from here on."""
    if not _SIGNAL_FAST:
        return Signal(**values)
    signal: Signal = _new_object(Signal)
    _set_attribute(signal, "__dict__", values)
    return signal


def _classify_payload(
    resource_type: str | None,
    text_payload: str,
    json_payload: Mapping[str, Any] | None,
    proto_payload: Mapping[str, Any] | None,
    fields: dict[str, Any],
) -> tuple[SignalKind, str, str | None, str | None]:
    """The kind, the line that decided it, a reason when one is stated, and that line
    lowered when it is at hand (for the node and pool it names)."""
    if proto_payload is not None:
        return (*_audit(proto_payload, fields), None)
    text = text_payload
    if json_payload is not None:
        # A container's own stdout is the workload's to write: a JSON line shaped like a
        # Kubernetes Event there is text, never an Event about a node or pod.
        decided = (
            None
            if resource_type == "k8s_container"
            else kube_events.event_kind(json_payload, fields)
            or capacity.autoscaler_kind(json_payload, fields)
        )
        if decided is not None:
            return (*decided, None)
        text = _json_text(json_payload)
    lowered = text.lower()
    found = matching.rules()[resource_type == "k8s_container"].match(text, lowered)
    if found is None:
        return SignalKind.UNRECOGNIZED, text, None, lowered
    kind, line, reason = found.kind, found.line, found.reason
    fields["signature"] = found.signature.id
    if found.node:
        fields["node"] = fields["node"] or found.node
    if kind is SignalKind.TERMINATION:
        stated = _TERMINATION_REASON.search(line)
        reason = stated["reason"].strip() if stated else None
        lowered = (reason or "").lower()
        # A TerminationEvent that states a preemption or maintenance is that event.
        if "preempt" in lowered or "spot" in lowered:
            kind = SignalKind.PREEMPTION
        elif "maintenance" in lowered:
            kind = SignalKind.MAINTENANCE
    elif kind is SignalKind.OOM_KILLED:
        memcg = _memcg_pod(line)
        if memcg:
            fields["pod_uid"] = memcg["uid"].replace("_", "-")
        reason = "oom-kill" if memcg else "OOMKilling"
    return kind, line, reason, lowered if line is text else None


def _memcg_pod(line: str) -> re.Match[str] | None:
    """``_MEMCG_POD.search(line)``, started where the first of its leading literals is:
    the pattern opens with alternatives, which leave the regex engine no fast scan, and
    a kernel OOM line is long."""
    first = -1
    for literal in _MEMCG_LEADS:
        at = line.find(literal)
        if at >= 0 and (first < 0 or at < first):
            first = at
    # search(line, first) still sees the character before ``first`` for \b.
    return _MEMCG_POD.search(line, first) if first >= 0 else None


def _audit(proto: Mapping[str, Any], fields: dict[str, Any]) -> tuple[SignalKind, str, str | None]:
    """An audit entry: Compute Engine's system events by method, audited pod statuses."""
    method = proto.get("methodName")
    resource_name = proto.get("resourceName")
    if isinstance(resource_name, str):
        # The pattern opens with alternatives, which leave the regex engine no fast scan:
        # start it at the slash before the first "zones/" (or at 0), where a match can
        # start at the earliest; a pod's name holds none.
        at = resource_name.find("zones/")
        match = _INSTANCE.search(resource_name, max(0, at - 1)) if at >= 0 else None
        if match:
            fields["instance"] = match["name"]
            fields["node"] = fields["node"] or match["name"]
            fields["zone"] = fields["zone"] or match["zone"]
            fields["location"] = fields["location"] or match["zone"]
    status = proto.get("status")
    status_msg = status.get("message") if _is_map(status) else None
    if not isinstance(method, str):
        return SignalKind.UNRECOGNIZED, status_msg if isinstance(status_msg, str) else "", None
    status_text = status_msg if isinstance(status_msg, str) else ""
    found = kube_events.audit_signature(method, status_text)
    sig, details = found if found is not None else (None, None)
    if sig is not None and sig.kind is SignalKind.OOM_KILLED:
        decided = kube_events.pod_audit(proto, fields, workload_fields)
        if decided[0] is SignalKind.OOM_KILLED:
            fields["signature"] = sig.id
        return decided
    summary = method if not status_text else f"{method}: {status_text}"
    if sig is None:
        return SignalKind.UNRECOGNIZED, summary, None
    fields["signature"] = sig.id
    if sig.cause:
        # A VM Compute could not create: the node never existed, the instance is named.
        fields["node"] = None
        capacity.read_details(details, fields)
        capacity.read_request(proto.get("request"), fields)
        return sig.kind, summary, sig.cause
    return sig.kind, summary, method.rsplit(".", 1)[-1]


def _json_text(payload: Mapping[str, Any]) -> str:
    for key in ("message", "MESSAGE", "msg", "log", "textPayload"):
        value = payload.get(key)
        if isinstance(value, str):
            return value
    parts = [f"{k}={v}" for k, v in payload.items() if isinstance(v, str | int | float)]
    return " ".join(parts)


def _timestamp(entry: Mapping[str, Any]) -> datetime | None:
    for key in ("timestamp", "receiveTimestamp"):
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidLogEntry(f"'{key}' must be an RFC 3339 string, got {_type_name(value)}")
        try:
            return parse_rfc3339(value, what=key)
        except InvalidContext as exc:
            raise InvalidLogEntry(str(exc)) from exc
    return None


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_EXCERPT else text[: MAX_EXCERPT - 1] + "…"


def _project_from_log_name(log_name: str | None) -> str | None:
    if log_name and log_name.startswith("projects/"):
        return log_name.split("/", 2)[1] or None
    return None


def _is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
    # JSON objects are dicts; the exact type test skips the slower ABC check (hot path).
    return type(value) is dict or isinstance(value, Mapping)


def _str_map(value: object, where: str) -> Mapping[str, str]:
    if value is None:
        return {}
    if type(value) is dict:
        for item in value.values():
            if type(item) is not str:
                break
        else:
            return value  # all strings, as JSON labels are: no copy needed
    if not _is_map(value):
        raise InvalidLogEntry(f"'{where}' must be an object, got {_type_name(value)}")
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def _opt_map(value: object, where: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not _is_map(value):
        raise InvalidLogEntry(f"'{where}' must be an object, got {_type_name(value)}")
    return value


def _opt_str(mapping: Mapping[str, Any], key: str, where: str) -> str | None:
    value = mapping.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidLogEntry(f"'{where}' must be a string, got {_type_name(value)}")
    return value
