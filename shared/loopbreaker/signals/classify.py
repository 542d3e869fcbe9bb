"""Turn one Cloud Logging LogEntry (v2 JSON, as sinks publish it) into a typed Signal.

Pure and total: any JSON value either yields a Signal (``unrecognized`` when nothing
matches) or raises :class:`InvalidLogEntry` naming what is wrong.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, TypeGuard

from loopbreaker.errors import InvalidContext, InvalidLogEntry
from loopbreaker.model import KUBEFLOW_CHIEF_TYPES, Signal, SignalKind, WorkloadKind
from loopbreaker.signals.decode import type_name as _type_name
from loopbreaker.timeutil import parse_rfc3339

MAX_EXCERPT = 300

_PAYLOADS = ("textPayload", "jsonPayload", "protoPayload")
_SEVERITIES = frozenset(
    {"DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"}
)

# Compute Engine system-event audit methods (cloudaudit.googleapis.com%2Fsystem_event).
# Every phrase the classifier turns into a host fault, in text and in journald payloads:
# a phrase missing here would be seen offline but never read live.
NODE_FAULT_PHRASES = (
    "host error",
    "kernel panic",
    "hardware failure",
    "Hardware Error",
    "Machine Check",
    "NVRM: Xid",
    "NodeNotReady",
    "TerminationEvent",
    "BUG:",
    "node-problem-detector",
)

AUDIT_METHODS: dict[str, SignalKind] = {
    "compute.instances.preempted": SignalKind.PREEMPTION,
    "compute.instances.baremetalCaretakerPreempted": SignalKind.PREEMPTION,
    "compute.instances.hostError": SignalKind.HOST_ERROR,
    "compute.instances.automaticRestart": SignalKind.AUTOMATIC_RESTART,
    "compute.instances.migrateOnHostMaintenance": SignalKind.MAINTENANCE,
    "compute.instances.terminateOnHostMaintenance": SignalKind.MAINTENANCE,
    "compute.instances.guestTerminate": SignalKind.GUEST_TERMINATE,
}

# Kubernetes Events that stop the workload's pods without a fault of their VM.
#: The scheduler evicts a lower-priority pod for a higher one (``related`` = preemptor).
PREEMPTED_REASON = "Preempted"
#: The kubelet's eviction manager, when its node runs short of a resource.
EVICTED_REASON = "Evicted"
#: Node Events of the kubelet (and node-problem-detector's OOMKilling) under pressure.
NODE_PRESSURE_REASONS = (
    "EvictionThresholdMet",
    "NodeHasInsufficientMemory",
    "NodeHasDiskPressure",
    "NodeHasInsufficientPID",
)
NODE_OOM_REASON = "OOMKilling"
#: Pod Events of the kubelet whose message may be an image pull failure.
IMAGE_EVENT_REASONS = ("Failed", "BackOff", "ErrImageNeverPull", "InspectFailed")
#: What those messages say when the image is the problem (kubelet ``images`` package).
IMAGE_PULL_PHRASES = (
    "Failed to pull image",
    "ErrImagePull",
    "ImagePullBackOff",
    "Back-off pulling image",
    "ErrImageNeverPull",
    "InvalidImageName",
)
#: Kernel lines of an OOM kill (``oom-kill:`` names the memory cgroup, hence the pod).
OOM_KILL_PHRASES = ("oom-kill:", "Memory cgroup out of memory", "Out of memory: Killed process")
#: Kubernetes audit methods whose pod status can say a container was ``OOMKilled``: the
#: kubelet's status patches, and the pod (with its labels) as it is deleted.
POD_AUDIT_METHODS = (
    "io.k8s.core.v1.pods.status.patch",
    "io.k8s.core.v1.pods.status.update",
    "io.k8s.core.v1.pods.delete",
)
OOM_KILLED_REASON = "OOMKilled"

# TFJobRestarting, PyTorchJobRestarting, the operator's generic JobRestarting.
_JOB_RESTARTING = re.compile(r"^(?:[A-Za-z]*Job)?Restarting$")
_TERMINATION_REASON = re.compile(r"terminated due to:?\s*(?P<reason>[^.\n]+)", re.I)

# Ordered: the first pattern that matches names the kind. Interruption markers come first
# because their lines also mention host errors; workload faults before generic words.
_TEXT_RULES: tuple[tuple[SignalKind, re.Pattern[str], bool], ...] = (
    # (kind, pattern, applies to container logs too)
    (SignalKind.PREEMPTION, re.compile(r"\bPreemptionEvent\b"), False),
    (SignalKind.MAINTENANCE, re.compile(r"\bMaintenanceEvent\b"), False),
    (SignalKind.TERMINATION, re.compile(r"\bTerminationEvent\b"), False),
    (
        SignalKind.NCCL_TIMEOUT,
        re.compile(
            r"Watchdog caught collective operation timeout"
            r"|Some NCCL operations have failed or timed out"
            r"|NCCL WARN[^\n]*?\btime(?:d[ -]?)?out"
            r"|NCCL[^\n]*?collective[^\n]*?\btime(?:d[ -]?)?out"
            r"|collective operation timeout",
            re.I,
        ),
        True,
    ),
    (
        SignalKind.MEGASCALE_HANG,
        re.compile(r"mega ?scale[^\n]*?(?:hang|hung|stuck|time(?:d[ -]?)?out|deadline)", re.I),
        True,
    ),
    (SignalKind.DIST_BACKEND_ERROR, re.compile(r"\bDistBackendError\b"), True),
    (
        SignalKind.WORKER_CRASH,
        re.compile(
            r"\bChildFailedError\b|Child process \d+ died with exit code|\bdied with exit code\b"
        ),
        True,
    ),
    (SignalKind.CONNECTION_RESET, re.compile(r"connection reset by peer", re.I), True),
    (
        SignalKind.UNSCHEDULABLE,
        re.compile(r"\bFailedScheduling\b|\d+/\d+ nodes are available:[^\n]*Insufficient", re.I),
        True,
    ),
    (
        SignalKind.OOM_KILLED,
        re.compile(r"\boom-kill:|Memory cgroup out of memory|Out of memory: Killed process", re.I),
        False,
    ),
    (SignalKind.NODE_NOT_READY, re.compile(r"\bNodeNotReady\b"), False),
    (SignalKind.KERNEL_PANIC, re.compile(r"kernel panic", re.I), False),
    (SignalKind.KERNEL_BUG, re.compile(r"\bBUG: "), False),
    (
        SignalKind.HARDWARE_FAILURE,
        re.compile(r"hardware (?:failure|error)|machine check|NVRM: Xid", re.I),
        False,
    ),
    (SignalKind.HOST_ERROR, re.compile(r"\bhost[ _-]?error\b", re.I), False),
    (
        SignalKind.NODE_PROBLEM_DETECTOR_EXIT,
        re.compile(r"node-problem-detector(?:\.service)?[^\n]*(?:exited|failed)", re.I),
        False,
    ),
)

# Literals (lower case) every match of a rule starts with: a substring test costs a
# fraction of a regex search and most lines match no rule, so a rule whose literals are
# all absent is skipped, and otherwise searched from the first literal found (no match
# can start earlier). UNSCHEDULABLE's "N/M nodes are available" starts with digits, so
# its literal only gates the search. tests/test_functions_hot_path.py checks both claims.
_GUARDS: dict[SignalKind, tuple[str, ...]] = {
    SignalKind.PREEMPTION: ("preemptionevent",),
    SignalKind.MAINTENANCE: ("maintenanceevent",),
    SignalKind.TERMINATION: ("terminationevent",),
    SignalKind.NCCL_TIMEOUT: (
        "watchdog caught collective operation timeout",
        "some nccl operations have failed or timed out",
        "nccl",
        "collective operation timeout",
    ),
    SignalKind.MEGASCALE_HANG: ("mega",),
    SignalKind.DIST_BACKEND_ERROR: ("distbackenderror",),
    SignalKind.WORKER_CRASH: ("childfailederror", "child process ", "died with exit code"),
    SignalKind.CONNECTION_RESET: ("connection reset by peer",),
    SignalKind.UNSCHEDULABLE: ("failedscheduling", "nodes are available"),
    SignalKind.OOM_KILLED: ("oom-kill:", "memory cgroup out of memory", "out of memory: killed"),
    SignalKind.NODE_NOT_READY: ("nodenotready",),
    SignalKind.KERNEL_PANIC: ("kernel panic",),
    SignalKind.KERNEL_BUG: ("bug: ",),
    SignalKind.HARDWARE_FAILURE: ("hardware", "machine check", "nvrm: xid"),
    SignalKind.HOST_ERROR: ("host",),
    SignalKind.NODE_PROBLEM_DETECTOR_EXIT: ("node-problem-detector",),
}
_GATE_ONLY = frozenset({SignalKind.UNSCHEDULABLE})
# A literal every match also contains: NCCL lines are common, NCCL *timeouts* are not.
_ALSO_REQUIRED: dict[SignalKind, str] = {SignalKind.NCCL_TIMEOUT: "time"}


# The rules with their literals, flattened once for the per-entry loop:
# (kind, pattern, for containers, literals, search from the first literal, also required).
_RULES: tuple[tuple[SignalKind, re.Pattern[str], bool, tuple[str, ...], bool, str | None], ...] = (
    tuple(
        (kind, pattern, containers, _GUARDS[kind], kind not in _GATE_ONLY, _ALSO_REQUIRED.get(kind))
        for kind, pattern, containers in _TEXT_RULES
    )
)


class _LiteralScan:
    """Whether a lowered text holds any literal of the rules that apply; most lines hold
    none, and this says so for the cost of a few searches, not one per literal.

    A literal that contains another is dropped (the shorter one is there whenever it
    is). The rest are searched as one pattern per first character: a pattern that
    starts with a literal is searched by a fast scan for it, where one alternation of
    every literal is tried at each character.
    """

    def __init__(self, literals: set[str]) -> None:
        kept = sorted(g for g in literals if not any(o != g and o in g for o in literals))
        by_first: dict[str, list[str]] = {}
        for literal in kept:
            by_first.setdefault(literal[0], []).append(literal[1:])
        self.patterns = tuple(
            re.compile(
                re.escape(first)
                + "(?:"
                + "|".join(re.escape(r) for r in sorted(rests, key=lambda r: (-len(r), r)))
                + ")"
            )
            for first, rests in sorted(by_first.items())
        )

    def any_in(self, lowered: str) -> bool:
        for pattern in self.patterns:  # noqa: SIM110 - a loop, not any(): a hot path
            if pattern.search(lowered) is not None:
                return True
        return False


def _rule_literals(container: bool) -> set[str]:
    return {g for _, _, for_c, guards, _, _ in _RULES if for_c or not container for g in guards}


# (every rule, the rules for container logs)
_SCANS = (_LiteralScan(_rule_literals(container=False)), _LiteralScan(_rule_literals(True)))


_NODE_IN_TEXT = (
    re.compile(r"\bNode '(?P<node>[^']+)'"),
    re.compile(r"\bNode (?P<node>[a-z0-9][a-z0-9.-]*) status is now", re.I),
    re.compile(r"^[A-Z][a-z]{2} +\d+ [\d:]{8} (?P<node>[a-z0-9][a-z0-9.-]*) ", re.M),
)
# Guards of _NODE_IN_TEXT, in order (None: the syslog pattern, checked by its shape).
_NODE_GUARDS = ("node '", "status is now", None)
_POOL_IN_TEXT = re.compile(r"node pool '(?P<pool>[^']+)'", re.I)
_INSTANCE = re.compile(r"(?:^|/)zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)$")
_POD_NAME = re.compile(r"^(?P<rest>.+)-(?P<job>\d+)-(?P<pod>\d+)-[a-z0-9]{5}$")
# A pod's memory cgroup (cgroupfs ``/kubepods/burstable/pod<uid>/<id>``, systemd
# ``kubepods-burstable-pod<uid with _>.slice``) in an oom-kill line.
_MEMCG_POD = re.compile(
    r"(?:task_memcg|oom_memcg)=[^,\s]*?pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}"
    r"[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)
_PREEMPTED_ON_NODE = re.compile(r"\bon node (?P<node>[a-z0-9][a-z0-9.-]*)")
# The registry's answer in a kubelet pull failure: an HTTP status, else the gRPC code.
_PULL_HTTP = re.compile(r"\b(?P<status>[45]\d\d [A-Z][A-Za-z]+(?: [A-Z][A-Za-z]+)*)")
_PULL_CODE = re.compile(r"\bcode = (?P<code>[A-Za-z]+)")
_AUDIT_POD = re.compile(r"^core/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<pod>[^/]+)(?:/status)?$")


def classify(entry: object) -> Signal:
    """Classify one LogEntry; raise InvalidLogEntry if ``entry`` is not one."""
    return _classify(_parts(entry))


def triage(entry: object) -> Quiet | Signal:
    """:func:`screen`, else :func:`classify`, with the entry's fields checked once."""
    parts = _parts(entry)
    quiet = _screen(parts)
    return quiet if quiet is not None else _classify(parts)


