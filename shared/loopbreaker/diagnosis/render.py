"""Presentation of a Diagnosis: JSON for machines, text for terminals, Markdown for tickets."""

from __future__ import annotations

from typing import Any

from loopbreaker.diagnosis import cost, ticket, trainjobs
from loopbreaker.model import Diagnosis, StepStatus


def diagnosis_to_dict(d: Diagnosis) -> dict[str, Any]:
    return {
        # ``jobset``: the JobSet the workload runs as (a TrainJob's is of its name).
        "context": {**d.context.to_dict(), "jobset": trainjobs.jobset_name(d.context)},
        "restart_loop": d.restart_loop,
        "restart_increase": _number(d.restart_increase),
        "restart_total": _number(d.restart_total),
        "root_cause": d.root_cause.value,
        "summary": d.summary,
        "remediation": d.remediation.to_dict(),
        "suspect_hosts": [s.to_dict() for s in d.suspect_hosts],
        "steps": [s.to_dict() for s in d.steps],
        "evidence": [f.to_dict() for f in d.evidence],
        "partial": d.partial,
        "missing_evidence": list(d.missing_evidence),
        "queries_run": d.queries_run,
        "ticket_draft": d.ticket_draft.to_dict() if d.ticket_draft else None,
        "cost": d.cost.to_dict() if d.cost else None,
    }


_MARK = {
    StepStatus.DONE: "✔",
    StepStatus.PARTIAL: "◐",
    StepStatus.SKIPPED: "–",
    StepStatus.UNAVAILABLE: "✖",
}


def to_text(d: Diagnosis, *, show_queries: bool = False, note: str | None = None) -> str:
    ctx = d.context
    r = d.remediation
    lines = [
        f"Verdict: {d.root_cause.value} → {r.path.value} (risk {r.risk.value}"
        f"{', needs human approval' if r.requires_approval else ''})",
        f"  {d.summary}",
        *([f"  {cost.line(d.cost)}"] if d.cost else []),
        f"  {trainjobs.describe(ctx)}, "
        f"window {ctx.to_dict()['start_time']} .. {ctx.to_dict()['end_time']}",
    ]
    if note:
        lines.append(f"  ({note})")
    if d.partial:
        lines.append("  Partial diagnosis, missing evidence:")
        lines += [f"    - {m}" for m in d.missing_evidence]
    for host in d.suspect_hosts:
        lines.append(
            f"  Suspect host {host.host}: {host.failures} failure(s) on {', '.join(host.nodes)}"
        )
    lines.append("  Actions:")
    lines += [f"    - {a}" for a in r.actions]
    for step in d.steps:
        lines.append("")
        lines.append(f"{_MARK[step.status]} Step {step.number}: {step.title} [{step.status.value}]")
        if step.reason and step.status is not StepStatus.DONE:
            lines.append(f"    ({step.reason})")
        if step.sources:
            lines.append(f"    sources: {', '.join(step.sources)}")
        lines += [f"    - {f.message}" for f in step.findings]
        if show_queries or step.status is StepStatus.UNAVAILABLE:
            for q in step.queries:
                if not q.deprecated:
                    lines.append(f"    [{q.language.value}] {q.text}".replace("\n", " "))
    if d.cost:
        lines += ["", "Cost basis:", *(f"  - {b}" for b in d.cost.basis)]
        lines += [f"  - missing: {m}" for m in d.cost.missing]
    if d.ticket_draft:
        lines += ["", "Support ticket draft:", f"  {d.ticket_draft.title}"]
    return "\n".join(lines) + "\n"


def to_markdown(d: Diagnosis) -> str:
    ctx = d.context
    r = d.remediation
    lines = [
        f"# loopbreaker: {d.root_cause.value} ({ctx.workload} in {ctx.cluster})",
        "",
        d.summary,
        "",
        f"- **Root cause:** `{d.root_cause.value}`",
        f"- **Remediation:** `{r.path.value}`, risk {r.risk.value}, "
        f"approval {'required' if r.requires_approval else 'not required'}",
        f"- **Workload:** {trainjobs.describe(ctx)}",
        f"- **Window:** {ctx.to_dict()['start_time']} – {ctx.to_dict()['end_time']}",
    ]
    if d.cost:
        lines.append(f"- **Business impact:** {cost.impact(d.cost)}")
    if d.partial:
        lines.append(f"- **Partial:** missing {'; '.join(d.missing_evidence)}")
    lines += ["", "## Actions", ""] + [f"1. {a}" for a in r.actions]
    for step in d.steps:
        lines += ["", f"## Step {step.number}: {step.title} ({step.status.value})", ""]
        lines += [f"- {f.message}" for f in step.findings] or ["- (no findings)"]
        for q in step.queries:
            if not q.deprecated:
                lines += ["", f"```{q.language.value}", q.text, "```"]
    if d.cost:
        lines += ["", "## Cost", ""] + [f"- {b}" for b in d.cost.basis]
        lines += [f"- Missing: {m}" for m in d.cost.missing]
    if d.ticket_draft:
        lines += ["", "---", "", ticket.to_markdown(d.ticket_draft)]
    return "\n".join(lines) + "\n"


def _number(value: float | None) -> float | int | None:
    """Counts print as integers when they are whole (Prometheus values are floats)."""
    if value is not None and value.is_integer():
        return int(value)
    return value
