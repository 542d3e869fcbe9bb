"""Kubernetes Events and audit entries: the catalog decides the kind, this module reads
the fields each kind carries (the preemptor, the evicting kubelet, the OOM-killed
container of an audited pod status). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, TypeGuard

from loopbreaker.model import SignalKind, WorkloadKind
from loopbreaker.signals import catalog
from loopbreaker.signals.catalog import Signature
from loopbreaker.signals.matching import LiteralScan

#: A container status that says the kernel killed it at its memory limit.
OOM_KILLED_REASON = "OOMKilled"

_PREEMPTED_ON_NODE = re.compile(r"\bon node (?P<node>[a-z0-9][a-z0-9.-]*)")
# The registry's answer in a kubelet pull failure: an HTTP status, else the gRPC code.
_PULL_HTTP = re.compile(r"\b(?P<status>[45]\d\d [A-Z][A-Za-z]+(?: [A-Z][A-Za-z]+)*)")
_PULL_CODE = re.compile(r"\bcode = (?P<code>[A-Za-z]+)")
# Why a pull failed when the registry gave no answer: the network's (Go's net errors in
# containerd's 'failed to pull and unpack image' chain), or the kubelet's own throttle
# (images/helpers.go, registryPullQPS).
_PULL_CAUSE = re.compile(r"\b(?P<cause>i/o timeout|connection timed out|pull QPS exceeded)\b")
# A pull failure's message is long (the image named three times, the token URL): patterns
# that open with \b get no fast scan from the regex engine, so each is started where a
# match can start, or skipped. _PULL_HTTP's match starts at a match of _PULL_HTTP_AT; a
# search started at ``pos`` still sees the character before it for \b.
_PULL_HTTP_AT = re.compile(r"[45]\d\d [A-Z]")
_PULL_CODE_AT = "code = "
_PULL_CAUSES = ("i/o timeout", "connection timed out", "pull QPS exceeded")
_AUDIT_POD = re.compile(r"^core/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<pod>[^/]+)(?:/status)?$")
_RESTARTING = "Restarting"

Classified = tuple[SignalKind, str, str | None]
#: Reads an audited pod's labels into the signal's workload fields (classify's).
LabelReader = Callable[[Mapping[str, str], dict[str, Any]], None]


@cache
def _event_signatures() -> dict[str, tuple[Signature, ...]]:
    by_reason: dict[str, list[Signature]] = {}
    for sig in catalog.load().events():
        for reason in sig.reasons:
            by_reason.setdefault(reason, []).append(sig)
    return {reason: tuple(sigs) for reason, sigs in by_reason.items()}


@cache
def _reason_patterns() -> tuple[tuple[Signature, ...], LiteralScan]:
    """The signatures whose reason is a message, and one scan for all their literals."""
    sigs = tuple(s for s in catalog.load().events() if s.reason_pattern is not None)
    return sigs, LiteralScan(lit for s in sigs for lit in s.reason_literals)


def _by_reason_pattern(reason: str) -> tuple[Signature, ...]:
    """Signatures whose reason is a message (JobSet v0.5): most reasons are no such one,
    and one pass of the scan for all their literals says so, however many there are."""
    sigs, scan = _reason_patterns()
    held = scan.present(reason.lower())
    if not held:
        return ()
    return tuple(
        sig
        for sig in sigs
        if any(lit in held for lit in sig.reason_literals)
        and sig.reason_pattern
        and sig.reason_pattern.search(reason)
    )


@cache
def _audit_signatures() -> dict[str, tuple[Signature, ...]]:
    by_method: dict[str, list[Signature]] = {}
    for sig in catalog.load().audits():
        for method in sig.methods:
            by_method.setdefault(method, []).append(sig)
    return {method: tuple(sigs) for method, sigs in by_method.items()}


def event_signature(reason: str, obj_kind: object, message: str) -> Signature | None:
    """The first event signature for this reason, object kind and message."""
    candidates = _event_signatures().get(reason)
    if candidates is None:
        candidates = _by_reason_pattern(reason)
    for sig in candidates:
        if sig.objects and obj_kind not in sig.objects:
            continue
        if sig.pattern is not None and sig.pattern.search(message) is None:
            continue
        return sig
    return None


def audit_signature(method: str, status: str = "") -> tuple[Signature, re.Match[str] | None] | None:
    """The first audit signature for this method whose pattern (if any) the status
    message matches, with that match."""
    for sig in _audit_signatures().get(method, ()):
        if sig.pattern is None:
            return sig, None
        lowered = status.lower()
        if any(lit in lowered for lit in sig.literals):
            found = sig.pattern.search(status)
            if found is not None:
                return sig, found
    return None


def event_kind(payload: Mapping[str, Any], fields: dict[str, Any]) -> Classified | None:
    """A Kubernetes Event (log ``events``): decided on its structured reason first."""
    involved = payload.get("involvedObject")
    reason = payload.get("reason")
    if not _is_map(involved) or not isinstance(reason, str):
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
        elif isinstance(obj_kind, str) and (obj_kind == "JobSet" or obj_kind.endswith("Job")):
            fields["workload"] = fields["workload"] or obj_name
            named = WorkloadKind.from_api_kind(obj_kind)
            fields["workload_kind"] = fields.get("workload_kind") or (named and named.value)
    if isinstance(obj_ns, str):
        fields["namespace"] = fields["namespace"] or obj_ns
    sig = event_signature(reason, obj_kind, message)
    if sig is None:
        return None
    line = f"{reason}: {message}" if message else reason
    kind = sig.kind
    fields["signature"] = sig.id
    if kind is SignalKind.PRIORITY_PREEMPTED:
        _preemptor(payload, message, fields)
    elif kind in (SignalKind.EVICTED, SignalKind.IMAGE_PULL_FAILED) and obj_kind == "Pod":
        # The kubelet that evicted the pod, or failed to pull its image, reports from its node.
        source = payload.get("source")
        host = source.get("host") if _is_map(source) else None
        reporter = host if isinstance(host, str) and host else None
        fields["node"] = fields["node"] or reporter
        if kind is SignalKind.IMAGE_PULL_FAILED:
            return kind, line, pull_error(message) or reason
    elif kind is SignalKind.JOB_RESTARTING and not fields.get("workload_kind"):
        found = WorkloadKind.from_api_kind(reason.removesuffix(_RESTARTING))
        fields["workload_kind"] = found.value if found else None
    return kind, line, reason


def _preemptor(payload: Mapping[str, Any], message: str, fields: dict[str, Any]) -> None:
    """ "Preempted by pod <uid> on node <node>": the victim's node, and the preemptor."""
    on_node = _PREEMPTED_ON_NODE.search(message)
    if on_node:
        fields["node"] = fields["node"] or on_node["node"]
    related = payload.get("related")
    if _is_map(related) and related.get("kind") in (None, "Pod"):
        name, namespace, uid = related.get("name"), related.get("namespace"), related.get("uid")
        if isinstance(name, str) and name:
            fields["related_pod"] = f"{namespace}/{name}" if isinstance(namespace, str) else name
        fields["related_uid"] = uid if isinstance(uid, str) and uid else None