def _classify(parts: _Parts) -> Signal:
    rlabels, labels = parts.rlabels, parts.labels
    zone = rlabels.get("zone")
    fields: dict[str, Any] = {
        "timestamp": parts.timestamp,
        "severity": parts.severity,
        "project": rlabels.get("project_id") or _project_from_log_name(parts.log_name),
        "cluster": rlabels.get("cluster_name"),
        "location": rlabels.get("location") or zone,
        "node_pool": rlabels.get("node_pool_name")
        or labels.get("k8s-node/cloud_google_com/gke-nodepool"),
        "node": rlabels.get("node_name") or labels.get("compute.googleapis.com/resource_name"),
        "namespace": rlabels.get("namespace_name"),
        "pod": rlabels.get("pod_name"),
        "container": rlabels.get("container_name"),
        "instance_id": rlabels.get("instance_id"),
        "zone": zone,
        "insert_id": parts.insert_id,
        "log_name": parts.log_name,
        "resource_type": parts.resource_type,
    }
    _workload_fields(labels, fields)

    kind, text, reason = _classify_payload(
        parts.resource_type, parts.text, parts.json_payload, parts.proto_payload, fields
    )
    if reason:
        fields["reason"] = reason
    _fill_from_text(text, fields)
    _fill_coordinator(fields)
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
    if parts.proto_payload is not None:
        return None  # audit entries: the method decides, not the text
    is_container = parts.resource_type == "k8s_container"
    json_payload = parts.json_payload
    if json_payload is None:
        text = parts.text
    elif is_container:
        text = _json_text(json_payload)
    else:
        return None  # may be a Kubernetes Event: its reason decides
    if _SCANS[is_container].any_in(text.lower()):
        return None
    rlabels, labels = parts.rlabels, parts.labels
    node = rlabels.get("node_name") or labels.get("compute.googleapis.com/resource_name")
    if not node:
        # "node_pool" is not part of the identity: spare the search for it.
        found: dict[str, Any] = {"node": node, "node_pool": True}
        _fill_from_text(text, found)
        node = found["node"]
    workload, kind, _ = _workload_of(labels)
    return Quiet(
        Identity(
            rlabels.get("project_id") or _project_from_log_name(parts.log_name),
            rlabels.get("cluster_name"),
            rlabels.get("namespace_name"),
            workload,
            kind,
            node,
        ),
        parts.timestamp,
        parts.insert_id,
    )


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
    if (text_payload is not None) + (raw_json is not None) + (raw_proto is not None) > 1:
        present = [p for p in _PAYLOADS if get(p) is not None]
        raise InvalidLogEntry(f"a LogEntry carries one payload, this one has {', '.join(present)}")
    if text_payload is not None and not isinstance(text_payload, str):
        raise InvalidLogEntry(f"'textPayload' must be a string, got {_type_name(text_payload)}")
    json_payload = _opt_map(raw_json, "jsonPayload")
    proto_payload = _opt_map(raw_proto, "protoPayload")

    timestamp = _timestamp(entry)
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
    return _Parts(
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
    )


