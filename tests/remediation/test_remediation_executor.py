"""The remediation executor through the real kubernetes and google-cloud clients.

Every case starts from the faulty-host incident approved in chat, runs the executor with
the real adapters against local servers that speak the Kubernetes, Compute Engine and
Cloud Support REST APIs, injects one failure, and asserts the final state, the audit
trail and exactly which mutating calls were (not) made.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
import remedkit as R
from fakeservers.base import Fault

from loopbreaker.incidents import Incident, State
from loopbreaker.incidents.remediation import Outcome, Step
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import DrainMode, RemediationPolicy

LIVE = RemediationPolicy(dry_run=False)


# --- the whole way ----------------------------------------------------------------------


def test_an_approved_host_is_cordoned_drained_deleted_and_reported(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    report = lab.remediator(LIVE).handle(request_)
    assert report.result is Result.REMEDIATED, report
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.REMEDIATED
    assert R.steps_of(incident) == {
        "recheck": "done",
        "cordon": "done",
        "drain": "done",
        "delete_vm": "done",
        "support_case": "done",
    }
    node = lab.node()
    assert node["spec"]["unschedulable"] is True
    annotations = node["metadata"]["annotations"]
    assert annotations["loopbreaker.dev/incident"] == incident.id
    assert annotations["loopbreaker.dev/approved-by"] == f"{K.APPROVER} via slack"
    # The training pod was evicted; the DaemonSet and mirror pods were left alone.
    assert [(ns, pod) for ns, pod, _ in lab.kube.evictions] == [
        ("default", "llama3-70b-training-slice-0-2-7zpkt")
    ]
    assert lab.pods_on_node() == ["fluentbit-gke-x7k2", f"kube-proxy-{R.NODE}"]
    [(project, zone, name, request_id)] = lab.compute.deletes
    assert (project, zone, name) == (R.PROJECT, R.ZONE, R.NODE)
    assert incident.remediation is not None and incident.remediation.delete_request_id == request_id
    [case] = lab.support.created
    assert R.HOST in case["description"] and case["displayName"].startswith("GKE node host")
    assert incident.remediation.support_case in lab.support.cases
    # Every step is in the audit trail and was posted to the chat thread.
    notes = " | ".join(a.note for a in incident.audit)
    for step in ("recheck: done", "cordon: done", "drain: done", "delete_vm: done"):
        assert step in notes
    assert incident.audit[-1].to_state is State.REMEDIATED
    assert "Remediation:" in lab.notifier.posted[-1].remediation


# --- injected failures, one per step ------------------------------------------------


def _fail_node_get(lab: R.Lab) -> None:
    lab.kube.inject(Fault.SERVER_ERROR, times=5, path=f"/api/v1/nodes/{R.NODE}")


def _fail_patch(lab: R.Lab) -> None:
    original = lab.kube.route

    def refuse_patch(request: Any) -> Any:
        if request.method == "PATCH":
            return lab.kube.error(500, "etcd unavailable")
        return original(request)

    lab.kube.route = refuse_patch  # type: ignore[method-assign]


def _evict_429_then_201(lab: R.Lab) -> None:
    lab.kube.eviction_script[("default", "llama3-70b-training-slice-0-2-7zpkt")] = [429, 429, 201]


def _evict_500(lab: R.Lab) -> None:
    lab.kube.eviction_script[("default", "llama3-70b-training-slice-0-2-7zpkt")] = [500]


def _pdb_forever(lab: R.Lab) -> None:
    lab.kube.eviction_script[("default", "llama3-70b-training-slice-0-2-7zpkt")] = [429] * 1000
    clock = lab.clock
    lab.sleep.calls.clear()
    sleep = lab.sleep

    def advancing(seconds: float) -> None:
        sleep.calls.append(seconds)
        clock.advance(seconds=seconds)

    lab.sleep = advancing  # type: ignore[assignment]


def _recreated(lab: R.Lab) -> None:
    lab.compute.recreate(R.PROJECT, R.ZONE, R.NODE, "9999999999999999999")


def _delete_404(lab: R.Lab) -> None:
    # The re-check and the re-read before deleting see the VM; the DELETE finds it gone.
    lab.compute.inject(Fault.NOT_FOUND, times=1, path=f"/instances/{R.NODE}", after=2)


def _operation_error(lab: R.Lab) -> None:
    lab.compute.operation_errors[R.NODE] = {"code": "RESOURCE_IN_USE", "message": "in use"}


def _support_403(lab: R.Lab) -> None:
    lab.support.inject(Fault.FORBIDDEN, times=5, path="/cases")


Case = tuple[Callable[[R.Lab], None], RemediationPolicy, State, dict[str, str], bool, bool]

CASES: dict[str, Case] = {
    # name: (inject, policy, final state, step outcomes, cordoned, VM deleted)
    "node_get_fails": (
        _fail_node_get, LIVE, State.FAILED, {"recheck": "failed"}, False, False,
    ),
    "patch_fails": (
        _fail_patch, LIVE, State.FAILED, {"recheck": "done", "cordon": "failed"}, False, False,
    ),
    "eviction_429_then_201": (
        _evict_429_then_201, LIVE, State.REMEDIATED,
        {"recheck": "done", "cordon": "done", "drain": "done", "delete_vm": "done",
         "support_case": "done"}, True, True,
    ),
    "eviction_500": (
        _evict_500, LIVE, State.FAILED,
        {"recheck": "done", "cordon": "done", "drain": "failed"}, True, False,
    ),
    "drain_timeout_wait": (
        _pdb_forever, LIVE, State.FAILED,
        {"recheck": "done", "cordon": "done", "drain": "failed"}, True, False,
    ),
    "drain_timeout_delete": (
        _pdb_forever, replace(LIVE, drain_mode=DrainMode.DELETE_AFTER_TIMEOUT), State.REMEDIATED,
        {"recheck": "done", "cordon": "done", "drain": "done", "delete_vm": "done",
         "support_case": "done"}, True, True,
    ),
    "instance_id_mismatch": (
        _recreated, LIVE, State.FAILED, {"recheck": "failed"}, False, False,
    ),
    "delete_404": (
        _delete_404, LIVE, State.REMEDIATED,
        {"recheck": "done", "cordon": "done", "drain": "done", "delete_vm": "done",
         "support_case": "done"}, True, False,
    ),
    "operation_error": (
        _operation_error, LIVE, State.FAILED,
        {"recheck": "done", "cordon": "done", "drain": "done", "delete_vm": "failed"}, True, False,
    ),
    "support_403": (
        _support_403, LIVE, State.REMEDIATED,
        {"recheck": "done", "cordon": "done", "drain": "done", "delete_vm": "done",
         "support_case": "failed"}, True, True,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_injected_failures(lab: R.Lab, request_: dict[str, Any], name: str) -> None:
    inject, policy, final, outcomes, cordoned, deleted = CASES[name]
    inject(lab)
    report = R.handle_until_done(lab.remediator(policy), request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is final, (report, R.steps_of(incident))
    assert R.steps_of(incident) == outcomes
    assert bool(lab.node()["spec"].get("unschedulable")) is cordoned
    assert (R.NODE in [d[2] for d in lab.compute.deleted]) is deleted
    if "recheck" in outcomes and outcomes["recheck"] == "failed":
        assert R.mutations(lab) == [] and lab.compute.deletes == [] and lab.support.created == []
    if final is State.FAILED and cordoned:
        assert any("stays cordoned" in line for line in lab.notifier.posted[-1].remediation)
    if outcomes.get("drain") == "failed":
        assert lab.compute.deletes == [] and lab.compute.fault_reports == []
    assert incident.audit[-1].to_state is final


def test_a_pdb_is_retried_with_backoff(lab: R.Lab, request_: dict[str, Any]) -> None:
    _evict_429_then_201(lab)
    lab.remediator(LIVE).handle(request_)
    codes = [code for _, _, code in lab.kube.evictions]
    assert codes == [429, 429, 201] and lab.sleep.calls == [5.0, 10.0]


# --- safety -------------------------------------------------------------------------


def test_dry_run_reads_and_plans_but_sends_no_mutating_request(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    report = lab.remediator(RemediationPolicy()).handle(request_)
    assert report.result is Result.PLANNED
    assert R.mutations(lab) == [] and lab.compute.deletes == [] and lab.support.created == []
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.APPROVED and incident.remediation is not None
    assert incident.remediation.dry_run
    calls = [c for s in incident.remediation.steps for c in s.calls]
    assert f"PATCH /api/v1/nodes/{R.NODE} spec.unschedulable=true" in calls[0]
    assert any("/pods/llama3-70b-training-slice-0-2-7zpkt/eviction" in c for c in calls)
    assert any(c.startswith(f"DELETE /compute/v1/projects/{R.PROJECT}") for c in calls)
    assert any(c.startswith(f"POST /v2/projects/{R.PROJECT}/cases") for c in calls)
    assert {s.outcome for s in incident.remediation.steps} == {Outcome.DONE, Outcome.PLANNED}
    # A live run afterwards still works: the plan did not use the approval up.
    assert lab.remediator(LIVE).handle(request_).result is Result.REMEDIATED


def test_a_forged_request_changes_nothing(lab: R.Lab, request_: dict[str, Any]) -> None:
    before = lab.incident(request_["incident_id"]).to_dict()
    other_vm = {**request_, "target": {**request_["target"], "instance_id": "1111111111"}}
    other_approval = {**request_, "approval_id": "apr-forged"}
    for forged in (other_vm, other_approval):
        assert lab.remediator(LIVE).handle(forged).result is Result.IGNORED
    assert lab.incident(request_["incident_id"]).to_dict() == before
    assert R.mutations(lab) == [] and lab.compute.deletes == []


def test_a_request_for_an_incident_that_is_not_approved_changes_nothing(
    lab: R.Lab, request_: dict[str, Any], approved: tuple[Path, Incident, dict[str, Any]]
) -> None:
    # Put the incident back the way it was before anyone approved it.
    waiting = lab.store.update(
        request_["incident_id"],
        lambda i: replace(i, state=State.AWAITING_APPROVAL, approval=None),
    ).incident
    assert waiting is not None
    assert lab.remediator(LIVE).handle(request_).result is Result.IGNORED
    assert lab.incident(waiting.id).to_dict() == waiting.to_dict()
    assert R.mutations(lab) == [] and lab.compute.deletes == []


def test_the_deletion_budget_is_counted_per_cluster(lab: R.Lab, request_: dict[str, Any]) -> None:
    cluster = request_["target"]["cluster"]
    assert lab.store.reserve_deletion(cluster, "inc-earlier-1", lab.clock(), 2)
    assert lab.store.reserve_deletion(cluster, "inc-earlier-2", lab.clock(), 2)
    lab.remediator(LIVE).handle(request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.FAILED and "2 host repair(s)" in incident.audit[-1].note
    assert R.mutations(lab) == [] and lab.compute.deletes == []
    # The budget is spent now, and back once the two deletions are over an hour old.
    assert not lab.store.reserve_deletion(cluster, "inc-now", lab.clock(), 2)
    later = lab.clock() + timedelta(minutes=61)
    assert lab.store.deletions_since(cluster, later - timedelta(hours=1)) == 0
    assert lab.store.reserve_deletion(cluster, "inc-later", later, 2)


# --- redelivery -----------------------------------------------------------------------


def test_a_redelivered_request_never_repeats_a_completed_step(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    remediator = lab.remediator(LIVE)
    other = {**request_, "incident_id": "inc-0000000000000000"}  # no such incident
    deliveries = [request_] * 3 + [other] * 2
    random.Random(8).shuffle(deliveries)
    results = [remediator.handle(d).result for d in deliveries]
    assert results.count(Result.REMEDIATED) == 1 and results.count(Result.DUPLICATE) == 2
    assert results.count(Result.IGNORED) == 2
    patches = [p for p in lab.kube.patches if p[0] == R.NODE]
    assert len(patches) == 1 and len(lab.compute.deletes) == 1 and len(lab.support.created) == 1


def test_a_drain_interrupted_mid_way_resumes_without_repeating(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    from loopbreaker.errors import TransientError

    _evict_429_then_201(lab)
    calls = {"n": 0}

    def crash_once(seconds: float) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TransientError("instance shut down mid-drain")

    remediator = lab.remediator(LIVE)
    remediator._sleep = crash_once  # the executor's injected sleep
    with pytest.raises(TransientError):
        remediator.handle(request_)
    stopped = lab.incident(request_["incident_id"])
    assert stopped.state is State.REMEDIATING and R.steps_of(stopped) == {
        "recheck": "done",
        "cordon": "done",
    }
    assert remediator.handle(request_).result is Result.REMEDIATED
    assert len([p for p in lab.kube.patches if p[0] == R.NODE]) == 1
    assert len(lab.compute.deletes) == 1


def test_a_delivery_holding_the_lease_makes_others_wait(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    from loopbreaker.errors import TransientError
    from loopbreaker.remediation import executor as remediate

    held = lab.store.update(
        request_["incident_id"],
        lambda i: remediate.claim(i, request_["dedup_id"], lab.clock(), timedelta(minutes=15)),
    )
    assert held.changed
    with pytest.raises(TransientError, match="another delivery"):
        lab.remediator(LIVE).handle(request_)
    assert R.mutations(lab) == []
    lab.clock.advance(minutes=16)  # the holder died: its lease ran out
    assert lab.remediator(LIVE).handle(request_).result is Result.REMEDIATED


def test_malformed_requests_are_invalid_input(lab: R.Lab) -> None:
    from loopbreaker.errors import InvalidInput

    for bad in (None, [], {"incident_id": "x"}, {"incident_id": "x", "approval_id": "a",
                "dedup_id": "d", "action": "isolate_host", "target": {"node": "n"}}):  # fmt: skip
        with pytest.raises(InvalidInput):
            lab.remediator(LIVE).handle(bad)
    assert R.mutations(lab) == []


def test_steps_are_the_documented_names() -> None:
    assert [s.value for s in Step] == [
        "recheck", "cordon", "drain", "delete_vm", "report_host_faulty", "hand_to_gke",
        "await_gke", "support_case",
    ]  # fmt: skip


# --- found by probing from outside -----------------------------------------------------


def test_a_terminating_pod_is_waited_for_not_evicted_again(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    pod = next(p for p in lab.kube.pods if p["metadata"]["name"].endswith("7zpkt"))
    pod["metadata"]["deletionTimestamp"] = "2026-05-20T08:40:00Z"
    waited: list[float] = []

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        if len(waited) == 2:  # the pod finishes shutting down
            lab.kube.pods.remove(pod)

    lab.sleep = sleep  # type: ignore[assignment]
    assert lab.remediator(LIVE).handle(request_).result is Result.REMEDIATED
    assert lab.kube.evictions == [] and waited == [5.0, 10.0]


def test_a_vm_recreated_between_the_recheck_and_the_delete_is_not_deleted(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    original = lab.compute.route
    gets = {"n": 0}

    def recreate_on_second_read(request: Any) -> Any:
        if request.method == "GET" and request.path.endswith(f"/instances/{R.NODE}"):
            gets["n"] += 1
            if gets["n"] == 2:
                lab.compute.recreate(R.PROJECT, R.ZONE, R.NODE, "7777777777777777777")
        return original(request)

    lab.compute.route = recreate_on_second_read  # type: ignore[method-assign]
    lab.remediator(LIVE).handle(request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.FAILED and "7777777777777777777" in incident.audit[-1].note
    assert lab.compute.deletes == [] and lab.compute.deleted == []


@pytest.mark.parametrize("incident_id", ["a/b", "inc-../x", "", 42])
def test_a_request_with_a_malformed_incident_id_is_invalid_input(
    lab: R.Lab, request_: dict[str, Any], incident_id: object
) -> None:
    from loopbreaker.errors import InvalidInput

    with pytest.raises(InvalidInput, match="not an incident id"):
        lab.remediator(LIVE).handle({**request_, "incident_id": incident_id})


# --- each safety guard on its own -------------------------------------------------------


def test_a_limit_of_one_deletion_an_hour_is_spent_by_the_first_remediation(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    one = replace(LIVE, max_deletions_per_hour=1)
    assert lab.remediator(one).handle(request_).result is Result.REMEDIATED
    cluster = request_["target"]["cluster"]
    # The executor's reservation is really counted: a second remediation in the cluster
    # within the hour gets none, and deletes nothing.
    assert lab.store.deletions_since(cluster, lab.clock() - timedelta(hours=1)) == 1
    assert not lab.store.reserve_deletion(cluster, "inc-second", lab.clock(), 1)


def test_an_operation_that_acted_on_another_vm_id_is_a_failure(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    original = lab.compute.route

    def recreated_just_before_the_delete(request: Any) -> Any:
        if request.method == "DELETE" and request.path.endswith(f"/instances/{R.NODE}"):
            lab.compute.recreate(R.PROJECT, R.ZONE, R.NODE, "8888888888888888888")
        return original(request)

    lab.compute.route = recreated_just_before_the_delete  # type: ignore[method-assign]
    R.handle_until_done(lab.remediator(LIVE), request_)
    incident = lab.incident(request_["incident_id"])
    assert incident.state is State.FAILED
    assert R.steps_of(incident)["delete_vm"] == "failed"
    assert "acted on VM id 8888888888888888888" in incident.audit[-1].note


def test_a_crash_right_after_the_delete_ends_remediated_on_redelivery(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    from loopbreaker.errors import TransientError

    original = lab.compute.route
    crashed = {"done": False}

    def die_after_the_delete(request: Any) -> Any:
        reply = original(request)
        if request.method == "DELETE" and not crashed["done"]:
            crashed["done"] = True
            raise TransientError("the instance died right after the DELETE was accepted")
        return reply

    remediator = lab.remediator(LIVE)
    lab.compute.running_polls = 3  # the delete is still running when the executor dies
    lab.compute.route = die_after_the_delete  # type: ignore[method-assign]
    with pytest.raises(Exception):  # noqa: B017 - the crash, whatever the client makes of it
        remediator.handle(request_)
    lab.compute.route = original  # type: ignore[method-assign]
    lab.clock.advance(minutes=16)  # the crashed delivery's lease runs out
    assert R.handle_until_done(remediator, request_).result is Result.REMEDIATED
    incident = lab.incident(request_["incident_id"])
    assert R.steps_of(incident)["delete_vm"] == "done"
    sent = [r.param("requestId") for r in lab.compute.requests if r.method == "DELETE"]
    assert len(sent) == 2 and len(set(sent)) == 1  # the redelivery sent the same requestId
    assert len(lab.compute.deletes) == 1  # so Compute answered with the first operation
    assert [d[2] for d in lab.compute.deleted] == [R.NODE]
    assert incident.remediation is not None and incident.remediation.delete_request_id == sent[0]
