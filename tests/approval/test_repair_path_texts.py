"""The repair path's sentences, whole: what the card says the buttons approve, what a
refusal says, and which branch the re-check settles on and why.

test_repair.py checks the choice itself (which path, under which requirement); these
pin the words people read on the card, the plan, the audit trail and the node's Events,
for every policy against every kind of answer Compute Engine can give.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from loopbreaker.approval.repair import (
    ComputeFacts,
    HostFacts,
    RepairPath,
    RepairPolicy,
    choose_path,
    describe,
    gke_version,
    requirements,
    settle_branch,
)

A3 = HostFacts("n1", machine_type="a3-highgpu-8g", version="v1.32.4-gke.1767000")
BOUND = ComputeFacts("RESERVATION_BOUND", "SPECIFIC_RESERVATION", "a3-highgpu-8g", "RUNNING")
TAKES = "GKE's report-and-replace takes a3-highgpu-8g nodes on GKE v1.32.4-gke.1767000"
BOUND_WORDS = "provisioning model RESERVATION_BOUND, reservation affinity SPECIFIC_RESERVATION"
NOT_BOUND = (
    "the VM is not reservation-bound ({words}); {name} takes only RESERVATION_BOUND VMs "
    "(INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED)"
)
UNKNOWN = (
    "node n1's machine type is unknown (node.kubernetes.io/instance-type); node n1's GKE "
    "version is unknown"
)
GKE, REPORT = "GKE's report-and-replace", "reportHostAsFaulty"


def test_auto_with_computes_word_names_the_path_and_what_compute_said() -> None:
    chosen = choose_path(RepairPolicy.AUTO, replace(A3, compute=BOUND))
    assert (chosen.path, chosen.fallback, chosen.refusal) == (RepairPath.GKE, None, None)
    assert chosen.why == f"{TAKES}; Compute Engine says {BOUND_WORDS}"


@pytest.mark.parametrize(
    ("gap", "tail"),
    [(None, ""), ("HTTP 403", " (Compute Engine was not read when asking: HTTP 403)")],
)
def test_auto_without_computes_word_names_the_rule(gap: str | None, tail: str) -> None:
    chosen = choose_path(RepairPolicy.AUTO, replace(A3, compute_gap=gap))
    assert (chosen.path, chosen.fallback, chosen.refusal) == (
        RepairPath.GKE,
        RepairPath.DELETE,
        None,
    )
    assert chosen.why == (
        f"{TAKES}, if Compute Engine confirms at the re-check that the VM is reservation-bound "
        f"(provisioning model RESERVATION_BOUND); otherwise cordon, drain and delete the VM{tail}"
    )


@pytest.mark.parametrize(
    ("facts", "blockers"),
    [
        (HostFacts("n1"), UNKNOWN),
        (
            replace(A3, spot=True),
            NOT_BOUND.format(words="Spot (GKE's Spot label)", name=GKE),
        ),
        (
            replace(A3, flex_start=True),
            NOT_BOUND.format(
                words="flex-start (GKE's cloud.google.com/gke-flex-start label)", name=GKE
            ),
        ),
        (
            replace(A3, compute=ComputeFacts("STANDARD", None, None, "STOPPING")),
            NOT_BOUND.format(words="provisioning model STANDARD", name=GKE)
            + "; Compute Engine says the VM is STOPPING, not RUNNING",
        ),
        (
            replace(A3, version="v1.32.3-gke.1056999"),
            "GKE v1.32.3-gke.1056999 is older than 1.32.3-gke.1057001",
        ),
        (
            replace(A3, version="1.33"),
            "node n1's GKE version is unknown ('1.33' is not a GKE version)",
        ),
        (
            replace(A3, machine_type="a2-highgpu-1g"),
            "machine type a2-highgpu-1g is not one GKE's report-and-replace supports (A4X Max, "
            "A4X, A4, A3 Ultra, A3 Mega, A3 High with 8 GPUs)",
        ),
    ],
)
def test_auto_on_a_node_gke_cannot_take_deletes_and_says_why(
    facts: HostFacts, blockers: str
) -> None:
    chosen = choose_path(RepairPolicy.AUTO, facts)
    assert (chosen.path, chosen.fallback, chosen.refusal) == (RepairPath.DELETE, None, None)
    assert chosen.why == f"GKE's report-and-replace does not apply: {blockers}"


@pytest.mark.parametrize(
    ("policy", "takes"),
    [
        (RepairPolicy.GKE, TAKES),
        (RepairPolicy.REPORT, "reportHostAsFaulty takes a3-highgpu-8g nodes"),
    ],
)
def test_a_fixed_host_repair_says_it_was_set(policy: RepairPolicy, takes: str) -> None:
    settled = choose_path(policy, replace(A3, compute=BOUND))
    assert (
        settled.why
        == f"LOOPBREAKER_REPAIR_PATH={policy.value}; {takes}; Compute Engine says {BOUND_WORDS}"
    )
    pending = choose_path(policy, replace(A3, compute_gap="timed out"))
    assert (pending.fallback, pending.refusal) == (None, None)
    assert pending.why == (
        f"LOOPBREAKER_REPAIR_PATH={policy.value}; {takes}, if Compute Engine confirms at the "
        "re-check that the VM is reservation-bound; otherwise nothing is changed and the "
        f"approval is refused, as LOOPBREAKER_REPAIR_PATH={policy.value} allows no other path "
        "(Compute Engine was not read when asking: timed out)"
    )


@pytest.mark.parametrize(
    ("policy", "name", "facts", "blockers"),
    [
        (RepairPolicy.GKE, GKE, HostFacts("n1"), UNKNOWN),
        (
            RepairPolicy.REPORT,
            REPORT,
            HostFacts("n1"),
            "node n1's machine type is unknown (node.kubernetes.io/instance-type)",
        ),
        (
            RepairPolicy.REPORT,
            REPORT,
            replace(A3, compute=ComputeFacts(None, "ANY_RESERVATION")),
            NOT_BOUND.format(
                words="provisioning model STANDARD, reservation affinity ANY_RESERVATION",
                name=REPORT,
            ),
        ),
    ],
)
def test_a_fixed_host_repair_a_node_cannot_take_is_refused_with_the_reason(
    policy: RepairPolicy, name: str, facts: HostFacts, blockers: str
) -> None:
    chosen = choose_path(policy, facts)
    said = f"LOOPBREAKER_REPAIR_PATH={policy.value}, but {name} cannot take node n1: {blockers}"
    assert (chosen.why, chosen.refusal, chosen.fallback) == (said, said, None)
    assert chosen.path is (RepairPath.GKE if policy is RepairPolicy.GKE else RepairPath.REPORT)


def test_a_fixed_delete_needs_nothing_of_the_node() -> None:
    chosen = choose_path(RepairPolicy.DELETE, HostFacts("n1", spot=True))
    assert (chosen.path, chosen.why, chosen.refusal, chosen.fallback) == (
        RepairPath.DELETE,
        "LOOPBREAKER_REPAIR_PATH=delete",
        None,
        None,
    )
    assert requirements(RepairPath.DELETE, HostFacts("n1", spot=True)).blockers == ()


def test_the_machine_type_may_come_from_compute() -> None:
    from_compute = HostFacts("n1", version="v1.32.4-gke.1767000", compute=BOUND)
    assert choose_path(RepairPolicy.AUTO, from_compute).why == (
        f"{TAKES}; Compute Engine says {BOUND_WORDS}"
    )
    # The node's label wins over Compute's answer.
    labelled = replace(from_compute, machine_type="a3-megagpu-8g")
    assert "takes a3-megagpu-8g nodes" in choose_path(RepairPolicy.AUTO, labelled).why


def test_running_or_no_status_is_no_blocker() -> None:
    for status in ("RUNNING", None, ""):
        facts = replace(A3, compute=replace(BOUND, status=status))
        assert requirements(RepairPath.GKE, facts).blockers == ()


# --- the re-check's branch -----------------------------------------------------------


def test_the_approved_path_holds_when_compute_confirms_it() -> None:
    branch = settle_branch(RepairPath.REPORT, None, replace(A3, compute=BOUND))
    assert (branch.path, branch.why, branch.refusal) == (
        RepairPath.REPORT,
        f"Compute Engine says {BOUND_WORDS}",
        None,
    )


def test_the_rule_falls_back_and_says_why() -> None:
    standard = replace(A3, compute=ComputeFacts("STANDARD"))
    branch = settle_branch(RepairPath.GKE, RepairPath.DELETE, standard)
    assert (branch.path, branch.refusal) == (RepairPath.DELETE, None)
    assert branch.why == (
        "the approved rule selects delete (cordon, drain and delete the VM): "
        + NOT_BOUND.format(words="provisioning model STANDARD", name=GKE)
    )
    unsure = settle_branch(RepairPath.GKE, RepairPath.DELETE, A3)
    assert unsure.why == (
        "the approved rule selects delete (cordon, drain and delete the VM): Compute Engine "
        "does not say the VM is reservation-bound"
    )


def test_a_fixed_path_that_no_longer_holds_is_refused() -> None:
    branch = settle_branch(RepairPath.REPORT, None, A3)
    assert (branch.path, branch.why) == (RepairPath.REPORT, "")
    assert branch.refusal == (
        "repair path report (reportHostAsFaulty) refused: Compute Engine does not say the VM "
        "is reservation-bound; the approval allows no other path"
    )


def test_an_approved_delete_always_holds() -> None:
    branch = settle_branch(RepairPath.DELETE, RepairPath.GKE, HostFacts("n1", spot=True))
    assert (branch.path, branch.why, branch.refusal) == (
        RepairPath.DELETE,
        "the approved path is delete",
        None,
    )


def test_each_path_in_a_few_words() -> None:
    assert describe(RepairPath.GKE) == "hand the node to GKE's report-and-replace"
    assert describe(RepairPath.REPORT) == (
        "cordon, drain and report the host with reportHostAsFaulty"
    )
    assert describe(RepairPath.DELETE) == "cordon, drain and delete the VM"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        (" v1.32.3-gke.1057001 ", (1, 32, 3, 1057001)),
        ("1.32.3-gke.1057001", (1, 32, 3, 1057001)),
        ("v1.32.3-gke.1057001-extra", None),
        ("v1.32-gke.1057001", None),
        ("vv1.32.3-gke.1", None),
    ],
)
def test_gke_versions_are_read_strictly(text: str, parsed: object) -> None:
    assert gke_version(text) == parsed


def test_several_blockers_at_the_recheck_are_joined_with_semicolons() -> None:
    both = HostFacts("n1", compute=ComputeFacts("STANDARD", None, "a2-highgpu-1g", "STOPPING"))
    blockers = (
        "machine type a2-highgpu-1g is not one reportHostAsFaulty supports (A4X Max, A4X, A4, "
        "A3 Ultra, A3 Mega, A3 High with 8 GPUs); "
        + NOT_BOUND.format(words="provisioning model STANDARD", name=REPORT)
        + "; Compute Engine says the VM is STOPPING, not RUNNING"
    )
    refused = settle_branch(RepairPath.REPORT, None, both)
    assert refused.refusal == (
        f"repair path report (reportHostAsFaulty) refused: {blockers}; the approval allows no "
        "other path"
    )
    fallen = settle_branch(RepairPath.REPORT, RepairPath.DELETE, both)
    assert (
        fallen.why
        == f"the approved rule selects delete (cordon, drain and delete the VM): {blockers}"
    )