# Signal is a frozen dataclass of 25 fields: its generated __init__ calls
# object.__setattr__ once per field, about 4 us, a third of classify's time. The fast
# path fills the instance's __dict__ directly with every field (defaults first), which
# is what that __init__ would leave behind; tests compare the two on every fixture.
_SIGNAL_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(Signal) if f.default is not dataclasses.MISSING
}
_SIGNAL_FAST = not hasattr(Signal, "__slots__") and not hasattr(Signal, "__post_init__")


def _new_signal(values: dict[str, Any]) -> Signal:
    if not _SIGNAL_FAST:
        return Signal(**values)
    signal: Signal = object.__new__(Signal)
    signal.__dict__.update(_SIGNAL_DEFAULTS)
    signal.__dict__.update(values)
    return signal


def _classify_payload(
    resource_type: str | None,
    text_payload: str,
    json_payload: Mapping[str, Any] | None,
    proto_payload: Mapping[str, Any] | None,
    fields: dict[str, Any],
) -> tuple[SignalKind, str, str | None]:
    """Return the kind, the line that decided it, and a reason when one is stated."""
    if proto_payload is not None:
        method = proto_payload.get("methodName")
        resource_name = proto_payload.get("resourceName")
        if isinstance(resource_name, str):
            match = _INSTANCE.search(resource_name)
            if match:
                fields["instance"] = match["name"]
                fields["node"] = fields["node"] or match["name"]
                fields["zone"] = fields["zone"] or match["zone"]
                fields["location"] = fields["location"] or match["zone"]
        status = proto_payload.get("status")
        status_msg = status.get("message") if isinstance(status, Mapping) else None
        if isinstance(method, str) and method in POD_AUDIT_METHODS:
            return _pod_audit(proto_payload, fields)
        if isinstance(method, str):
            summary = method if not isinstance(status_msg, str) else f"{method}: {status_msg}"
            kind = AUDIT_METHODS.get(method)
            if kind is not None:
                return kind, summary, method.rsplit(".", 1)[-1]
            return SignalKind.UNRECOGNIZED, summary, None
        return SignalKind.UNRECOGNIZED, status_msg if isinstance(status_msg, str) else "", None

    text = text_payload
    if json_payload is not None:
        # A container's own stdout is the workload's to write: a JSON line shaped like a
        # Kubernetes Event there is text, never an Event about a node or pod.
        event_kind = None if resource_type == "k8s_container" else _event_kind(json_payload, fields)
        if event_kind is not None:
            return event_kind
        text = _json_text(json_payload)

    is_container = resource_type == "k8s_container"
    lowered = text.lower()
    if not _SCANS[is_container].any_in(lowered):
        return SignalKind.UNRECOGNIZED, text, None
    # lower() may change the length of non-ASCII text; then offsets do not carry over.
    same_length = len(lowered) == len(text)
    for kind, pattern, for_containers, guards, from_guard, also in _RULES:
        if is_container and not for_containers:
            continue
        if also is not None and also not in lowered:
            continue
        start = -1
        for guard in guards:
            at = lowered.find(guard)
            if at != -1 and (start == -1 or at < start):
                start = at
        if start == -1:
            continue
        match = pattern.search(text, start if from_guard and same_length else 0)
        if match is None:
            continue
        line = _line_around(text, match.start())
        reason = None
        if kind is SignalKind.TERMINATION:
            found = _TERMINATION_REASON.search(line)
            reason = found["reason"].strip() if found else None
            lowered = (reason or "").lower()
            # A TerminationEvent that states a preemption or maintenance is that event.
            if "preempt" in lowered or "spot" in lowered:
                kind = SignalKind.PREEMPTION
            elif "maintenance" in lowered:
                kind = SignalKind.MAINTENANCE
        elif kind is SignalKind.OOM_KILLED:
            memcg = _MEMCG_POD.search(line)
            if memcg:
                fields["pod_uid"] = memcg["uid"].replace("_", "-")
            reason = "oom-kill" if memcg else "OOMKilling"
        return kind, line, reason
    return SignalKind.UNRECOGNIZED, text, None


