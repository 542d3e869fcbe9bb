"""Which repair path takes a bad host out of service, and why (pure, stdlib only).

Three paths, one chosen per target when the approval is asked for, and named on the card:

* ``gke``: GKE's report-and-replace. "Report faulty hosts through GKE", in "Manage
  AI-optimized GKE clusters" (docs.cloud.google.com/ai-hypercomputer/docs/manage/
  manage-gke-clusters, updated 2026-04-06): label the node
  ``cloud.google.com/fault-behavior=REASON`` and GKE evicts its pods (respecting
  PodDisruptionBudgets), stops new ones, reports the host through Compute and brings the
  node back on a healthy host. loopbreaker evicts and deletes nothing on this path; Google's
  GKE troubleshooting guidance says not to delete GKE-managed VMs directly.
* ``report``: cordon, drain, then Compute's ``instances.reportHostAsFaulty`` with a fault
  reason and a disruption schedule ("Report faulty hosts",
  docs.cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host).
* ``delete``: cordon, drain, ``instances.delete``; the managed instance group recreates the
  VM. For nodes that qualify for neither, or where the operator chose it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from loopbreaker.model_evidence import MACHINE_TYPE_LABEL


class RepairPath(StrEnum):
    GKE = "gke"
    REPORT = "report"
    DELETE = "delete"


class RepairPolicy(StrEnum):
    """``LOOPBREAKER_REPAIR_PATH``: ``auto`` (gke where the node qualifies, else delete) or
    one fixed path."""

    AUTO = "auto"
    GKE = "gke"
    REPORT = "report"
    DELETE = "delete"


class FaultReason(StrEnum):
    """``faultReasons[].behavior`` of ``instances.reportHostAsFaulty`` (google-cloud-compute
    1.57.0 ``InstancesReportHostAsFaultyRequestFaultReason.Behavior``)."""

    BEHAVIOR_UNSPECIFIED = "BEHAVIOR_UNSPECIFIED"
    PERFORMANCE = "PERFORMANCE"
    SILENT_DATA_CORRUPTION = "SILENT_DATA_CORRUPTION"
    UNRECOVERABLE_GPU_ERROR = "UNRECOVERABLE_GPU_ERROR"


#: "Report faulty hosts through GKE", in "Manage AI-optimized GKE clusters"
#: (docs.cloud.google.com/ai-hypercomputer/docs/manage/manage-gke-clusters, updated
#: 2026-04-06): labelling a node ``cloud.google.com/fault-behavior=REASON`` hands it to GKE,
#: which taints it, evicts its pods, reports the host and "removes the taint and the
#: fault-behavior label from the node" when it is done (or on an error).
FAULT_BEHAVIOR_LABEL = "cloud.google.com/fault-behavior"
#: Same page, "Monitor the operation progress": PodsEvicted, OperationRUNNING, OperationDone,
#: Error (also written ERROR there).
REPORT_AND_REPLACE_STATUS_LABEL = "cloud.google.com/report-and-replace-status"
#: Same page: "the cloud.google.com/report-and-replace-operation node label to view the
#: Compute Engine operation ID".
REPORT_AND_REPLACE_OPERATION_LABEL = "cloud.google.com/report-and-replace-operation"
#: The values after which GKE no longer acts on the node: the host was reported (the
#: fault-behavior label stays until the node is back, and is checked on its own), or the
#: call failed (GKE clears its taint and the fault-behavior label). Compared casefolded.
#: The same reasons as GKE's fault-behavior label spells them ("Report faulty hosts through
#: GKE": ``PERFORMANCE``, ``SDC``, ``XID``, and ``unspecified``, the default).
GKE_FAULT_BEHAVIOR: dict[FaultReason, str] = {
    FaultReason.BEHAVIOR_UNSPECIFIED: "unspecified",
    FaultReason.PERFORMANCE: "PERFORMANCE",
    FaultReason.SILENT_DATA_CORRUPTION: "SDC",
    FaultReason.UNRECOVERABLE_GPU_ERROR: "XID",
}


class DisruptionSchedule(StrEnum):
    """``disruptionSchedule`` of ``reportHostAsFaulty`` (gcloud accepts these two)."""

    IMMEDIATE = "IMMEDIATE"
    FUTURE = "FUTURE"


#: "Requirements" of report-and-replace: A4X Max, A4X, A4, A3 Ultra, A3 Mega and A3 High
#: (8 GPUs), as Compute Engine names those machine types (GPU machine types,
#: cloud.google.com/compute/docs/gpus).
GKE_REPAIR_MACHINE_TYPES = frozenset(
    {
        "a4x-maxgpu-4g-metal",
        "a4x-highgpu-4g",
        "a4-highgpu-8g",
        "a3-ultragpu-8g",
        "a3-megagpu-8g",
        "a3-highgpu-8g",
    }
)
#: "You must be running GKE patch version 1.32.3-gke.1057001 or later."
GKE_REPAIR_MIN_VERSION = "1.32.3-gke.1057001"
#: Compute's ``scheduling.provisioningModel`` of a reservation-bound VM.
RESERVATION_BOUND = "RESERVATION_BOUND"
#: Compute's ``reservationAffinity.consumeReservationType`` of a VM bound to one reservation.
SPECIFIC_RESERVATION = "SPECIFIC_RESERVATION"

_GKE_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")


def gke_version(text: str | None) -> tuple[int, int, int, int] | None:
    """``v1.32.3-gke.1057001`` (a kubelet version) as numbers; None for any other form."""
    match = _GKE_VERSION.match((text or "").strip())
    if match is None:
        return None
    major, minor, patch, build = (int(g) for g in match.groups())
    return major, minor, patch, build


@dataclass(frozen=True)
class HostFacts:
    """What decides whether GKE's report-and-replace takes a node (None: not known)."""

    node: str
    machine_type: str | None = None
    #: The kubelet's version (``status.nodeInfo.kubeletVersion``), e.g. v1.32.3-gke.1057001.
    version: str | None = None
    #: The reservation the node's label names.
    reservation: str | None = None
    #: Compute's ``scheduling.provisioningModel`` (read at the re-check).
    provisioning_model: str | None = None
    #: Compute's ``reservationAffinity.consumeReservationType``.
    reservation_type: str | None = None
    spot: bool = False

    @property
    def reservation_bound(self) -> bool | None:
        """Compute's word first; the node's label next; None when nothing says."""
        if self.provisioning_model:
            return (
                self.provisioning_model == RESERVATION_BOUND
                or self.reservation_type == SPECIFIC_RESERVATION
            )
        if self.spot:
            return False
        return True if self.reservation else None


