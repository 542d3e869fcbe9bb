"""The terms of the Logging queries that the signature catalog supplies (pure).

The workflow's LQL searches for what the classifier recognises: Compute Engine's
system-event methods, the Events' reasons, the literals of the text signatures. A template
names each list ``{catalog.<term>}``; :func:`with_catalog_terms` writes them in when the
templates are first needed, so importing the queries parses no TOML and a cold start
that never diagnoses never pays for the catalog.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from loopbreaker.diagnosis.queries.templates import Template
from loopbreaker.signals import vocabulary

_TERM = re.compile(r"\{catalog\.([a-z_]+)\}")


def _any(words: Iterable[str]) -> str:
    return " OR ".join(f'"{w}"' for w in words)


def catalog_terms() -> dict[str, str]:
    """Each ``{catalog.<term>}`` of the templates, read off the catalog."""
    node_reasons = _any(vocabulary.event_reasons(["Node"]))
    node_literals = vocabulary.node_text_literals(("host_fault", "pod_fault", "workload_fault"))
    return {
        "audit_methods": _any(sorted(vocabulary.system_event_methods())),
        "node_fault_terms": " OR ".join(
            [
                f'{field}:"{phrase}"'
                for field in ("textPayload", "jsonPayload.MESSAGE")
                for phrase in node_literals
            ]
            + [f"jsonPayload.reason=({node_reasons})"]
        ),
        "pod_event_reasons": _any(vocabulary.event_reasons(["Pod"])),
        "pod_audit_methods": _any(vocabulary.pod_audit_methods()),
        "capacity_methods": _any(vocabulary.compute_capacity_methods()),
        "capacity_words": _any(vocabulary.compute_capacity_words()),
        "autoscaler_ids": _any(vocabulary.autoscaler_message_ids()),
    }


def with_catalog_terms(templates: Iterable[Template]) -> tuple[Template, ...]:
    """``templates`` with every ``{catalog.<term>}`` written in; an unknown term is a bug."""
    terms = catalog_terms()
    return tuple(
        replace(t, text=_TERM.sub(lambda m: terms[m[1]], t.text)) if "{catalog." in t.text else t
        for t in templates
    )