def _event_kind(
    payload: Mapping[str, Any], fields: dict[str, Any]
) -> tuple[SignalKind, str, str | None] | None:
    """Kubernetes Events (log ``events``): decide on the structured reason first."""
    involved = payload.get("involvedObject")
    reason = payload.get("reason")
    if not isinstance(involved, Mapping) or not isinstance(reason, str):
        return None
    obj_kind = involved.get("kind")
    obj_name = involved.get("name")
    obj_ns = involved.get("namespace")
    message = payload.get("message")
    message = message if isinstance(message, str) else ""
    if isinstance(obj_name, str):
        if obj_kind == "Node":
            fields["node"] = fields["node"] or obj_name
        elif obj_kind == "Pod":
            fields["pod"] = fields["pod"] or obj_name
            uid = involved.get("uid")
            fields["pod_uid"] = uid if isinstance(uid, str) and uid else None
        elif obj_kind == "JobSet" or (isinstance(obj_kind, str) and obj_kind.endswith("Job")):
            fields["workload"] = fields["workload"] or obj_name
            kind = WorkloadKind.from_api_kind(obj_kind)
            fields["workload_kind"] = fields.get("workload_kind") or (kind and kind.value)
    if isinstance(obj_ns, str):
        fields["namespace"] = fields["namespace"] or obj_ns
    line = f"{reason}: {message}" if message else reason
    if reason == "NodeNotReady":
        return SignalKind.NODE_NOT_READY, line, reason
    pod_fault = _pod_fault_event(reason, obj_kind, message, payload, fields)
    if pod_fault is SignalKind.IMAGE_PULL_FAILED:
        return pod_fault, line, pull_error(message) or reason
    if pod_fault is not None:
        return pod_fault, line, reason
    if reason in ("FailedScheduling", "NotTriggerScaleUp"):
        return SignalKind.UNSCHEDULABLE, line, reason
    if _JOB_RESTARTING.match(reason) and obj_kind != "Pod":
        if not fields.get("workload_kind"):
            kind = WorkloadKind.from_api_kind(reason[: -len("Restarting")])
            fields["workload_kind"] = kind.value if kind else None
        return SignalKind.JOB_RESTARTING, line, reason
    return None


