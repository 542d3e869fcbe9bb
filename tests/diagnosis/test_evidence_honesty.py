"""No finding claims an absence over evidence that was not read whole, whatever the source
said about it (a live reader's "partial: ..." note, no status at all), and the step says
`partial` (the CLI side is tests/cli/test_cli_evidence_honesty.py)."""

from __future__ import annotations

from dataclasses import replace

from builders import WORKLOAD, ctx, evidence, not_ready

from loopbreaker.diagnosis.engine import diagnose
from loopbreaker.model import EvidenceKind, PodInfo, SourceStatus, StepStatus

NODE = "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"


def _quiet() -> dict[str, object]:
    """A loop with nothing wrong: a healthy node's Ready series inside the window, one
    running pod of the workload on it."""
    running = PodInfo(
        f"{WORKLOAD}-slice-0-0-5kq2m", "default", phase="Running", node=NODE, workload=WORKLOAD
    )
    return {"node_conditions": not_ready(NODE, []), "pods": (running,)}


def test_whole_evidence_claims_the_absences_and_every_step_is_done() -> None:
    d = diagnose(ctx(), evidence(**_quiet()))
    assert [s.status for s in d.steps] == [StepStatus.DONE] * 4
    messages = [f.message for f in d.evidence]
    assert "No node failure inside the window." in messages
    assert "No preemption inside the window." in messages


def test_logs_a_live_reader_read_only_in_part_rule_nothing_out() -> None:
    """Cloud Logging answered some filters and refused one (the note the live log reader
    writes: "partial: <query id>: <why>"): the refused one may have held the fault."""
    ev = evidence(**_quiet())
    note = "partial: node_fault_logs: 403 Forbidden"
    sources = dict(ev.sources)
    sources[EvidenceKind.LOGS] = SourceStatus("cloud-logging:proj", True, note)
    d = diagnose(ctx(), replace(ev, sources=sources))
    step3 = d.steps[2]
    assert step3.status is StepStatus.PARTIAL
    assert step3.reason is not None and "403 Forbidden" in step3.reason
    messages = [f.message for f in step3.findings]
    assert "No node failure inside the window." not in messages
    assert any(m.startswith("A node failure not ruled out") and "403" in m for m in messages)
    assert any(m.startswith("logs: partial: node_fault_logs") for m in d.missing_evidence)


def test_evidence_with_no_status_is_not_read() -> None:
    """A kind nobody reported on was not read: step 4 rules out only the causes the rest
    of its evidence shows (the accelerator's memory: the logs alone)."""
    ev = evidence(**_quiet())
    sources = {k: s for k, s in ev.sources.items() if k is not EvidenceKind.POD_REASONS}
    d = diagnose(ctx(), replace(ev, sources=sources, pod_reasons=None))
    step4 = d.steps[3]
    assert step4.status is StepStatus.PARTIAL
    messages = [f.message for f in step4.findings]
    assert not any(m.startswith("No OOM kill") for m in messages)
    assert any(
        m.startswith("No accelerator out of memory or priority preemption") for m in messages
    )
    assert any("pod_reasons: not read" in m for m in messages)


def test_a_step_with_none_of_its_evidence_says_nothing_of_it() -> None:
    d = diagnose(ctx(), evidence(interruptions=None, signals=None))
    step2 = d.steps[1]
    assert step2.status is StepStatus.UNAVAILABLE
    assert step2.findings == ()
