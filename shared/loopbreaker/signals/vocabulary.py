"""What the catalog says, as the log queries and sink filters need it (pure).

The diagnosis' Logging queries and the Cloud Logging sinks search for the same things the
classifier recognises: Compute Engine's system-event methods, the Events' reasons, and the
literals of the text signatures. All of them are read off the catalog here, so a signature
added there is searched for, exported and classified alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from loopbreaker.model import SignalKind
from loopbreaker.signals import catalog
from loopbreaker.signals.catalog import Signature

#: Compute Engine's audit methods start so (after the API version of the request,
#: ``v1.`` or ``beta.``, that the Admin Activity log names); the others are Kubernetes'
#: (pod statuses).
COMPUTE_METHOD_PREFIX = "compute."
_API_VERSIONS = ("v1.", "beta.", "alpha.")


def is_compute_method(method: str) -> bool:
    """``compute.instances.preempted``, ``v1.compute.instances.insert``: Compute Engine's."""
    for version in _API_VERSIONS:
        method = method.removeprefix(version)
    return method.startswith(COMPUTE_METHOD_PREFIX)


def is_system_event(sig: Signature) -> bool:
    """A Compute Engine system event (``cloudaudit.googleapis.com%2Fsystem_event``), not
    an Admin Activity error such as a VM Compute could not create (scheduling)."""
    return sig.on == "audit" and is_compute_method(sig.methods[0]) and sig.family != "scheduling"


def is_compute_capacity(sig: Signature) -> bool:
    """Compute's Admin Activity errors when it cannot create a VM (stockout, quota)."""
    return sig.on == "audit" and is_compute_method(sig.methods[0]) and sig.family == "scheduling"


def signatures() -> tuple[Signature, ...]:
    return catalog.load().signatures


@cache
def system_event_methods() -> dict[str, SignalKind]:
    """Compute Engine system-event audit methods and the kind each one means."""
    return {
        method: sig.kind
        for sig in catalog.load().audits()
        if is_system_event(sig)
        for method in sig.methods
    }


@cache
def compute_capacity_methods() -> tuple[str, ...]:
    """Compute's VM-creating methods whose errors say capacity is missing."""
    return tuple(
        sorted(
            {m for sig in catalog.load().audits() if is_compute_capacity(sig) for m in sig.methods}
        )
    )


@cache
def compute_capacity_words() -> tuple[str, ...]:
    """Words one of which such an error's status message holds."""
    return _sorted_literals(s for s in catalog.load().audits() if is_compute_capacity(s))


@cache
def autoscaler_message_ids() -> tuple[str, ...]:
    """GKE cluster autoscaler visibility message ids that are a signal."""
    return tuple(sorted({m for sig in catalog.load().autoscaler() for m in sig.message_ids}))


@cache
def pod_audit_methods() -> tuple[str, ...]:
    """Kubernetes audit methods whose pod status can say a container was OOMKilled."""
    return tuple(
        method
        for sig in catalog.load().audits()
        for method in sig.methods
        if not is_compute_method(method)
    )


@cache
def pod_audit_words() -> tuple[str, ...]:
    """Words one of which an audited pod status holds when it is a signal (``OOMKilled``)."""
    return tuple(
        sorted(
            {
                lit
                for sig in catalog.load().audits()
                if not is_compute_method(sig.methods[0])
                for lit in sig.literals
            }
        )
    )


def node_text_literals(families: Iterable[str] | None = None) -> tuple[str, ...]:
    """Literals of the text signatures read on nodes, one of which every match holds."""
    wanted = set(families) if families is not None else None
    return _sorted_literals(
        s
        for s in catalog.load().text()
        if s.applies_to(container=False) and (wanted is None or s.family in wanted)
    )


def container_text_literals() -> tuple[str, ...]:
    return _sorted_literals(s for s in catalog.load().text() if s.applies_to(container=True))


def event_reasons(objects: Iterable[str] | None = None) -> tuple[str, ...]:
    """The Event reasons some signature reads, of Events about these object kinds."""
    wanted = set(objects) if objects is not None else None
    return tuple(
        sorted(
            {
                reason
                for sig in catalog.load().events()
                if wanted is None or not sig.objects or wanted & set(sig.objects)
                for reason in sig.reasons
            }
        )
    )


def _sorted_literals(sigs: Iterable[Signature]) -> tuple[str, ...]:
    found = {lit for s in sigs for lit in s.literals}
    return tuple(sorted(g for g in found if not any(o != g and o in g for o in found)))
