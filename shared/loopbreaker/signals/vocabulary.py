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

#: Compute Engine's audit methods start so; the others are Kubernetes' (pod statuses).
COMPUTE_METHOD_PREFIX = "compute."


def signatures() -> tuple[Signature, ...]:
    return catalog.load().signatures


@cache
def system_event_methods() -> dict[str, SignalKind]:
    """Compute Engine system-event audit methods and the kind each one means."""
    return {
        method: sig.kind
        for sig in catalog.load().audits()
        for method in sig.methods
        if method.startswith(COMPUTE_METHOD_PREFIX)
    }


@cache
def pod_audit_methods() -> tuple[str, ...]:
    """Kubernetes audit methods whose pod status can say a container was OOMKilled."""
    return tuple(
        method
        for sig in catalog.load().audits()
        for method in sig.methods
        if not method.startswith(COMPUTE_METHOD_PREFIX)
    )


@cache
def pod_audit_words() -> tuple[str, ...]:
    """Words one of which an audited pod status holds when it is a signal (``OOMKilled``)."""
    return tuple(
        sorted(
            {
                lit
                for sig in catalog.load().audits()
                if not sig.methods[0].startswith(COMPUTE_METHOD_PREFIX)
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
