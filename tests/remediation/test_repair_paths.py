"""The three repair paths through the real clients: GKE's report-and-replace, Compute's
reportHostAsFaulty, and the VM deletion.

The A3 High scenario (``gpu-xid-hardware-twice``: Xid 48 then 63 on one GPU, twice) is
replayed and approved in chat exactly as the responder would; its node qualifies for GKE's
report-and-replace (a3-highgpu-8g, GKE v1.32.4-gke.1767000). The local Kubernetes server runs
report-and-replace as Google's "Report faulty hosts through GKE" describes it
(:mod:`fakeservers.gke_repair`), and Compute refuses a VM that is not reservation-bound.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
import remedkit as R
from fakes import FakeClock, RecordingSleep
from fakeservers.gke_repair import FAULT_BEHAVIOR, STATUS

from loopbreaker.approval.repair import FaultReason, RepairPath
from loopbreaker.chat import notify
from loopbreaker.errors import TransientError
from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import RemediationPolicy
from loopbreaker.replay import run as replay

LIVE = RemediationPolicy(dry_run=False)


@pytest.fixture(scope="module")
def a3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident, dict[str, Any]]:
    path = tmp_path_factory.mktemp("a3") / "template.sqlite"
    incident, request = R.approve_faulty(path, R.A3)
    return path, incident, request


@pytest.fixture(scope="module")
def a3_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident, dict[str, Any]]:
    path = tmp_path_factory.mktemp("a3-report") / "template.sqlite"
    incident, request = R.approve_faulty(path, R.A3, LOOPBREAKER_REPAIR_PATH="report")
    return path, incident, request


def open_lab(approved: tuple[Path, Incident, dict[str, Any]], tmp: Path, **kw: Any) -> Any:
    path, incident, _ = approved
    assert incident.approval is not None
    clock = FakeClock(incident.approval.at + timedelta(minutes=1))
    store = K.copy_store(path, tmp / "incidents.sqlite")
    return R.gke_lab(store, clock, tmp, incident.approval.target, **kw)


def on_node(lab: R.Lab, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in lab.kube.pods if p["spec"].get("nodeName") == node)


def test_the_approval_for_a_qualifying_a3_node_is_for_gke_and_the_card_says_so(
    a3: tuple[Path, Incident, dict[str, Any]],
) -> None:
    _, incident, _ = a3
    assert incident.approval is not None
    target = incident.approval.target
    assert target.repair_path is RepairPath.GKE
    # Xid 48 is a hardware-class fault: the reason GKE's label spells XID.
    assert target.fault_reason is FaultReason.UNRECOVERABLE_GPU_ERROR
    # The replay read no Compute: the card states the rule the re-check applies.
    assert target.fallback_path is RepairPath.DELETE
    text = "\n".join(notify.render(incident).recommendations)
    assert (
        "Repair path gke if Compute Engine confirms the VM is reservation-bound, otherwise "
        "delete." in text
    )
    assert "a3-highgpu-8g" in text and "v1.32.4-gke.1767000" in text
    assert f"{FAULT_BEHAVIOR}=XID" in text and "loopbreaker evicts and deletes nothing" in text


def test_an_approved_faulty_a3_host_is_handed_to_gke_and_nothing_is_evicted_or_deleted(
    a3: tuple[Path, Incident, dict[str, Any]], tmp_path: Path
) -> None:
    _, incident, request = a3
    with open_lab(a3, tmp_path) as lab:
        node = incident.approval.target.node  # type: ignore[union-attr]
        pods_before = on_node(lab, node)
        report = R.handle_until_done(lab.remediator(LIVE), dict(request))
        assert report.result is Result.REMEDIATED, report
        assert R.steps_of(lab.incident(incident.id)) == {
            "recheck": "done",
            "hand_to_gke": "done",
            "await_gke": "done",
            "support_case": "done",
        }
        # loopbreaker's own calls: one label patch, no eviction, no VM deletion.
        assert lab.kube.evictions == [] and lab.kube.deleted_pods == []
        assert lab.compute.deletes == [] and lab.compute.deleted == []
        [(patched, _, body)] = lab.kube.patches
        assert patched == node and body["metadata"]["labels"] == {FAULT_BEHAVIOR: "XID"}
        # GKE did the rest, in the documented order, and reported the host itself.
        assert lab.kube.statuses[node] == ["PodsEvicted", "OperationRUNNING", "OperationDone"]
        [(*_, gke_body)] = lab.compute.fault_reports
        assert gke_body["faultReasons"][0]["behavior"] == "UNRECOVERABLE_GPU_ERROR"
        assert sorted(name for _, name in lab.kube.gke_evictions) == pods_before
        assert on_node(lab, node) == []
        done = lab.incident(incident.id)
        assert done.state is State.REMEDIATED and done.verification is not None
        notes = " ".join(a.note for a in done.audit)
        assert "repair path gke" in notes and "reported and replaced by GKE" in notes
        reasons = lab.kube.event_reasons()
        assert reasons[:3] == [
            "LoopbreakerRemediationStarted",
            "LoopbreakerHandedToGKE",
            "LoopbreakerGKERepaired",
        ]
        assert "repair path gke" in lab.kube.events[0]["note"]
        # The support case says how the host was taken out of service.
        [case] = lab.support.created
        assert "report-and-replace" in case["description"]


def test_an_error_status_fails_the_remediation_with_the_node_cordoned(
    a3: tuple[Path, Incident, dict[str, Any]], tmp_path: Path
) -> None:
    _, incident, request = a3
    with open_lab(a3, tmp_path) as lab:
        node = incident.approval.target.node  # type: ignore[union-attr]
        lab.kube.script[node] = "error"
        report = R.handle_until_done(lab.remediator(LIVE, support=False), dict(request))
        assert report.result is Result.FAILED
        failed = lab.incident(incident.id)
        assert failed.state is State.FAILED
        assert R.steps_of(lab.incident(incident.id))["await_gke"] == "failed"
        note = failed.audit[-1].note
        assert "ended in ERROR" in note and "cordoned" in note
        assert f"kubectl label nodes {node} {FAULT_BEHAVIOR}=XID --overwrite" in note
        assert lab.kube.node(node)["spec"]["unschedulable"] is True
        assert lab.kube.statuses[node] == ["PodsEvicted", "ERROR"]
        assert lab.kube.evictions == [] and lab.compute.deletes == []
        assert "LoopbreakerGKERepairFailed" in lab.kube.event_reasons()


def test_no_progress_fails_after_the_stall_time_across_deliveries(
    a3: tuple[Path, Incident, dict[str, Any]], tmp_path: Path
) -> None:
    _, incident, request = a3
    with open_lab(a3, tmp_path) as lab:
        node = incident.approval.target.node  # type: ignore[union-attr]
        lab.kube.script[node] = "stall"
        policy = replace(LIVE, gke_repair_stall=timedelta(minutes=12))
        report = R.handle_until_done(lab.remediator(policy, support=False), dict(request))
        assert report.result is Result.FAILED
        note = lab.incident(incident.id).audit[-1].note
        assert f"no progress: {STATUS} stayed PodsEvicted for 0:12:00" in note
        assert lab.kube.node(node)["spec"]["unschedulable"] is True
        # The 7-minute invocation budget ran out first: the follow spanned deliveries.
        record = lab.incident(incident.id).remediation
        assert record is not None and record.gke_status == "PodsEvicted"
        waited = lab.clock() - (record.handed_at or lab.clock())
        assert timedelta(minutes=12) <= waited < timedelta(minutes=14)


def test_an_on_demand_vm_takes_the_branch_the_cards_rule_names(
    a3: tuple[Path, Incident, dict[str, Any]], tmp_path: Path
) -> None:
    """Approved under the rule (Compute unread when asking); Compute then says STANDARD: the
    approval is not wasted, the VM is deleted as the card's "otherwise" said."""
    _, incident, request = a3
    with open_lab(a3, tmp_path, provisioning_model="STANDARD") as lab:
        report = R.handle_until_done(lab.remediator(LIVE, support=False), dict(request))
        assert report.result is Result.REMEDIATED, report
        done = lab.incident(incident.id)
        assert list(R.steps_of(done)) == ["recheck", "cordon", "drain", "delete_vm"]
        assert done.remediation is not None and done.remediation.path is RepairPath.DELETE
        recheck = done.remediation.steps[0].detail
        assert "repair path delete" in recheck and "the approved rule selects delete" in recheck
        assert "provisioning model STANDARD" in recheck
        assert lab.compute.fault_reports == [] and lab.kube.statuses == {}
        assert len(lab.compute.deletes) == 1


