"""The Cloud Logging sink filters that feed ``on_log_entry``, generated from the catalog (pure).

Every signature of :mod:`loopbreaker.signals.catalog` is routed to one filter by what it
reads (container text, node text, an Event, an audit method) and its family; the filter
searches for its literals, reasons or methods. A filter may let through more than the
classifier recognises (the classifier decides), never less: tests run every catalog
example through both.

``python -m loopbreaker.signals.sink_filters`` writes ``infra/terraform/log-filters.json``,
which the Terraform module reads (``jsondecode(file(...))``); a test checks it is current.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from loopbreaker.model import SignalKind
from loopbreaker.signals import catalog
from loopbreaker.signals.catalog import Signature
from loopbreaker.signals.vocabulary import is_compute_capacity, is_system_event

#: Cloud Logging refuses a filter longer than this (Logging query language reference).
MAX_FILTER_LENGTH = 20_000

_TRAINING_LABELS = (
    "k8s-pod/jobset_sigs_k8s_io/jobset-name",
    "k8s-pod/training_kubeflow_org/job-name",
    "k8s-pod/trainer_kubeflow_org/trainjob-name",
)
_EVENTS = 'logName:"/logs/events"'
#: Name (sinks are ``<prefix>-<name>``, so short) -> the head every clause is ANDed with.
_HEADS = {
    "node-pool-events": 'resource.type=("gke_nodepool" OR "k8s_node")',
    "node-faults": 'resource.type="k8s_node"',
    "compute-system-events": (
        'logName:"cloudaudit.googleapis.com%2Fsystem_event"\nAND resource.type="gce_instance"'
    ),
    "training-faults": (
        'resource.type="k8s_container"\nAND ('
        + " OR ".join(f'labels."{label}":*' for label in _TRAINING_LABELS)
        + ")"
    ),
    "scheduling-and-restarts": f'resource.type=("k8s_pod" OR "k8s_cluster")\nAND {_EVENTS}',
    "pod-faults": f'resource.type="k8s_pod"\nAND {_EVENTS}',
    "node-pressure": 'resource.type="k8s_node"',
    "oom-killed": (
        'logName:"cloudaudit.googleapis.com%2Factivity"\nAND resource.type="k8s_cluster"'
    ),
    # Compute's Admin Activity entry for a VM it could not create (a managed instance
    # group's insert ends in an ERROR entry whose status names the stockout or quota).
    "compute-capacity": (
        'logName:"cloudaudit.googleapis.com%2Factivity"\nAND resource.type="gce_instance"'
        "\nAND severity>=ERROR"
    ),
    # GKE's cluster autoscaler visibility log: its scale-up errors and noScaleUp reasons.
    "autoscaler-visibility": (
        'logName:"container.googleapis.com%2Fcluster-autoscaler-visibility"'
        '\nAND resource.type="k8s_cluster"'
    ),
}


def routes(sig: Signature) -> tuple[str, ...]:
    """The filters that export what ``sig`` matches."""
    if sig.on == "autoscaler":
        return ("autoscaler-visibility",)
    if sig.on == "audit":
        if is_system_event(sig):
            return ("compute-system-events",)
        return ("compute-capacity",) if is_compute_capacity(sig) else ("oom-killed",)
    if sig.on == "event":
        if sig.family in ("scheduling", "restart"):
            return ("scheduling-and-restarts",)
        if "Node" in sig.objects or not sig.objects:
            return ("node-pressure",) if sig.family == "pod_fault" else ("node-faults",)
        return ("pod-faults",)
    found: list[str] = []
    if sig.applies_to(container=True):
        found.append("training-faults")
    if sig.applies_to(container=False):
        found.append(
            {
                "interruption": "node-pool-events",
                "pod_fault": "node-pressure",
                "scheduling": "scheduling-and-restarts",
            }.get(sig.family, "node-faults")
        )
    return tuple(found)


def build(signatures: Iterable[Signature]) -> dict[str, str]:
    """name -> filter for the given signatures: their Event and audit clauses, and one
    search for the literals of their text signatures (a literal that holds another is
    left out: the shorter one matches wherever it does)."""
    clauses: dict[str, list[str]] = defaultdict(list)
    literals: dict[str, set[str]] = defaultdict(set)
    for sig in signatures:
        for name in routes(sig):
            if sig.on in catalog.TEXT_SCOPES:
                literals[name].update(sig.literals)
            elif (clause := _clause(sig)) not in clauses[name]:
                clauses[name].append(clause)
    out: dict[str, str] = {}
    for name, head in _HEADS.items():
        found = literals[name]
        kept = sorted(g for g in found if not any(o != g and o in g for o in found))
        parts = clauses[name] + ([_any(kept)] if kept else [])
        if parts:
            out[name] = f"{head}\nAND (" + "\n  OR ".join(parts) + ")"
    return out


def _any(terms: Iterable[str]) -> str:
    return "(" + " OR ".join(f'"{t}"' for t in terms) + ")"


def _clause(sig: Signature) -> str:
    if sig.on == "autoscaler":
        # The ids sit in nested arrays (results[].errorMsg, unhandledPodGroups[]...):
        # searched anywhere in the entry, as each is a unique dotted word.
        return _any(sig.message_ids)
    if sig.on == "audit":
        methods = f"protoPayload.methodName={_any(sig.methods)}"
        return f"({methods} AND {_any(sig.literals)})" if sig.literals else methods
    if sig.on == "event":
        parts = [f"jsonPayload.reason={_any(sig.reasons)}"] if sig.reasons else []
        if sig.reason_literals:
            parts.append(f"jsonPayload.reason:{_any(sig.reason_literals)}")
        if sig.objects:
            parts.append(f"jsonPayload.involvedObject.kind={_any(sig.objects)}")
        if sig.literals:
            parts.append(_any(sig.literals))
        return "(" + " AND ".join(parts) + ")"
    raise ValueError(f"{sig.id}: a text signature has no clause of its own")


FILTERS: dict[str, str] = build(catalog.load().signatures)

#: Which kinds each filter is there for (documentation and the coverage test).
KINDS: dict[str, frozenset[SignalKind]] = {
    name: frozenset(s.kind for s in catalog.load().signatures if name in routes(s))
    for name in FILTERS
}

TERRAFORM_FILE = Path("infra") / "terraform" / "log-filters.json"


def render() -> str:
    return json.dumps(FILTERS, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[3]
    (root / TERRAFORM_FILE).write_text(render(), encoding="utf-8")
    print(f"wrote {TERRAFORM_FILE}")
