"""Support-case drafts for a repeatedly failing physical host (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from loopbreaker.model import (
    Context,
    QueryLanguage,
    StepReport,
    SuspectHost,
    TicketDraft,
)
from loopbreaker.model.evidence import HEALTH_PREDICTION_LABEL
from loopbreaker.timeutil import format_rfc3339

#: Log excerpts kept in a ticket: a summary, never whole logs.
MAX_EXCERPTS = 8


def draft(
    ctx: Context,
    host: SuspectHost,
    restart_increase: float | None,
    restart_total: float | None,
    steps: Sequence[StepReport],
    maintenance: Sequence[tuple[str, datetime]] = (),
) -> TicketDraft:
    """``maintenance``: nodes with host maintenance scheduled inside the window, and when."""
    excerpts: list[str] = []
    for episode in host.episodes:
        for line in episode.excerpts:
            if line not in excerpts and len(excerpts) < MAX_EXCERPTS:
                excerpts.append(line)
    queries = tuple(
        q
        for step in steps
        if step.number in (1, 2, 3)
        for q in step.queries
        if not q.deprecated
        and q.language in (QueryLanguage.PROMQL, QueryLanguage.LQL)
        and not q.id.endswith("_raw")
    )
    host_words = "physical host" if host.host_known else "host of node"
    restarts = (
        f"{ctx.workload_kind.api_kind} {ctx.workload} restarted {restart_increase:g} time(s) "
        "between "
        f"{format_rfc3339(ctx.start_time)} and {format_rfc3339(ctx.end_time)}"
        if restart_increase
        else f"{ctx.workload_kind.api_kind} {ctx.workload} is in a restart loop"
    )
    summary = (
        f"{restarts} in GKE cluster {ctx.cluster}"
        f"{f' (project {ctx.project})' if ctx.project else ''}. The {host_words} "
        f"{host.host} failed {host.failures} times, taking down node(s) "
        f"{', '.join(host.nodes)}. We ask Google Cloud support to check this host for a "
        "hardware fault and to keep our VMs off it."
    )
    if host.gpu_faults:
        summary += (
            f" GPU faults seen (NVIDIA's Xid catalog class in brackets): "
            f"{'; '.join(host.gpu_faults)}. Fault reason: {host.fault_reason}."
        )
    if host.health_prediction:
        # GKE's own forecast (node health prediction label) beside the failures it saw.
        named = ", ".join(f"{node}={value}" for node, value in host.health_prediction)
        summary += (
            f" GKE's node health prediction ({HEALTH_PREDICTION_LABEL}; false: GPUs likely "
            f"to degrade within five hours): {named}."
        )
    if maintenance:
        # Support reads the host's failures beside Google's own planned work on the nodes.
        named = ", ".join(f"{node} ({format_rfc3339(at)})" for node, at in maintenance)
        summary += f" Host maintenance is scheduled inside the window on: {named}."
    return TicketDraft(
        title=f"GKE node host failures on {host_words} {host.host} ({host.failures} failures)",
        summary=summary,
        physical_host=host.host,
        host_known=host.host_known,
        project=ctx.project,
        cluster=ctx.cluster,
        zone=host.zone,
        node_pool=host.node_pool,
        nodes=host.nodes,
        instances=host.instances,
        failures=host.failures,
        first_failure=host.first_failure,
        last_failure=host.last_failure,
        restart_increase=restart_increase,
        restart_total=restart_total,
        excerpts=tuple(excerpts),
        queries=queries,
        requested_action=(
            f"Investigate the {host_words} {host.host} for a hardware fault and take it out "
            "of service; confirm the recreated VM(s) run on a different host."
        ),
        fault_reason=host.fault_reason,
    )


def to_markdown(ticket: TicketDraft) -> str:
    def when(value: object) -> str:
        return format_rfc3339(value) if value is not None else "unknown"  # type: ignore[arg-type]

    lines = [
        f"# {ticket.title}",
        "",
        ticket.summary,
        "",
        "| Field | Value |",
        "|---|---|",
        f"| Physical host ID | `{ticket.physical_host}` |",
        f"| Project | {ticket.project or 'unknown'} |",
        f"| Cluster | {ticket.cluster} |",
        f"| Zone | {ticket.zone or 'unknown'} |",
        f"| Node pool | {ticket.node_pool or 'unknown'} |",
        f"| Nodes | {', '.join(ticket.nodes)} |",
        f"| Instances | {', '.join(ticket.instances)} |",
        f"| Failures | {ticket.failures} |",
        f"| First failure | {when(ticket.first_failure)} |",
        f"| Last failure | {when(ticket.last_failure)} |",
        f"| Restarts in window | {_num(ticket.restart_increase)} |",
        f"| Lifetime restarts | {_num(ticket.restart_total)} |",
        "",
        "## Log excerpts",
        "",
    ]
    lines += [f"- `{e}`" for e in ticket.excerpts] or ["- (none)"]
    lines += ["", "## Queries used", ""]
    for q in ticket.queries:
        lines += [f"```{q.language.value}", q.text, "```"]
    if ticket.business_impact:
        lines += ["", "## Business impact", "", ticket.business_impact]
    lines += ["", "## Requested action", "", ticket.requested_action, ""]
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "unknown" if value is None else f"{value:g}"