def _pod_fault_event(
    reason: str, obj_kind: object, message: str, payload: Mapping[str, Any], fields: dict[str, Any]
) -> SignalKind | None:
    """Preempted and Evicted pods, image pull failures, nodes under pressure."""
    if obj_kind == "Node":
        if reason in NODE_PRESSURE_REASONS:
            return SignalKind.NODE_PRESSURE
        return SignalKind.OOM_KILLED if reason == NODE_OOM_REASON else None
    if obj_kind != "Pod":
        return None
    source = payload.get("source")
    host = source.get("host") if isinstance(source, Mapping) else None
    if reason == PREEMPTED_REASON:
        # "Preempted by pod <uid> on node <node>": the victim's node.
        on_node = _PREEMPTED_ON_NODE.search(message)
        if on_node:
            fields["node"] = fields["node"] or on_node["node"]
        related = payload.get("related")
        if isinstance(related, Mapping) and related.get("kind") in (None, "Pod"):
            name, namespace, uid = related.get("name"), related.get("namespace"), related.get("uid")
            if isinstance(name, str) and name:
                fields["related_pod"] = (
                    f"{namespace}/{name}" if isinstance(namespace, str) else name
                )
            fields["related_uid"] = uid if isinstance(uid, str) and uid else None
        return SignalKind.PRIORITY_PREEMPTED
    if reason == EVICTED_REASON:
        # The kubelet that evicted the pod reports from its node.
        fields["node"] = fields["node"] or (host if isinstance(host, str) and host else None)
        return SignalKind.EVICTED
    if reason in IMAGE_EVENT_REASONS and any(p in message for p in IMAGE_PULL_PHRASES):
        fields["node"] = fields["node"] or (host if isinstance(host, str) and host else None)
        return SignalKind.IMAGE_PULL_FAILED
    return None


