"""Which node and VM an approval is for, where each of its fields comes from, and the
reason a card gives when there is none.

Pure: ``choose_target`` over a diagnosis, the incident's signals and the nodes the
diagnosis read, with Compute Engine's answer injected (``compute``). The repair path
chosen for the target has its own tests (test_repair.py, test_repair_path_texts.py);
here it matters only that the choice reaches the target.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from builders import ctx

from loopbreaker.approval.repair import ComputeFacts, FaultReason, RepairPath, RepairPolicy
from loopbreaker.approval.requests import Target, TargetChoice, choose_target
from loopbreaker.model import (
    Diagnosis,
    FailureEpisode,
    NodeInfo,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
    Signal,
    SignalKind,
    SuspectHost,
)

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)
HOST = "b7a3c1e2f4d5"
NODE = "gke-a3-pool-x7k2"
A3 = NodeInfo(
    NODE,
    node_pool="a3-pool",
    physical_host=HOST,
    zone="us-east5-a",
    instance=NODE + "-vm",
    project="proj",
    instance_id="5464165239889847435",
    machine_type="a3-highgpu-8g",
    kubelet_version="v1.32.4-gke.1767000",
)
BOUND = ComputeFacts("RESERVATION_BOUND", "SPECIFIC_RESERVATION", "a3-highgpu-8g", "RUNNING")


def episode(node: str, minute: int) -> FailureEpisode:
    return FailureEpisode(node, HOST, T0 + timedelta(minutes=minute), ("host_error",))


def suspect(**changes: Any) -> SuspectHost:
    values: dict[str, Any] = {
        "host": HOST,
        "nodes": (NODE,),
        "failures": 2,
        "zone": "us-east5-b",
        "node_pool": "suspect-pool",
        "episodes": (episode(NODE, 0), episode(NODE, 20)),
    }
    values.update(changes)
    return SuspectHost(**values)


def diagnosis(
    *suspects: SuspectHost, path: RemediationPath = RemediationPath.ISOLATE_HOST, **context: Any
) -> Diagnosis:
    return Diagnosis(
        context=ctx(**context),
        restart_loop=True,
        restart_increase=2,
        restart_total=8,
        root_cause=RootCause.FAULTY_HOST,
        remediation=Remediation(path, Risk.HIGH, True, ()),
        suspect_hosts=suspects,
        steps=(),
        evidence=(),
        ticket_draft=None,
        missing_evidence=(),
        summary="host failed twice",
    )


def audit(**fields: Any) -> Signal:
    return Signal(SignalKind.HOST_ERROR, T0, **fields)


def chosen(*args: Any, **kwargs: Any) -> Target:
    choice = choose_target(*args, **kwargs)
    assert choice.reason is None and choice.target is not None, choice
    return choice.target


def test_every_field_of_the_target_from_the_node_the_diagnosis_read() -> None:
    reads: list[tuple[str, str, str]] = []

    def compute(project: str, zone: str, instance: str) -> ComputeFacts:
        reads.append((project, zone, instance))
        return BOUND

    found = chosen(
        diagnosis(suspect(fault_reason="UNRECOVERABLE_GPU_ERROR", host_known=False)),
        (),
        (NodeInfo("other-node"), A3),
        cluster="train-prod",
        compute=compute,
    )
    assert reads == [("proj", "us-east5-a", NODE + "-vm")]
    assert replace(found, repair_why=None) == Target(
        node=NODE,
        instance=NODE + "-vm",
        instance_id="5464165239889847435",
        zone="us-east5-a",
        project="proj",
        physical_host=HOST,
        host_known=False,
        node_pool="a3-pool",
        cluster="train-prod",
        repair_path=RepairPath.GKE,
        fault_reason=FaultReason.UNRECOVERABLE_GPU_ERROR,
        fallback_path=None,
    )
    assert found.repair_why is not None and "RESERVATION_BOUND" in found.repair_why


def test_the_node_that_failed_last_is_the_target_and_a_tie_takes_the_later_name() -> None:
    older, newer = "gke-a3-pool-aaaa", "gke-a3-pool-zzzz"
    infos = tuple(replace(A3, name=n, instance=n) for n in (older, newer, NODE))
    last = suspect(nodes=(NODE, older), episodes=(episode(NODE, 0), episode(older, 20)))
    assert chosen(diagnosis(last), (), infos).node == older
    tie = suspect(episodes=(episode(newer, 20), episode(older, 20), episode(NODE, 5)))
    assert chosen(diagnosis(tie), (), infos).node == newer


def test_without_episodes_the_last_named_node_is_the_target() -> None:
    infos = (
        replace(A3, name="first", instance="first"),
        replace(A3, name="second", instance="second"),
    )
    listed = suspect(nodes=("first", "second"), episodes=())
    assert chosen(diagnosis(listed), (), infos).node == "second"


def test_only_the_first_suspect_host_is_considered() -> None:
    second = suspect(host="other-host", nodes=("n2",), episodes=(episode("n2", 30),))
    assert chosen(diagnosis(suspect(), second), (), (A3,)).physical_host == HOST


def test_without_the_node_object_the_audit_entries_about_its_vm_fill_in() -> None:
    signals = (
        audit(instance=NODE, instance_id="11", zone="us-east5-c", project="p-old"),
        audit(node=NODE, instance_id="22", zone="us-east5-d", project="p-new"),
        audit(instance="someone-else", instance_id="99", zone="x", project="y"),
        audit(instance=NODE),  # says nothing: the latest entry that says it wins
    )
    found = chosen(diagnosis(suspect(zone=None, node_pool=None)), signals, (), cluster=None)
    assert (found.instance, found.instance_id, found.zone, found.project) == (
        NODE,
        "22",
        "us-east5-d",
        "p-new",
    )
    assert (found.node_pool, found.cluster) == (None, "tpu-cluster-prod")


def test_the_node_object_wins_over_the_suspect_and_the_audit_entries() -> None:
    signals = (audit(instance=NODE + "-vm", instance_id="22", zone="z", project="p"),)
    found = chosen(diagnosis(suspect()), signals, (A3,))
    assert (found.instance_id, found.zone, found.project) == (
        "5464165239889847435",
        "us-east5-a",
        "proj",
    )


def test_the_suspects_zone_comes_before_the_audit_entries() -> None:
    signals = (audit(instance=NODE, instance_id="22", zone="us-east5-d", project="p"),)
    assert chosen(diagnosis(suspect()), signals, ()).zone == "us-east5-b"


def test_the_project_falls_back_to_the_diagnosis_context() -> None:
    signals = (audit(instance=NODE, instance_id="22"),)
    found = chosen(diagnosis(suspect(), project="ctx-project", cluster=""), signals, ())
    assert (found.project, found.cluster) == ("ctx-project", None)


@pytest.mark.parametrize(
    ("infos", "signals", "project", "said"),
    [
        ((), (), "proj", f"the numeric instance id of VM {NODE} could not be resolved"),
        (
            (replace(A3, instance_id="gke-abc"),),
            (),
            "proj",
            f"the numeric instance id of VM {NODE}-vm could not be resolved",
        ),
        (
            (replace(A3, instance_id="1" * 21),),
            (),
            "proj",
            f"the numeric instance id of VM {NODE}-vm could not be resolved",
        ),
        (
            (replace(A3, zone=None, project=None),),
            (),
            "",
            f"the zone and project of VM {NODE}-vm could not be resolved",
        ),
        (
            (replace(A3, zone=None, project=None, instance_id=None),),
            (),
            "",
            f"the zone and project and numeric instance id of VM {NODE}-vm could not be resolved",
        ),
        (
            (replace(A3, project=None),),
            (),
            "",
            f"the project of VM {NODE}-vm could not be resolved",
        ),
    ],
)
def test_a_vm_that_cannot_be_told_from_its_replacement_gets_no_target(
    infos: tuple[NodeInfo, ...], signals: tuple[Signal, ...], project: str, said: str
) -> None:
    zoneless = suspect(zone=None) if infos and infos[0].zone is None else suspect()
    choice = choose_target(diagnosis(zoneless, project=project), signals, infos)
    assert choice == TargetChoice(None, said)


def test_a_twenty_digit_instance_id_is_numeric() -> None:
    assert (
        chosen(diagnosis(suspect()), (), (replace(A3, instance_id="9" * 20),)).instance_id
        == "9" * 20
    )


def test_no_target_for_other_verdicts_or_without_a_host_or_node() -> None:
    watch = diagnosis(suspect(), path=RemediationPath.WATCH_HOST)
    assert choose_target(watch, (), (A3,)) == TargetChoice(None, None)
    assert choose_target(diagnosis(), (), (A3,)) == TargetChoice(
        None, "the diagnosis names no suspect host"
    )
    empty = suspect(nodes=(), episodes=())
    assert choose_target(diagnosis(empty), (), (A3,)) == TargetChoice(
        None, f"no node is known on host {HOST}"
    )


def test_compute_is_not_read_for_a_fixed_delete_or_without_a_reader() -> None:
    def never(project: str, zone: str, instance: str) -> ComputeFacts:
        raise AssertionError("Compute must not be read")

    found = chosen(diagnosis(suspect()), (), (A3,), repair=RepairPolicy.DELETE, compute=never)
    assert (found.repair_path, found.repair_why) == (
        RepairPath.DELETE,
        "LOOPBREAKER_REPAIR_PATH=delete",
    )
    offline = chosen(diagnosis(suspect()), (), (A3,))
    assert (offline.repair_path, offline.fallback_path) == (RepairPath.GKE, RepairPath.DELETE)
    assert offline.repair_why is not None
    assert offline.repair_why.endswith(
        "(Compute Engine was not read when asking: live sources are off)"
    )


def test_computes_reason_for_not_answering_is_on_the_card() -> None:
    found = chosen(diagnosis(suspect()), (), (A3,), compute=lambda p, z, i: "HTTP 403: denied")
    assert found.repair_why is not None
    assert found.repair_why.endswith("(Compute Engine was not read when asking: HTTP 403: denied)")


def test_the_nodes_labels_reach_the_path_choice() -> None:
    spot = chosen(diagnosis(suspect()), (), (replace(A3, spot=True),))
    flex = chosen(diagnosis(suspect()), (), (replace(A3, flex_start=True),))
    named = chosen(diagnosis(suspect()), (), (replace(A3, reservation="res-1", machine_type=None),))
    assert spot.repair_path is RepairPath.DELETE and "Spot" in (spot.repair_why or "")
    assert flex.repair_path is RepairPath.DELETE and "flex-start" in (flex.repair_why or "")
    assert named.repair_path is RepairPath.DELETE
    assert "machine type is unknown" in (named.repair_why or "")


def test_a_fixed_path_the_node_cannot_take_gives_the_refusal_as_the_reason() -> None:
    small = replace(A3, machine_type="a2-highgpu-1g")
    choice = choose_target(diagnosis(suspect()), (), (small,), repair=RepairPolicy.GKE)
    assert choice.target is None and choice.reason is not None
    assert choice.reason.startswith(
        f"LOOPBREAKER_REPAIR_PATH=gke, but GKE's report-and-replace cannot take node {NODE}: "
    )


@pytest.mark.parametrize(
    ("found", "reason"), [(None, "BEHAVIOR_UNSPECIFIED"), ("NEW", "BEHAVIOR_UNSPECIFIED")]
)
def test_an_unknown_fault_reason_is_unspecified(found: str | None, reason: str) -> None:
    target = chosen(diagnosis(suspect(fault_reason=found)), (), (A3,))
    assert target.fault_reason is FaultReason(reason)


def test_without_the_node_object_nothing_is_assumed_of_spot_or_flex_start() -> None:
    signals = (audit(instance=NODE, instance_id="22", zone="z", project="p"),)
    found = chosen(diagnosis(suspect()), signals, ())
    assert (found.repair_path, found.repair_why) == (
        RepairPath.DELETE,
        f"GKE's report-and-replace does not apply: node {NODE}'s machine type is unknown "
        f"(node.kubernetes.io/instance-type); node {NODE}'s GKE version is unknown",
    )


def test_without_episodes_the_last_of_three_named_nodes_is_the_target() -> None:
    infos = tuple(replace(A3, name=n, instance=n) for n in ("first", "second", "third"))
    listed = suspect(nodes=("first", "second", "third"), episodes=())
    assert chosen(diagnosis(listed), (), infos).node == "third"
