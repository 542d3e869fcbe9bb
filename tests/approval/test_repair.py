"""Choosing the repair path (pure): GKE's report-and-replace where the node qualifies.

The requirements are those of "Report faulty hosts through GKE" (Manage AI-optimized GKE
clusters, updated 2026-04-06): GKE 1.32.3-gke.1057001 or later; A4X Max, A4X, A4, A3 Ultra,
A3 Mega or A3 High (8 GPUs); a reservation-bound VM. Versions are kubelet versions as nodes
report them (``status.nodeInfo.kubeletVersion``, e.g. ``v1.32.4-gke.1767000``).
"""

from __future__ import annotations

import pytest

from loopbreaker.approval.repair import (
    GKE_FAULT_BEHAVIOR,
    FaultReason,
    HostFacts,
    RepairPath,
    RepairPolicy,
    choose_path,
    fault_reason,
    gke_blockers,
    gke_version,
)

A3 = HostFacts("n1", machine_type="a3-highgpu-8g", version="v1.32.4-gke.1767000")


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
    blockers = gke_blockers(HostFacts("n1", "a3-megagpu-8g", version), confirm_reservation=False)
    assert (blockers == []) is qualifies


@pytest.mark.parametrize(
    "machine",
    ["a4x-maxgpu-4g-metal", "a4x-highgpu-4g", "a4-highgpu-8g", "a3-ultragpu-8g", "a3-megagpu-8g"],
)
def test_every_documented_machine_type_qualifies(machine: str) -> None:
    facts = HostFacts("n1", machine, "v1.32.4-gke.1767000")
    assert gke_blockers(facts, confirm_reservation=False) == []


@pytest.mark.parametrize("machine", ["a3-highgpu-4g", "a2-ultragpu-8g", "ct5p-hightpu-4t"])
def test_other_machine_types_do_not(machine: str) -> None:
    facts = HostFacts("n1", machine, "v1.32.4-gke.1767000")
    [blocker] = gke_blockers(facts, confirm_reservation=False)
    assert f"machine type {machine} is not one report-and-replace supports" in blocker


def test_the_reservation_is_confirmed_by_compute_at_the_recheck() -> None:
    assert gke_blockers(A3, confirm_reservation=False) == []
    assert gke_blockers(A3, confirm_reservation=True) == [
        "Compute Engine does not say the VM is reservation-bound"
    ]
    bound = HostFacts(
        "n1", "a3-highgpu-8g", "v1.32.4-gke.1767000", provisioning_model="RESERVATION_BOUND"
    )
    assert gke_blockers(bound, confirm_reservation=True) == []
    specific = HostFacts(
        "n1",
        "a3-highgpu-8g",
        "v1.32.4-gke.1767000",
        provisioning_model="STANDARD",
        reservation_type="SPECIFIC_RESERVATION",
    )
    assert gke_blockers(specific, confirm_reservation=True) == []
    spot = HostFacts("n1", "a3-highgpu-8g", "v1.32.4-gke.1767000", provisioning_model="SPOT")
    assert gke_blockers(spot, confirm_reservation=True) == [
        "the VM is not reservation-bound (provisioning model SPOT)"
    ]


def test_a_spot_node_never_takes_the_gke_path() -> None:
    spot = HostFacts("n1", "a3-highgpu-8g", "v1.32.4-gke.1767000", spot=True)
    choice = choose_path(RepairPolicy.AUTO, spot)
    assert choice.path is RepairPath.DELETE and "not reservation-bound" in choice.why


def test_auto_takes_gke_where_it_qualifies_and_delete_elsewhere() -> None:
    chosen = choose_path(RepairPolicy.AUTO, A3)
    assert chosen.path is RepairPath.GKE and chosen.refusal is None
    assert "a3-highgpu-8g" in chosen.why and "v1.32.4-gke.1767000" in chosen.why
    unknown = choose_path(RepairPolicy.AUTO, HostFacts("n1"))
    assert unknown.path is RepairPath.DELETE
    assert "machine type is unknown" in unknown.why and "GKE version is unknown" in unknown.why


def test_a_fixed_path_is_taken_as_set_and_a_fixed_gke_is_refused_where_it_cannot_work() -> None:
    assert choose_path(RepairPolicy.REPORT, HostFacts("n1")).path is RepairPath.REPORT
    assert choose_path(RepairPolicy.DELETE, A3).path is RepairPath.DELETE
    assert choose_path(RepairPolicy.GKE, A3).refusal is None
    refused = choose_path(RepairPolicy.GKE, HostFacts("n1", "ct5p-hightpu-4t", "v1.32.4-gke.1"))
    assert refused.refusal is not None and refused.refusal.startswith(
        "LOOPBREAKER_REPAIR_PATH=gke, but GKE's report-and-replace cannot take node n1"
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