def pull_error(message: str) -> str | None:
    """The registry's answer in a kubelet image pull failure (``403 Forbidden``,
    ``NotFound``), from the whole message: an excerpt may cut it off."""
    status = _PULL_HTTP.search(message)
    if status:
        return status["status"]
    code = _PULL_CODE.search(message)
    if code and code["code"] != "Unknown":
        return code["code"]
    return "not found" if message.rstrip().endswith("not found") else None


def _pod_audit(
    proto: Mapping[str, Any], fields: dict[str, Any]
) -> tuple[SignalKind, str, str | None]:
    """A Kubernetes audit entry about a pod: ``OOMKilled`` when a container of the pod
    status it carries (the kubelet's patch, or the pod as it was deleted) says so."""
    method = str(proto.get("methodName"))
    name = proto.get("resourceName")
    match = _AUDIT_POD.match(name) if isinstance(name, str) else None
    if match:
        fields["namespace"] = fields["namespace"] or match["ns"]
        fields["pod"] = fields["pod"] or match["pod"]
    pods = [p for p in (proto.get("request"), proto.get("response")) if isinstance(p, Mapping)]
    for pod in pods:
        meta = pod.get("metadata")
        if not isinstance(meta, Mapping):
            continue
        uid = meta.get("uid")
        if isinstance(uid, str) and uid:
            fields["pod_uid"] = uid
        labels = meta.get("labels")
        if isinstance(labels, Mapping) and not fields.get("workload"):
            _workload_fields(
                {
                    f"k8s-pod/{k.replace('.', '_')}": v
                    for k, v in labels.items()
                    if isinstance(v, str)
                },
                fields,
            )
    for pod in pods:
        status = pod.get("status")
        statuses = status.get("containerStatuses") if isinstance(status, Mapping) else None
        for container in statuses if isinstance(statuses, list) else []:
            killed = _oom_termination(container)
            if killed is None:
                continue
            name = container.get("name")
            if isinstance(name, str):
                fields["container"] = name
            code = killed.get("exitCode")
            limit = _memory_limit(pod, name)
            text = (
                f"{method}: container {name}{f' (memory limit {limit})' if limit else ''} of "
                f"pod {fields['namespace']}/{fields['pod']} terminated: OOMKilled (exit code "
                f"{code})"
            )
            return SignalKind.OOM_KILLED, text, OOM_KILLED_REASON
    return SignalKind.UNRECOGNIZED, method, None


