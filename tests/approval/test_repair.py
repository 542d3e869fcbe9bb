"""Choosing the repair path (pure): GKE's report-and-replace where the node qualifies.

The requirements are those of "Report faulty hosts through GKE" (Manage AI-optimized GKE
clusters, updated 2026-04-06): GKE 1.32.3-gke.1057001 or later; A4X Max, A4X, A4, A3 Ultra,
A3 Mega or A3 High (8 GPUs); a reservation-bound VM. "Report faulty host" and "Troubleshoot
the faulty host API" (AI Hypercomputer) ask the same of ``reportHostAsFaulty``: a RUNNING VM
on the reservation-bound provisioning model (``INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED``
otherwise). Versions are kubelet versions as nodes
report them (``status.nodeInfo.kubeletVersion``, e.g. ``v1.32.4-gke.1767000``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from loopbreaker.approval.repair import (
    GKE_FAULT_BEHAVIOR,
    ComputeFacts,
    FaultReason,
    HostFacts,
    RepairPath,
    RepairPolicy,
    Requirements,
    choose_path,
    fault_reason,
    gke_version,
    requirements,
    settle_branch,
)

A3 = HostFacts("n1", machine_type="a3-highgpu-8g", version="v1.32.4-gke.1767000")
BOUND = ComputeFacts("RESERVATION_BOUND", "SPECIFIC_RESERVATION", "a3-highgpu-8g", "RUNNING")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v1.32.3-gke.1057001", (1, 32, 3, 1057001)),
        ("1.33.1-gke.1107000", (1, 33, 1, 1107000)),
        ("v1.30.2", None),  # not a GKE build
        ("", None),
        (None, None),
    ],
)
def test_gke_versions_are_read_as_numbers(text: str | None, expected: object) -> None:
    assert gke_version(text) == expected


def _gke(facts: HostFacts) -> Requirements:
    return requirements(RepairPath.GKE, facts)


@pytest.mark.parametrize(
    ("version", "qualifies"),
    [
        ("v1.32.3-gke.1057001", True),  # the first patch that supports it
        ("v1.32.3-gke.1056000", False),
        ("v1.31.6-gke.1020000", False),
        ("v1.33.0-gke.1000000", True),
    ],
)
def test_the_minimum_gke_version_is_compared_build_by_build(version: str, qualifies: bool) -> None:
    found = _gke(HostFacts("n1", "a3-megagpu-8g", version, compute=BOUND))
    assert (found.blockers == ()) is qualifies
    # The host report has no GKE version to meet.
    assert requirements(RepairPath.REPORT, HostFacts("n1", "a3-megagpu-8g", version)).blockers == ()


@pytest.mark.parametrize(
    "machine",
    ["a4x-maxgpu-4g-metal", "a4x-highgpu-4g", "a4-highgpu-8g", "a3-ultragpu-8g", "a3-megagpu-8g"],
)
def test_every_documented_machine_type_qualifies(machine: str) -> None:
    facts = HostFacts("n1", machine, "v1.32.4-gke.1767000", compute=BOUND)
    assert _gke(facts) == Requirements()


@pytest.mark.parametrize("machine", ["a3-highgpu-4g", "a2-ultragpu-8g", "ct5p-hightpu-4t"])
def test_other_machine_types_do_not(machine: str) -> None:
    facts = HostFacts("n1", machine, "v1.32.4-gke.1767000", compute=BOUND)
    [blocker] = _gke(facts).blockers
    assert f"machine type {machine} is not one GKE's report-and-replace supports" in blocker
    [blocker] = requirements(RepairPath.REPORT, facts).blockers
    assert f"machine type {machine} is not one reportHostAsFaulty supports" in blocker


def test_only_the_reservation_bound_provisioning_model_qualifies() -> None:
    # Unknown until Compute is read: pending, not blocked.
    assert _gke(A3) == Requirements(pending=True)
    assert _gke(replace(A3, compute=BOUND)) == Requirements()
    for model, affinity in [
        ("STANDARD", "ANY_RESERVATION"),
        # Consumes a reservation, but on the standard model: Google's pages require the
        # reservation-bound provisioning model itself.
        ("STANDARD", "SPECIFIC_RESERVATION"),
        ("SPOT", "NO_RESERVATION"),
        ("FLEX_START", "NO_RESERVATION"),
        (None, "ANY_RESERVATION"),  # no provisioningModel: Compute's default, STANDARD
    ]:
        facts = replace(A3, compute=ComputeFacts(model, affinity, "a3-highgpu-8g", "RUNNING"))
        [blocker] = _gke(facts).blockers
        words = f"provisioning model {model or 'STANDARD'}, reservation affinity {affinity}"
        assert blocker.startswith(f"the VM is not reservation-bound ({words})")
        assert "INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED" in blocker
    # GKE's Spot and flex-start labels settle it without Compute.
    assert "Spot" in _gke(replace(A3, spot=True)).blockers[0]
    assert "flex-start" in _gke(replace(A3, flex_start=True)).blockers[0]


def test_a_vm_that_is_not_running_cannot_be_reported() -> None:
    stopping = ComputeFacts("RESERVATION_BOUND", None, "a3-highgpu-8g", "STOPPING")
    assert _gke(replace(A3, compute=stopping)).blockers == (
        "Compute Engine says the VM is STOPPING, not RUNNING",
    )


def test_a_spot_node_never_takes_the_gke_path() -> None:
    spot = HostFacts("n1", "a3-highgpu-8g", "v1.32.4-gke.1767000", spot=True)
    choice = choose_path(RepairPolicy.AUTO, spot)
    assert choice.path is RepairPath.DELETE and "not reservation-bound" in choice.why
    assert choice.fallback is None


def test_auto_settles_the_path_from_computes_answer() -> None:
    chosen = choose_path(RepairPolicy.AUTO, replace(A3, compute=BOUND))
    assert (chosen.path, chosen.fallback, chosen.refusal) == (RepairPath.GKE, None, None)
    assert "a3-highgpu-8g" in chosen.why and "v1.32.4-gke.1767000" in chosen.why
    assert "Compute Engine says provisioning model RESERVATION_BOUND" in chosen.why
    on_demand = ComputeFacts("STANDARD", "ANY_RESERVATION", "a3-highgpu-8g", "RUNNING")
    standard = choose_path(RepairPolicy.AUTO, replace(A3, compute=on_demand))
    assert (standard.path, standard.fallback) == (RepairPath.DELETE, None)
    unknown = choose_path(RepairPolicy.AUTO, HostFacts("n1"))
    assert unknown.path is RepairPath.DELETE
    assert "machine type is unknown" in unknown.why and "GKE version is unknown" in unknown.why


def test_auto_without_computes_answer_approves_a_rule_with_delete_as_its_other_branch() -> None:
    gap = replace(A3, compute_gap="HTTP 403: permission denied")
    rule = choose_path(RepairPolicy.AUTO, gap)
    assert (rule.path, rule.fallback, rule.refusal) == (RepairPath.GKE, RepairPath.DELETE, None)
    assert "if Compute Engine confirms at the re-check that the VM is reservation-bound" in rule.why
    assert "otherwise cordon, drain and delete the VM" in rule.why
    assert "Compute Engine was not read when asking: HTTP 403: permission denied" in rule.why


def test_a_fixed_path_is_taken_as_set_and_refused_where_it_cannot_work() -> None:
    assert choose_path(RepairPolicy.DELETE, A3).path is RepairPath.DELETE
    assert choose_path(RepairPolicy.GKE, replace(A3, compute=BOUND)).refusal is None
    refused = choose_path(RepairPolicy.GKE, HostFacts("n1", "ct5p-hightpu-4t", "v1.32.4-gke.1"))
    assert refused.refusal is not None and refused.refusal.startswith(
        "LOOPBREAKER_REPAIR_PATH=gke, but GKE's report-and-replace cannot take node n1"
    )
    on_demand = ComputeFacts("STANDARD", "ANY_RESERVATION", "a3-megagpu-8g", "RUNNING")
    report = choose_path(RepairPolicy.REPORT, HostFacts("n1", "a3-megagpu-8g", compute=on_demand))
    assert report.refusal is not None and "reportHostAsFaulty cannot take node n1" in report.refusal
    # Unknown when asking: the fixed path alone, and the card says the re-check may refuse.
    pending = choose_path(RepairPolicy.REPORT, HostFacts("n1", "a3-megagpu-8g"))
    assert (pending.path, pending.fallback, pending.refusal) == (RepairPath.REPORT, None, None)
    assert "otherwise nothing is changed and the approval is refused" in pending.why


def test_the_rule_settles_on_a_branch_with_computes_answer_at_the_recheck() -> None:
    bound = settle_branch(RepairPath.GKE, RepairPath.DELETE, replace(A3, compute=BOUND))
    assert (bound.path, bound.refusal) == (RepairPath.GKE, None)
    on_demand = replace(A3, compute=ComputeFacts("STANDARD", "ANY_RESERVATION"))
    other = settle_branch(RepairPath.GKE, RepairPath.DELETE, on_demand)
    assert (other.path, other.refusal) == (RepairPath.DELETE, None)
    assert other.why.startswith("the approved rule selects delete (cordon, drain and delete")
    fixed = settle_branch(RepairPath.GKE, None, on_demand)
    assert fixed.refusal is not None
    assert fixed.refusal.startswith("repair path gke (GKE's report-and-replace) refused: ")
    assert settle_branch(RepairPath.DELETE, None, on_demand).path is RepairPath.DELETE
    # Compute not saying is no confirmation.
    unsure = settle_branch(RepairPath.REPORT, None, HostFacts("n1", "a3-megagpu-8g"))
    assert (
        unsure.refusal is not None and "does not say the VM is reservation-bound" in unsure.refusal
    )


def test_the_fault_reason_is_the_diagnosed_one_and_never_a_guess() -> None:
    assert fault_reason("UNRECOVERABLE_GPU_ERROR") is FaultReason.UNRECOVERABLE_GPU_ERROR
    assert fault_reason(None) is FaultReason.BEHAVIOR_UNSPECIFIED
    assert fault_reason("SOMETHING_NEW") is FaultReason.BEHAVIOR_UNSPECIFIED
    # GKE's label spells the reasons its own way.
    assert GKE_FAULT_BEHAVIOR == {
        FaultReason.BEHAVIOR_UNSPECIFIED: "unspecified",
        FaultReason.PERFORMANCE: "PERFORMANCE",
        FaultReason.SILENT_DATA_CORRUPTION: "SDC",
        FaultReason.UNRECOVERABLE_GPU_ERROR: "XID",
    }