def _is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
    # JSON objects are dicts: the exact type test spares isinstance's ABC check, a
    # Python-level call, on every Event and audit entry.
    return type(value) is dict or isinstance(value, Mapping)


def pull_error(message: str) -> str | None:
    """The registry's answer in a kubelet image pull failure (``403 Forbidden``,
    ``NotFound``), else the network's or the kubelet's (``i/o timeout``, ``pull QPS
    exceeded``), from the whole message: an excerpt may cut it off."""
    at = _PULL_HTTP_AT.search(message)
    status = _PULL_HTTP.search(message, at.start()) if at else None
    if status:
        return status["status"]
    code_at = message.find(_PULL_CODE_AT)
    code = _PULL_CODE.search(message, code_at) if code_at >= 0 else None
    if code and code["code"] != "Unknown":
        return code["code"]
    if message.rstrip().endswith("not found"):
        return "not found"
    if not any(cause in message for cause in _PULL_CAUSES):
        return None
    cause = _PULL_CAUSE.search(message)
    return cause["cause"] if cause else None


def pod_audit(
    proto: Mapping[str, Any], fields: dict[str, Any], read_labels: LabelReader
) -> Classified:
    """A Kubernetes audit entry about a pod: ``OOMKilled`` when a container of the pod
    status it carries (the kubelet's patch, or the pod as it was deleted) says so."""
    method = str(proto.get("methodName"))
    name = proto.get("resourceName")
    match = _AUDIT_POD.match(name) if isinstance(name, str) else None
    if match:
        fields["namespace"] = fields["namespace"] or match["ns"]
        fields["pod"] = fields["pod"] or match["pod"]
    pods = [p for p in (proto.get("request"), proto.get("response")) if _is_map(p)]
    for pod in pods:
        meta = pod.get("metadata")
        if not _is_map(meta):
            continue
        uid = meta.get("uid")
        if isinstance(uid, str) and uid:
            fields["pod_uid"] = uid
        labels = meta.get("labels")
        if _is_map(labels) and not fields.get("workload"):
            read_labels(
                {
                    f"k8s-pod/{k.replace('.', '_')}": v
                    for k, v in labels.items()
                    if isinstance(v, str)
                },
                fields,
            )
    for pod in pods:
        status = pod.get("status")
        statuses = status.get("containerStatuses") if _is_map(status) else None
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
    containers = spec.get("containers") if _is_map(spec) else None
    for c in containers if isinstance(containers, list) else []:
        if _is_map(c) and c.get("name") == container:
            resources = c.get("resources")
            limits = resources.get("limits") if _is_map(resources) else None
            value = limits.get("memory") if _is_map(limits) else None
            return value if isinstance(value, str) and value else None
    return None


def _oom_termination(container: object) -> Mapping[str, Any] | None:
    if not _is_map(container):
        return None
    for key in ("state", "lastState"):
        state = container.get(key)
        terminated = state.get("terminated") if _is_map(state) else None
        if _is_map(terminated) and terminated.get("reason") == OOM_KILLED_REASON:
            return terminated
    return None