def _memory_limit(pod: Mapping[str, Any], container: object) -> str | None:
    """``resources.limits.memory`` of the container, when the pod's spec is in the entry."""
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for c in containers if isinstance(containers, list) else []:
        if isinstance(c, Mapping) and c.get("name") == container:
            resources = c.get("resources")
            limits = resources.get("limits") if isinstance(resources, Mapping) else None
            value = limits.get("memory") if isinstance(limits, Mapping) else None
            return value if isinstance(value, str) and value else None
    return None


def _oom_termination(container: object) -> Mapping[str, Any] | None:
    if not isinstance(container, Mapping):
        return None
    for key in ("state", "lastState"):
        state = container.get(key)
        terminated = state.get("terminated") if isinstance(state, Mapping) else None
        if isinstance(terminated, Mapping) and terminated.get("reason") == OOM_KILLED_REASON:
            return terminated
    return None


def _json_text(payload: Mapping[str, Any]) -> str:
    for key in ("message", "MESSAGE", "msg", "log", "textPayload"):
        value = payload.get(key)
        if isinstance(value, str):
            return value
    parts = [f"{k}={v}" for k, v in payload.items() if isinstance(v, str | int | float)]
    return " ".join(parts)


def _fill_from_text(text: str, fields: dict[str, Any]) -> None:
    lowered = text.lower()
    if not fields.get("node"):
        for pattern, guard in zip(_NODE_IN_TEXT, _NODE_GUARDS, strict=True):
            if guard is None:
                # The syslog pattern anchors at line starts: a one-line text can only
                # match at 0, and only if it starts like "May".
                if "\n" not in text and not (text[:1].isupper() and text[1:3].islower()):
                    continue
            elif guard not in lowered:
                continue
            match = pattern.search(text)
            if match:
                fields["node"] = match["node"]
                break
    if not fields.get("node_pool") and "node pool '" in lowered:
        match = _POOL_IN_TEXT.search(text)
        if match:
            fields["node_pool"] = match["pool"]


