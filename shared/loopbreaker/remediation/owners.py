"""One owner per node: is another system already handling the node (pure, stdlib only)?

The re-check (:func:`loopbreaker.remediation.rules.recheck`) refuses a node that GKE's
report-and-replace, GKE's host maintenance or another remediator is already acting on:
two systems draining or replacing one node at once is the failure to avoid. Each reason
names the system and the marker it left on the node.

GKE's auto-repair has no documented marker on the node: its "Node repair process"
(cloud.google.com/kubernetes-engine/docs/how-to/node-auto-repair) drains and recreates the
node, which the re-check sees as a recreated VM (another id) or a missing node. So there is
no auto-repair check here; a marker an operator knows of goes in
``LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from loopbreaker.approval.repair import FAULT_BEHAVIOR_LABEL, REPORT_AND_REPLACE_STATUS_LABEL
from loopbreaker.model.evidence import ACTIVE_MAINTENANCE_LABEL, IMPENDING_TERMINATION_TAINT

# The report-and-replace labels are in loopbreaker.approval.repair, beside the paths.
#: The values after which GKE no longer acts on the node: the host was reported (the
#: fault-behavior label stays until the node is back, and is checked on its own), or the
#: call failed (GKE clears its taint and the fault-behavior label). Compared casefolded.
REPORT_AND_REPLACE_ENDED = frozenset({"operationdone", "error"})
# The maintenance marks (ACTIVE_MAINTENANCE_LABEL, IMPENDING_TERMINATION_TAINT) are shared
# with the diagnosis. "Manage disruption to GKE nodes that don't live migrate"
# (cloud.google.com/kubernetes-engine/docs/concepts/handle-disruption-gpu-tpu) and Google's
# GKE skill gke-ai-troubleshooting-handle-disruption-gpu-tpu (github.com/google/skills,
# skills/cloud/.../SKILL.md v1.0.1): ``active-node-maintenance=ONGOING`` while GKE stops the
# node's workloads for host maintenance; the taint ``impending-node-termination:NoSchedule``
# once GKE cordoned a node that is about to be terminated.


class MarkerKind(StrEnum):
    LABEL = "label"
    ANNOTATION = "annotation"
    TAINT = "taint"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str | None = None
    effect: str | None = None


@dataclass(frozen=True)
class Marker:
    """A label, annotation or taint another remediator puts on a node it is handling."""

    kind: MarkerKind
    key: str
    #: None: the key being there is enough; else only this exact value.
    value: str | None = None
    #: Who leaves it; None when the setting names no one.
    system: str | None = None

    def __str__(self) -> str:
        return f"{self.kind.value} {self.key}" + (f"={self.value}" if self.value else "")


# Kubernetes qualified names (apimachinery pkg/util/validation IsQualifiedName): an optional
# DNS-subdomain prefix and "/", then 1-63 alphanumerics, "-", "_" or "." inside.
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/"
_KEY = re.compile(rf"^(?:{_PREFIX})?{_NAME}$")
_SYSTEM = re.compile(r"^[A-Za-z0-9][\w .-]{0,62}$")


def parse_markers(text: str) -> tuple[Marker, ...]:
    """``[SYSTEM:]KIND:KEY[=VALUE]``, comma-separated; ValueError naming the bad entry."""
    markers = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        parts = entry.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"{entry!r} is not [SYSTEM:]label|annotation|taint:KEY[=VALUE]")
        system = parts[0].strip() if len(parts) == 3 else None
        kind_text, spec = parts[-2].strip(), parts[-1].strip()
        try:
            kind = MarkerKind(kind_text)
        except ValueError:
            raise ValueError(
                f"{entry!r}: the kind must be label, annotation or taint, not {kind_text!r}"
            ) from None
        key, sep, value = spec.partition("=")
        if not _KEY.match(key):
            raise ValueError(f"{entry!r}: {key!r} is not a Kubernetes label/annotation/taint key")
        if sep and not value:
            raise ValueError(f"{entry!r}: an empty value after '='; leave '=' out to match any")
        if system is not None and not _SYSTEM.match(system):
            raise ValueError(f"{entry!r}: {system!r} is not a system name")
        markers.append(Marker(kind, key, value if sep else None, system or None))
    return tuple(markers)


def owner_reasons(
    node: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    taints: Sequence[Taint],
    markers: Iterable[Marker] = (),
) -> list[str]:
    """Why another system is handling ``node`` (empty: no sign of one)."""
    reasons = []
    behavior = labels.get(FAULT_BEHAVIOR_LABEL)
    if behavior is not None:
        reasons.append(
            f"node {node} is in GKE's report-and-replace ({FAULT_BEHAVIOR_LABEL}={behavior}): "
            "GKE is evicting, reporting or replacing it"
        )
    status = labels.get(REPORT_AND_REPLACE_STATUS_LABEL)
    if status is not None and status.casefold() not in REPORT_AND_REPLACE_ENDED:
        # An undocumented value is a doubt too: only the two ends let go of the node.
        reasons.append(
            f"node {node} is in GKE's report-and-replace "
            f"({REPORT_AND_REPLACE_STATUS_LABEL}={status}): the operation has not ended"
        )
    maintenance = labels.get(ACTIVE_MAINTENANCE_LABEL)
    if maintenance is not None:
        reasons.append(
            f"node {node} is under GKE host maintenance ({ACTIVE_MAINTENANCE_LABEL}="
            f"{maintenance}): GKE is stopping its workloads"
        )
    for taint in taints:
        if taint.key == IMPENDING_TERMINATION_TAINT:
            reasons.append(
                f"node {node} is about to be terminated by GKE (taint "
                f"{IMPENDING_TERMINATION_TAINT}{':' + taint.effect if taint.effect else ''})"
            )
    for marker in markers:
        found = _found(marker, labels, annotations, taints)
        if found is not None:
            who = marker.system or "another remediator"
            reasons.append(f"node {node} is being handled by {who} ({found})")
    return reasons


def _found(
    marker: Marker,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    taints: Sequence[Taint],
) -> str | None:
    """What the node carries of ``marker``, as shown to humans; None: nothing."""
    if marker.kind is MarkerKind.TAINT:
        for taint in taints:
            if taint.key == marker.key and marker.value in (None, taint.value):
                value = f"={taint.value}" if taint.value else ""
                return f"taint {taint.key}{value}{':' + taint.effect if taint.effect else ''}"
        return None
    values = labels if marker.kind is MarkerKind.LABEL else annotations
    found = values.get(marker.key)
    if found is None or marker.value not in (None, found):
        return None
    # Annotation values can be whole JSON documents (NVSentinel's quarantineHealthEvent).
    shown = found if len(found) <= 80 else found[:77] + "..."
    return f"{marker.kind.value} {marker.key}={shown}"