def gke_blockers(facts: HostFacts, *, confirm_reservation: bool) -> list[str]:
    """Why GKE's report-and-replace would not take this node (empty: it qualifies).

    At approval time the reservation may be unknown (only Compute says for sure); the
    re-check, with Compute's answer, confirms it (``confirm_reservation``).
    """
    blockers = []
    if facts.machine_type is None:
        blockers.append(f"node {facts.node}'s machine type is unknown ({MACHINE_TYPE_LABEL})")
    elif facts.machine_type not in GKE_REPAIR_MACHINE_TYPES:
        blockers.append(
            f"machine type {facts.machine_type} is not one report-and-replace supports "
            "(A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High with 8 GPUs)"
        )
    found = gke_version(facts.version)
    if found is None:
        blockers.append(
            f"node {facts.node}'s GKE version is unknown"
            + (f" ({facts.version!r} is not a GKE version)" if facts.version else "")
        )
    elif found < _MIN:
        blockers.append(f"GKE {facts.version} is older than {GKE_REPAIR_MIN_VERSION}")
    bound = facts.reservation_bound
    if bound is False:
        model = facts.provisioning_model or ("Spot" if facts.spot else "?")
        blockers.append(f"the VM is not reservation-bound (provisioning model {model})")
    elif bound is None and confirm_reservation:
        blockers.append("Compute Engine does not say the VM is reservation-bound")
    return blockers


_MIN = gke_version(GKE_REPAIR_MIN_VERSION) or (0, 0, 0, 0)


@dataclass(frozen=True)
class PathChoice:
    path: RepairPath
    #: One sentence: why this path, for the card, the plan, the audit and the Events.
    why: str
    #: Set when no path may be approved (a fixed ``gke`` on a node that cannot take it).
    refusal: str | None = None


def choose_path(policy: RepairPolicy, facts: HostFacts) -> PathChoice:
    """The path for this node under ``policy``, with the reason shown to humans."""
    if policy is RepairPolicy.REPORT:
        return PathChoice(RepairPath.REPORT, "LOOPBREAKER_REPAIR_PATH=report")
    if policy is RepairPolicy.DELETE:
        return PathChoice(RepairPath.DELETE, "LOOPBREAKER_REPAIR_PATH=delete")
    blockers = gke_blockers(facts, confirm_reservation=False)
    if not blockers:
        bound = (
            f"reservation {facts.reservation}"
            if facts.reservation
            else "reservation-bound as Compute Engine will confirm before acting"
        )
        why = (
            f"GKE's report-and-replace takes {facts.machine_type} nodes on GKE "
            f"{facts.version} ({bound})"
        )
        if policy is RepairPolicy.GKE:
            why = f"LOOPBREAKER_REPAIR_PATH=gke; {why}"
        return PathChoice(RepairPath.GKE, why)
    if policy is RepairPolicy.GKE:
        refusal = (
            "LOOPBREAKER_REPAIR_PATH=gke, but GKE's report-and-replace cannot take node "
            f"{facts.node}: {'; '.join(blockers)}"
        )
        return PathChoice(RepairPath.GKE, refusal, refusal)
    return PathChoice(
        RepairPath.DELETE, f"GKE's report-and-replace does not apply: {'; '.join(blockers)}"
    )


def fault_reason(found: str | None) -> FaultReason:
    """The reason the diagnosis supports (a hardware-class GPU fault), else unspecified.

    loopbreaker has no evidence for ``PERFORMANCE`` or ``SILENT_DATA_CORRUPTION`` (slow GPUs,
    corrupt results): they are never chosen from a guess.
    """
    try:
        return FaultReason(found) if found else FaultReason.BEHAVIOR_UNSPECIFIED
    except ValueError:
        return FaultReason.BEHAVIOR_UNSPECIFIED


def describe(path: RepairPath) -> str:
    """The path in a few words, as the card and the plan say it."""
    return _DESCRIBE[path]


_DESCRIBE = {
    RepairPath.GKE: "hand the node to GKE's report-and-replace",
    RepairPath.REPORT: "cordon, drain and report the host with reportHostAsFaulty",
    RepairPath.DELETE: "cordon, drain and delete the VM",
}