def _workload_fields(labels: Mapping[str, str], fields: dict[str, Any]) -> None:
    if not labels:  # node, node-pool and audit entries carry no pod labels
        fields["workload"] = fields["coordinator"] = None
        return
    workload, kind, kubeflow = _workload_of(labels)
    fields["workload"] = workload
    replica_type = labels.get("k8s-pod/training_kubeflow_org/replica-type")
    replica_index = labels.get("k8s-pod/training_kubeflow_org/replica-index")
    if kind is not None or kubeflow:
        fields["workload_kind"] = kind
    if kubeflow:
        fields["replica_type"] = replica_type.lower() if replica_type else None
    coordinator: bool | None = None
    job_index = labels.get("k8s-pod/jobset_sigs_k8s_io/job-index")
    pod_index = labels.get("k8s-pod/batch_kubernetes_io/job-completion-index")
    if job_index is not None and pod_index is not None:
        coordinator = job_index == "0" and pod_index == "0"
    endpoint = labels.get("k8s-pod/jobset_sigs_k8s_io/coordinator")
    pod = fields.get("pod")
    if coordinator is None and endpoint and isinstance(pod, str):
        # The label holds the coordinator's endpoint "<jobset>-<rjob>-<job>-<pod>.<subdomain>";
        # pod names add a random suffix to that first part.
        coordinator = pod.rsplit("-", 1)[0] == endpoint.split(".", 1)[0]
    if coordinator is None and replica_type is not None:
        coordinator = replica_type.lower() in KUBEFLOW_CHIEF_TYPES or (
            replica_type.lower() == "worker" and replica_index == "0"
        )
    fields["coordinator"] = coordinator


def _workload_of(labels: Mapping[str, str]) -> tuple[str | None, str | None, bool]:
    """The workload a pod's labels name, its kind, and whether Kubeflow's labels name it."""
    jobset = labels.get("k8s-pod/jobset_sigs_k8s_io/jobset-name")
    if jobset:
        return jobset, WorkloadKind.JOBSET.value, False
    kubeflow = labels.get("k8s-pod/training_kubeflow_org/job-name")
    if kubeflow:
        operator = labels.get("k8s-pod/training_kubeflow_org/operator-name")
        replica_type = labels.get("k8s-pod/training_kubeflow_org/replica-type")
        kind = kubeflow_kind(operator, replica_type)
        return kubeflow, kind.value if kind else None, True
    return jobset or kubeflow, None, False


def kubeflow_kind(operator: str | None, replica_type: str | None) -> WorkloadKind | None:
    """The Kubeflow kind from the operator's pod labels: ``operator-name`` names the
    controller (``tfjob-controller``); failing that, TensorFlow-only replica types."""
    if operator:
        kind = operator.removesuffix("-controller")
        for candidate in WorkloadKind:
            if candidate.kubeflow and candidate.value == kind:
                return candidate
    if replica_type and replica_type.lower() in ("chief", "ps", "evaluator"):
        return WorkloadKind.TFJOB
    return None


def _fill_coordinator(fields: dict[str, Any]) -> None:
    """Fall back on the JobSet pod naming ``<jobset>-<rjob>-<job>-<pod>-<suffix>``."""
    if fields.get("coordinator") is not None:
        return
    pod, workload = fields.get("pod"), fields.get("workload")
    if not isinstance(pod, str) or not isinstance(workload, str):
        return
    if not pod.startswith(workload + "-"):
        return
    match = _POD_NAME.match(pod)
    if match:
        fields["coordinator"] = match["job"] == "0" and match["pod"] == "0"


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


def _line_around(text: str, index: int) -> str:
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start : end if end != -1 else len(text)]


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
