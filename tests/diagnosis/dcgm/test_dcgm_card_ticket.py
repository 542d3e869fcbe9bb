"""What DCGM said reaches the people: the card's host row and the support-case draft."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from dcgm_scenarios import FAULTY_GPU, FAULTY_HOST, SPEC, hardware_twice, write

from loopbreaker import incidents
from loopbreaker.chat import notify
from loopbreaker.chat import render as R
from loopbreaker.diagnosis import engine, render, ticket
from loopbreaker.diagnosis.telemetry import load_directory
from loopbreaker.incidents import DiagnosisRecord, Incident, IncidentKey, Policy, Scope, State
from loopbreaker.model import Context, Diagnosis
from loopbreaker.timeutil import parse_rfc3339

SAID = f"Xid 48 (hardware: Double Bit ECC Error) on GPU {FAULTY_GPU}"


def diagnosed(tmp_path: Path) -> Diagnosis:
    c = SPEC["context"]
    context = Context(
        cluster=c["cluster"],
        workload=c["workload"],
        issue_time=parse_rfc3339(c["issue_time"]),
        project=c["project"],
        location=c["location"],
        namespace=c["namespace"],
    )
    return engine.diagnose(context, load_directory(write(tmp_path / "t", hardware_twice)))


def test_the_ticket_names_the_gpu_and_xid_dcgm_reported(tmp_path: Path) -> None:
    draft = diagnosed(tmp_path).ticket_draft
    assert draft is not None and draft.physical_host == FAULTY_HOST
    assert SAID in draft.summary and "per DCGM" in draft.summary
    assert "UNRECOVERABLE_GPU_ERROR" in draft.summary
    assert SAID in ticket.to_markdown(draft)


def test_the_cards_host_row_shows_what_dcgm_said(tmp_path: Path) -> None:
    diagnosis = diagnosed(tmp_path)
    document = render.diagnosis_to_dict(diagnosis)
    at = diagnosis.context.issue_time
    base = Incident(
        id="inc-dcgm",
        key=IncidentKey("proj", None, Scope.WORKLOAD, SPEC["context"]["workload"]),
        state=State.OPEN,
        opened_at=at,
        updated_at=at,
        first_event=at,
        last_event=at,
        last_signal_at=at,
        settle_at=at,
        signal_count=1,
        counts={"job_restarting": 1},
        clusters=(SPEC["context"]["cluster"],),
        signal_revision=1,
    )
    record = DiagnosisRecord(
        at=at,
        root_cause=document["root_cause"],
        remediation_path=document["remediation"]["path"],
        requires_approval=True,
        summary=document["summary"],
        suspect_hosts=(FAULTY_HOST,),
        signal_revision=1,
        queries=0,
        document=document,
    )
    policy = Policy(stale_after=timedelta(hours=6), approval_ttl=timedelta(minutes=30))
    incident = incidents.apply_diagnosis(base, record, now=at, policy=policy)
    assert incident is not None
    message = notify.render(incident)
    [row] = message.hosts
    assert row["host"] == FAULTY_HOST and row["failures"] == "2"
    assert row["gpu_faults"].startswith(SAID) and row["gpu_faults"].endswith("per DCGM")
    for body in (R.slack_message(message), R.google_chat_message(message)):
        assert SAID in json.dumps(body)
