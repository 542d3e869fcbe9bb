"""Accelerator-hours lost, summed per root cause, workload and physical host (pure).

Each incident's figure is its stored diagnosis document's ``cost.accelerator_hours``. An
incident without one counts as cost unknown, never as zero. Hours of different
accelerators are never added together: every total is per accelerator, named in its unit.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from loopbreaker.incidents import Incident

#: The accelerator of a cost whose document names none.
UNKNOWN_ACCELERATOR = "accelerator unknown"


def cost_of(incident: Incident) -> Mapping[str, Any] | None:
    """The diagnosis document's ``cost`` object, None when absent or not an object."""
    if incident.diagnosis is None:
        return None
    cost = incident.diagnosis.document.get("cost")
    return cost if isinstance(cost, Mapping) else None


def hours_of(cost: Mapping[str, Any] | None) -> float | None:
    """``accelerator_hours`` when it is a finite, non-negative number, else None."""
    value = cost.get("accelerator_hours") if cost else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def unit(accelerator: str | None) -> str:
    """``accelerator-hours (nvidia-h100-80gb)``: the name as the pods request it."""
    return f"accelerator-hours ({accelerator or UNKNOWN_ACCELERATOR})"


def hosts_of(incident: Incident) -> list[str]:
    """The physical hosts an incident's cost is counted on: its suspect hosts, else the
    approved target's host, else the diagnosis target's."""
    found: list[str] = []
    d = incident.diagnosis
    if d is not None:
        suspects = d.document.get("suspect_hosts")
        if isinstance(suspects, list):
            found = [s["host"] for s in suspects if isinstance(s, Mapping) and s.get("host")]
        found = found or [h for h in d.suspect_hosts if h]
    if not found and incident.approval is not None:
        found = [incident.approval.target.physical_host]
    if not found and d is not None and d.target is not None:
        found = [d.target.physical_host]
    return list(dict.fromkeys(h for h in found if h))


def workload_of(incident: Incident) -> str | None:
    """``cluster/namespace/name`` of the diagnosed workload, else the incident's first."""
    d = incident.diagnosis
    context = d.document.get("context") if d else None
    if isinstance(context, Mapping) and context.get("workload"):
        parts = (context.get("cluster"), context.get("namespace"), context["workload"])
        return "/".join(str(p) for p in parts if p)
    if incident.workloads:
        cluster = incident.cluster
        return f"{cluster}/{incident.workloads[0]}" if cluster else incident.workloads[0]
    return None


def _rows(groups: Mapping[str, list[Incident]], key: str) -> list[dict[str, Any]]:
    rows = []
    for name, members in groups.items():
        row = summarize(members)
        rows.append({key: name, **row})
    top = {id(r): max((u["total"] for u in r["units"]), default=0.0) for r in rows}
    return sorted(rows, key=lambda r: (-top[id(r)], -r["incidents"], r[key]))


def summarize(members: Iterable[Incident]) -> dict[str, Any]:
    """Incidents, those of unknown cost, and per accelerator: count, total, median."""
    by_accelerator: dict[str | None, list[float]] = {}
    count = unknown = 0
    for incident in members:
        count += 1
        cost = cost_of(incident)
        hours = hours_of(cost)
        if hours is None:
            unknown += 1
            continue
        name = cost.get("accelerator") if cost else None
        by_accelerator.setdefault(name if isinstance(name, str) and name else None, []).append(
            hours
        )
    units = [
        {
            "accelerator": name,
            "unit": unit(name),
            "incidents": len(values),
            "total": round(sum(values), 3),
            "median": round(statistics.median(values), 3),
        }
        for name, values in sorted(by_accelerator.items(), key=lambda kv: -sum(kv[1]))
    ]
    return {"incidents": count, "cost_unknown": unknown, "units": units}


def cost_figures(chosen: list[Incident]) -> dict[str, Any]:
    """The report's ``cost`` section over the window's incidents."""
    # A holder shows the cost of the incident merged into it (``cost_from``) on its card;
    # that failure is counted once, on the incident whose diagnosis measured it.
    chosen = [i for i in chosen if not (i.diagnosis and i.diagnosis.document.get("cost_from"))]
    causes: dict[str, list[Incident]] = {}
    workloads: dict[str, list[Incident]] = {}
    hosts: dict[str, list[Incident]] = {}
    for i in chosen:
        cause = i.diagnosis.root_cause if i.diagnosis else "not_diagnosed"
        causes.setdefault(cause, []).append(i)
        workload = workload_of(i)
        if workload:
            workloads.setdefault(workload, []).append(i)
        for host in hosts_of(i):
            hosts.setdefault(host, []).append(i)
    return {
        "total": summarize(chosen),
        "by_root_cause": _rows(causes, "root_cause"),
        "by_workload": _rows(workloads, "workload"),
        "by_host": _rows(hosts, "host"),
    }


def _hours(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def describe(row: Mapping[str, Any]) -> str:
    """``312 accelerator-hours (nvidia-h100-80gb) over 4 incidents (median 78.0)``."""
    parts = [
        f"{_hours(u['total'])} {u['unit']} over {u['incidents']} incident(s) "
        f"(median {_hours(u['median'])})"
        for u in row["units"]
    ]
    if row["cost_unknown"]:
        parts.append(f"cost unknown for {row['cost_unknown']} incident(s)")
    return "; ".join(parts) or "no incident"


def cost_text(cost: Mapping[str, Any]) -> list[str]:
    """The report's accelerator-hours lines."""
    lines = ["Accelerator-hours lost:", f"  total: {describe(cost['total'])}"]
    for title, key in (
        ("By root cause", "root_cause"),
        ("By workload", "workload"),
        ("By physical host", "host"),
    ):
        lines.append(f"  {title}:")
        for row in cost[f"by_{key}"]:
            lines.append(f"    {row[key]}: {describe(row)}")
        if not cost[f"by_{key}"]:
            lines.append("    (none)")
    return lines