def test_the_dry_run_plans_the_gke_path_without_a_mutating_call(
    a3: tuple[Path, Incident, dict[str, Any]], tmp_path: Path
) -> None:
    _, incident, request = a3
    with open_lab(a3, tmp_path) as lab:
        report = lab.remediator(RemediationPolicy(dry_run=True)).handle(dict(request))
        assert report.result is Result.PLANNED
        assert report.reason == "dry run, repair path gke: 2 mutating call(s) would be made"
        planned = {s.step.value: s for s in report.steps}
        # The label patch and the support case: nothing evicted, nothing deleted.
        assert list(planned) == ["recheck", "hand_to_gke", "await_gke", "support_case"]
        assert (
            planned["hand_to_gke"]
            .calls[0]
            .startswith(
                f"PATCH /api/v1/nodes/{incident.approval.target.node} labels {FAULT_BEHAVIOR}=XID"  # type: ignore[union-attr]
            )
        )
        assert "until OperationDone" in planned["await_gke"].detail
        assert R.mutations(lab) == [] and lab.kube.statuses == {}


def test_the_report_path_sends_the_diagnosed_fault_reason_after_the_drain(
    a3_report: tuple[Path, Incident, dict[str, Any]], tmp_path: Path
) -> None:
    _, incident, request = a3_report
    assert incident.approval is not None
    assert incident.approval.target.repair_path is RepairPath.REPORT
    card = "\n".join(notify.render(incident).recommendations)
    assert "Repair path report (reportHostAsFaulty). Why: LOOPBREAKER_REPAIR_PATH=report" in card
    with open_lab(a3_report, tmp_path) as lab:
        report = R.handle_until_done(lab.remediator(LIVE, support=False), dict(request))
        assert report.result is Result.REMEDIATED, report
        assert list(R.steps_of(lab.incident(incident.id))) == [
            "recheck",
            "cordon",
            "drain",
            "report_host_faulty",
        ]
        [(*_, body)] = lab.compute.fault_reports
        # Compute's discovery document: "Required field, only allows IMMEDIATE".
        assert body["disruptionSchedule"] == "IMMEDIATE"
        [reason] = body["faultReasons"]
        assert reason["behavior"] == "UNRECOVERABLE_GPU_ERROR"
        assert incident.id in reason["description"]
        assert lab.kube.evictions and lab.compute.deletes == []
        assert lab.kube.statuses == {}  # GKE's report-and-replace was not involved
        notes = " ".join(a.note for a in lab.incident(incident.id).audit)
        assert "repair path report" in notes and "host reported with reportHostAsFaulty" in notes


