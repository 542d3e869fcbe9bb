"""The approval card's promise, row by row: what Compute says × machine type × GKE version.

Each row replays the A3 faulty-host scenario (Xid 48 then 63, twice, on one GPU) with its
nodes relabelled to the row's machine type and kubelet version, and with live sources on, so
the approval request reads the target VM from a local Compute Engine. Then a human approves
in Slack, once, and ``on_remediation_request``'s executor runs against the local cluster
(GKE's report-and-replace included) and Compute. The card's words name the path, or the rule
between two; the outcome is a repair by that path, never a refusal because the path chosen
when asking did not apply.

Compute's answers are those of ``instances.get`` for the VMs people run ("Consumption
models", AI Hypercomputer; the Compute API's ``Scheduling.provisioningModel`` and
``ReservationAffinity.consumeReservationType``): on demand (STANDARD, ANY_RESERVATION, the
default of a VM created without a reservation), reservation-bound (RESERVATION_BOUND), a
standard VM that consumes a specific reservation, Spot and flex-start (GKE also labels those
nodes ``cloud.google.com/gke-spot`` / ``cloud.google.com/gke-flex-start``), and Compute
unreadable (HTTP 403) when the approval is asked for.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import remedkit as R
from fakes import FakeClock
from fakeservers.base import Fault
from fakeservers.compute_ops import ComputeOpsServer

from loopbreaker.approval.repair import RepairPath
from loopbreaker.chat import notify
from loopbreaker.incidents import State
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import RemediationPolicy

LIVE = RemediationPolicy(dry_run=False)
AFTER = "v1.32.4-gke.1767000"  # report-and-replace needs 1.32.3-gke.1057001 or later
BEFORE = "v1.31.6-gke.1020000"
#: GKE's report-and-replace (and reportHostAsFaulty) take these; the others never.
QUALIFYING = {"a3-highgpu-8g", "a3-megagpu-8g", "a4-highgpu-8g"}
MACHINES = ["a3-highgpu-8g", "a3-megagpu-8g", "a4-highgpu-8g", "g2-standard-48", "ct5p-hightpu-4t"]


@dataclass(frozen=True)
class Answer:
    name: str
    model: str
    affinity: str
    #: The GKE node label such VMs carry, if any.
    label: str | None = None
    #: Compute refuses the read when the approval is asked for (then answers on demand).
    unreadable: bool = False


ANSWERS = [
    Answer("on-demand", "STANDARD", "ANY_RESERVATION"),
    Answer("reservation-bound", "RESERVATION_BOUND", "SPECIFIC_RESERVATION"),
    Answer("specific-reservation", "STANDARD", "SPECIFIC_RESERVATION"),
    Answer("spot", "SPOT", "NO_RESERVATION", "cloud.google.com/gke-spot"),
    Answer("flex-start", "FLEX_START", "NO_RESERVATION", "cloud.google.com/gke-flex-start"),
    Answer("unreadable", "STANDARD", "ANY_RESERVATION", unreadable=True),
]


def scenario(tmp: Path, machine: str, version: str, label: str | None) -> Path:
    """The A3 scenario with every node relabelled as the row says."""
    into = tmp / "scenario"
    shutil.copytree(R.A3, into)
    document = json.loads((into / "nodes.json").read_text())
    for node in document["items"]:
        node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = machine
        node["status"]["nodeInfo"]["kubeletVersion"] = version
        if label:
            node["metadata"]["labels"][label] = "true"
    (into / "nodes.json").write_text(json.dumps(document))
    return into


def vms(telemetry: Path, answer: Answer, machine: str) -> ComputeOpsServer:
    """Compute Engine as the approval request reads it: every node's VM."""
    nodes = json.loads((telemetry / "nodes.json").read_text())["items"]
    instances = {}
    for node in nodes:
        project, zone, name = node["spec"]["providerID"].removeprefix("gce://").split("/")
        instances[(project, zone, name)] = {
            "id": node["metadata"]["annotations"]["container.googleapis.com/instance_id"],
            "machineType": f"zones/{zone}/machineTypes/{machine}",
            "scheduling": {"provisioningModel": answer.model},
            "reservationAffinity": {"consumeReservationType": answer.affinity},
        }
    return ComputeOpsServer(instances)


def expected(answer: Answer, machine: str, version: str) -> tuple[str, RepairPath]:
    """The card's first line and the path the repair takes."""
    if machine not in QUALIFYING or version == BEFORE:
        return "Repair path delete.", RepairPath.DELETE
    if answer.model == "RESERVATION_BOUND" and not answer.unreadable:
        return "Repair path gke (GKE's report-and-replace).", RepairPath.GKE
    if answer.unreadable:
        # Unknown when asking: the card names the rule; Compute then says on demand.
        rule = "Repair path gke if Compute Engine confirms the VM is reservation-bound, otherwise"
        return rule, RepairPath.DELETE
    return "Repair path delete.", RepairPath.DELETE


STEPS = {
    RepairPath.GKE: ["recheck", "hand_to_gke", "await_gke"],
    RepairPath.DELETE: ["recheck", "cordon", "drain", "delete_vm"],
}


@pytest.mark.parametrize("version", [AFTER, BEFORE])
@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("answer", ANSWERS, ids=lambda a: a.name)
def test_one_approval_ends_in_the_repair_the_card_named(
    answer: Answer, machine: str, version: str, tmp_path: Path
) -> None:
    telemetry = scenario(tmp_path, machine, version, answer.label)
    store_path = tmp_path / "incidents.sqlite"
    with vms(telemetry, answer, machine) as compute:
        if answer.unreadable:
            compute.inject(Fault.FORBIDDEN, times=100)
        incident, request = R.approve_faulty(
            store_path,
            telemetry,
            LOOPBREAKER_LIVE_SOURCES="true",
            LOOPBREAKER_COMPUTE_ENDPOINT=compute.url,
        )
        # The approval request read the target VM from Compute (instances.get only).
        target = incident.approval.target  # type: ignore[union-attr]
        reads = compute.requests_to(f"/instances/{target.instance}")
        assert reads and all(r.method == "GET" for r in reads)
    words, path = expected(answer, machine, version)
    card = "\n".join(notify.render(incident).recommendations)
    assert card.startswith(words), card
    if words.endswith("otherwise"):
        assert "Compute Engine was not read when asking: cannot read VM" in card
    clock = FakeClock(incident.approval.at + timedelta(minutes=1))  # type: ignore[union-attr]
    with R.gke_lab(
        store_path,
        clock,
        tmp_path,
        target,
        provisioning_model=answer.model,
        reservation_affinity=answer.affinity,
        scenario=telemetry,
    ) as lab:
        report = R.handle_until_done(lab.remediator(LIVE, support=False), dict(request))
        done = lab.incident(incident.id)
        assert report.result is Result.REMEDIATED, (report.reason, card)
        assert done.state is State.REMEDIATED
        assert list(R.steps_of(done)) == STEPS[path]
        assert done.remediation is not None and done.remediation.path is path
        # What happened is what the card said: GKE repaired, or the VM was deleted.
        if path is RepairPath.GKE:
            assert lab.compute.deletes == [] and len(lab.compute.fault_reports) == 1
        else:
            assert len(lab.compute.deletes) == 1 and lab.compute.fault_reports == []
        notes = " ".join(a.note for a in done.audit)
        assert f"repair path {path.value}" in notes
