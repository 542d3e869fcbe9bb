"""Capacity as Compute Engine and GKE's cluster autoscaler report it (pure).

Two sources say a node could not be created, and where, and why:

- Compute's Admin Activity audit entry for the ``instances.insert`` a managed instance
  group ran, ending in an ERROR whose ``status.message`` names the stockout or quota (the
  catalog's ``on = "audit"`` signatures with a ``cause`` match it; this module reads the
  zone, machine type and accelerator the message or the request states);
- the GKE cluster autoscaler's visibility log (``container.googleapis.com%2Fcluster-
  autoscaler-visibility``), whose ``jsonPayload`` holds ``resultInfo.results[].errorMsg``
  (a failed scale-up) or ``noDecisionStatus.noScaleUp`` (why no scale-up was tried), each
  a ``messageId`` with ``parameters`` (Google's "Viewing cluster autoscaler events").
  The catalog's ``on = "autoscaler"`` signatures name the ids that are a signal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from loopbreaker.model import SignalKind
from loopbreaker.signals import catalog
from loopbreaker.signals.catalog import Signature

_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")
_MIG_URL = re.compile(r"/zones/(?P<zone>[a-z]+-[a-z]+\d+-[a-z])/instanceGroups/(?P<mig>[\w-]+)$")
_LAST_SEGMENT = re.compile(r"/(?P<name>[\w.-]+)$")
#: GKE names a node pool's instance group ``gke-<cluster>-<pool>-<8 hex>-grp``.
_GROUP_SUFFIX = re.compile(r"-[0-9a-f]{8}-grp$")
#: Where the visibility log puts the payloads that may hold a message id.
_VISIBILITY_KEYS = ("resultInfo", "noDecisionStatus")

Classified = tuple[SignalKind, str, str | None]


def read_details(found: re.Match[str] | None, fields: dict[str, Any]) -> None:
    """The zone, machine type and accelerator a status message states (named groups)."""
    if found is None:
        return
    for group in ("zone", "machine_type", "accelerator"):
        value = found.groupdict().get(group)
        if value:
            fields[group] = value.strip()
    if fields.get("zone"):
        fields["location"] = fields.get("location") or fields["zone"]


def read_request(request: object, fields: dict[str, Any]) -> None:
    """The machine type and accelerators of an ``instances.insert`` request, when the
    entry carries it (the operation's first entry does) and the message did not say."""
    if not isinstance(request, Mapping):
        return
    machine = request.get("machineType")
    if isinstance(machine, str) and not fields.get("machine_type"):
        named = _LAST_SEGMENT.search(machine)
        fields["machine_type"] = named["name"] if named else machine
    accelerators = request.get("guestAccelerators")
    if isinstance(accelerators, list) and accelerators and not fields.get("accelerator"):
        first = accelerators[0]
        if isinstance(first, Mapping) and isinstance(first.get("acceleratorType"), str):
            named = _LAST_SEGMENT.search(first["acceleratorType"])
            kind = named["name"] if named else first["acceleratorType"]
            count = first.get("acceleratorCount")
            fields["accelerator"] = f"{count} {kind}" if isinstance(count, int) else kind


@cache
def _by_message_id() -> dict[str, Signature]:
    found: dict[str, Signature] = {}
    for sig in catalog.load().autoscaler():
        for message_id in sig.message_ids:
            found.setdefault(message_id, sig)
    return found


@cache
def _catalog_order() -> dict[str, int]:
    """Each signature's place in the catalog (the stronger first), built once."""
    return {sig.id: n for n, sig in enumerate(catalog.load().signatures)}


def autoscaler_kind(payload: Mapping[str, Any], fields: dict[str, Any]) -> Classified | None:
    """A visibility log entry: the strongest message it holds that is a signal (catalog
    order), with the zone, node pool and pod it names; None for any other payload."""
    # Every Event no signature names comes through here: a plain loop, no generator.
    for key in _VISIBILITY_KEYS:
        if key in payload:
            break
    else:
        return None
    signatures = _by_message_id()
    order = _catalog_order()
    best: tuple[int, Signature, Message] | None = None
    for message in _messages(payload):
        sig = signatures.get(message.message_id)
        if sig is not None and (best is None or order[sig.id] < best[0]):
            best = (order[sig.id], sig, message)
    if best is None:
        return None
    _, sig, message = best
    fields["signature"] = sig.id
    _fill(message, fields)
    params = ", ".join(message.parameters)
    line = f"{message.message_id}: {params}" if params else message.message_id
    if message.mig and message.mig not in params:
        line += f" (instance group {message.mig})"
    return sig.kind, line, sig.cause or message.message_id


class Message:
    """One ``messageId`` of the payload, with its parameters and what it is about."""

    def __init__(
        self,
        message_id: str,
        parameters: tuple[str, ...],
        mig: Mapping[str, Any] | None = None,
        pod: Mapping[str, Any] | None = None,
    ) -> None:
        self.message_id = message_id
        self.parameters = parameters
        self.mig = _str(mig, "name")
        self.zone = _str(mig, "zone")
        self.node_pool = _str(mig, "nodepool")
        self.pod = _str(pod, "name")
        self.namespace = _str(pod, "namespace")


def _messages(payload: Mapping[str, Any]) -> Iterator[Message]:
    result_info = _map(payload.get("resultInfo"))
    for result in _list(result_info.get("results")):
        error = _map(_map(result).get("errorMsg"))
        if error:
            yield _message(error)
    no_scale_up = _map(_map(payload.get("noDecisionStatus")).get("noScaleUp"))
    if not no_scale_up:
        return
    reason = _map(no_scale_up.get("reason"))
    if reason:
        yield _message(reason)
    for skipped in _list(no_scale_up.get("skippedMigs")):
        yield _message(_map(_map(skipped).get("reason")), _map(_map(skipped).get("mig")))
    for group in _list(no_scale_up.get("unhandledPodGroups")):
        group = _map(group)
        pod = _map(_map(group.get("podGroup")).get("samplePod"))
        for nap in _list(group.get("napFailureReasons")):
            yield _message(_map(nap), pod=pod)
        for rejected in _list(group.get("rejectedMigs")):
            rejected = _map(rejected)
            yield _message(_map(rejected.get("reason")), _map(rejected.get("mig")), pod)


def _message(
    raw: Mapping[str, Any],
    mig: Mapping[str, Any] | None = None,
    pod: Mapping[str, Any] | None = None,
) -> Message:
    message_id = raw.get("messageId")
    parameters = tuple(p for p in _list(raw.get("parameters")) if isinstance(p, str))
    return Message(message_id if isinstance(message_id, str) else "", parameters, mig, pod)


def _fill(message: Message, fields: dict[str, Any]) -> None:
    zone, mig = message.zone, message.mig
    for param in message.parameters:
        url = _MIG_URL.search(param)
        if url:
            zone, mig = zone or url["zone"], mig or url["mig"]
        elif _ZONE.match(param):
            zone = zone or param
    if zone:
        fields["zone"] = zone
        fields["location"] = fields.get("location") or zone
    pool = message.node_pool or _pool_of(mig, fields.get("cluster"))
    if pool:
        fields["node_pool"] = fields.get("node_pool") or pool
    if message.pod:
        fields["pod"] = fields.get("pod") or message.pod
    if message.namespace:
        fields["namespace"] = fields.get("namespace") or message.namespace


def _pool_of(mig: str | None, cluster: str | None) -> str | None:
    """``gke-<cluster>-<pool>-1a2b3c4d-grp`` -> ``<pool>`` (when the name is not cut)."""
    if not mig or not cluster or not _GROUP_SUFFIX.search(mig):
        return None
    head = f"gke-{cluster}-"
    if not mig.startswith(head):
        return None
    return _GROUP_SUFFIX.sub("", mig.removeprefix(head)) or None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(mapping: Mapping[str, Any] | None, key: str) -> str | None:
    value = mapping.get(key) if mapping else None
    return value if isinstance(value, str) and value else None