def test_a_node_that_does_not_qualify_takes_the_delete_path(
    approved: tuple[Path, Incident, dict[str, Any]],
) -> None:
    """The bundled faulty-host scenario runs on TPU v5p nodes: no report-and-replace."""
    _, incident, _ = approved
    assert incident.approval is not None
    target = incident.approval.target
    assert target.repair_path is RepairPath.DELETE
    assert "is not one GKE's report-and-replace supports" in (target.repair_why or "")
    text = "\n".join(notify.render(incident).recommendations)
    assert "Repair path delete" in text and "Delete VM" in text


def test_a_fixed_gke_path_on_a_node_that_cannot_take_it_asks_for_no_approval(
    tmp_path: Path,
) -> None:
    store_path = tmp_path / "s.sqlite"
    settings = K.chat_settings(LOOPBREAKER_REPAIR_PATH="gke")
    replay.run(
        [K.FAULTY / "logs.json"], settings=settings, telemetry=K.FAULTY, store_path=store_path
    )
    store = SqliteStore(store_path)
    try:
        found = [i for i in store.list_incidents() if i.diagnosis and i.diagnosis.target_reason]
    finally:
        store.close()
    assert found, "the faulty host was not diagnosed"
    for incident in found:
        # The message shows the reason instead of the buttons: nothing can be approved.
        assert incident.approval_request is None and incident.approval is None
        reason = incident.diagnosis.target_reason  # type: ignore[union-attr]
        assert "LOOPBREAKER_REPAIR_PATH=gke" in reason
        assert "machine type ct5p-hightpu-4t is not one GKE's report-and-replace supports" in reason


def test_a_clock_that_stands_still_hands_over_to_a_redelivery_rather_than_spin(
    a3: tuple[Path, Incident, dict[str, Any]], tmp_path: Path
) -> None:
    _, incident, request = a3
    with open_lab(a3, tmp_path) as lab:
        node = incident.approval.target.node  # type: ignore[union-attr]
        lab.kube.script[node] = "stall"
        lab.sleep = RecordingSleep()  # sleeps, but the lab's clock never moves
        with pytest.raises(TransientError, match="following it on redelivery"):
            lab.remediator(LIVE, support=False).handle(dict(request))
        assert 0 < len(lab.sleep.calls) <= 100
        record = lab.incident(incident.id).remediation
        assert record is not None and record.gke_status == "PodsEvicted"
        assert lab.incident(incident.id).state is State.REMEDIATING
