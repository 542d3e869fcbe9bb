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

from loopbreaker.model.evidence import MACHINE_TYPE_LABEL


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
    """``disruptionSchedule`` of ``reportHostAsFaulty``.

    Compute's v1 discovery document (``InstancesReportHostAsFaultyRequest``, as shipped in
    google-api-python-client 2.x) lists DISRUPTION_SCHEDULE_UNSPECIFIED, FUTURE and
    IMMEDIATE, and narrows them in its description: "Required field, only allows
    IMMEDIATE". So IMMEDIATE is the only value sent; the setting refuses any other.
    """

    IMMEDIATE = "IMMEDIATE"


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
#: Compute's ``scheduling.provisioningModel`` of a reservation-bound VM. Both report-and-replace
#: and ``reportHostAsFaulty`` take only these ("Report faulty host", Limitations: "The VM uses
#: the reservation-bound provisioning model"; "Troubleshoot the faulty host API":
#: ``INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED`` for a VM "created without using a
#: reservation", and flex-start or Spot VMs need the account team). A STANDARD VM that
#: consumes a SPECIFIC_RESERVATION is still on the standard model: not reservation-bound.
RESERVATION_BOUND = "RESERVATION_BOUND"
#: Compute's ``reservationAffinity.consumeReservationType`` of a VM bound to one reservation
#: (shown to humans beside the provisioning model; it does not make a VM reservation-bound).
SPECIFIC_RESERVATION = "SPECIFIC_RESERVATION"
#: Compute's default ``scheduling.provisioningModel`` when the answer names none.
STANDARD = "STANDARD"

_GKE_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")


def gke_version(text: str | None) -> tuple[int, int, int, int] | None:
    """``v1.32.3-gke.1057001`` (a kubelet version) as numbers; None for any other form."""
    match = _GKE_VERSION.match((text or "").strip())
    if match is None:
        return None
    major, minor, patch, build = (int(g) for g in match.groups())
    return major, minor, patch, build


@dataclass(frozen=True)
class ComputeFacts:
    """What Compute Engine's ``instances.get`` says of a VM, as far as the path depends on it."""

    #: ``scheduling.provisioningModel``; None when the answer has none (Compute's default,
    #: STANDARD).
    provisioning_model: str | None = None
    #: ``reservationAffinity.consumeReservationType``.
    reservation_type: str | None = None
    #: The last part of ``machineType``.
    machine_type: str | None = None
    #: ``status``: RUNNING, STOPPING, TERMINATED, REPAIRING...
    status: str | None = None

    @property
    def model(self) -> str:
        return self.provisioning_model or STANDARD


@dataclass(frozen=True)
class HostFacts:
    """What decides which repair path can take a node (None: not known)."""

    node: str
    machine_type: str | None = None
    #: The kubelet's version (``status.nodeInfo.kubeletVersion``), e.g. v1.32.3-gke.1057001.
    version: str | None = None
    #: The reservation the node's label names (a hint for humans; Compute decides).
    reservation: str | None = None
    #: GKE's Spot / preemptible label: such a VM is never reservation-bound.
    spot: bool = False
    #: GKE's flex-start label: such a VM is on the FLEX_START model, never reservation-bound.
    flex_start: bool = False
    #: Compute's answer; None when Compute was not read.
    compute: ComputeFacts | None = None
    #: Why Compute was not read (offline, unreadable), when it was not.
    compute_gap: str | None = None

    @property
    def reservation_bound(self) -> bool | None:
        """Compute's word first; GKE's Spot and flex-start labels next; None when unknown."""
        if self.compute is not None:
            return self.compute.model == RESERVATION_BOUND
        if self.spot or self.flex_start:
            return False
        return None

    def model_words(self) -> str:
        """The provisioning model as a human checks it: Compute's words, or the label's."""
        if self.compute is not None:
            affinity = self.compute.reservation_type
            return f"provisioning model {self.compute.model}" + (
                f", reservation affinity {affinity}" if affinity else ""
            )
        if self.flex_start:
            return "flex-start (GKE's cloud.google.com/gke-flex-start label)"
        if self.spot:
            return "Spot (GKE's Spot label)"
        return "provisioning model unknown"


@dataclass(frozen=True)
class Requirements:
    """Why a host-repair path (gke, report) cannot take a node, and what is not known yet."""

    blockers: tuple[str, ...] = ()
    #: The reservation is unknown: only Compute's answer at the re-check settles it.
    pending: bool = False


def requirements(path: RepairPath, facts: HostFacts) -> Requirements:
    """What ``path`` needs of the node and its VM, checked against ``facts``.

    ``delete`` needs nothing more (a managed instance group recreates any VM). ``gke`` and
    ``report`` need a supported machine type, a reservation-bound VM and, if Compute says
    so, a RUNNING one ("Your GKE node must be in a RUNNING state"; "INSTANCE_SHOULD_BE_
    RUNNING"); ``gke`` also needs GKE 1.32.3-gke.1057001 or later.
    """
    if path is RepairPath.DELETE:
        return Requirements()
    blockers = []
    machine = facts.machine_type or (facts.compute.machine_type if facts.compute else None)
    if machine is None:
        blockers.append(f"node {facts.node}'s machine type is unknown ({MACHINE_TYPE_LABEL})")
    elif machine not in GKE_REPAIR_MACHINE_TYPES:
        blockers.append(
            f"machine type {machine} is not one {_NAMES[path]} supports "
            "(A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High with 8 GPUs)"
        )
    if path is RepairPath.GKE:
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
        blockers.append(
            f"the VM is not reservation-bound ({facts.model_words()}); {_NAMES[path]} takes "
            "only RESERVATION_BOUND VMs (INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED)"
        )
    status = facts.compute.status if facts.compute else None
    if status and status != "RUNNING":
        blockers.append(f"Compute Engine says the VM is {status}, not RUNNING")
    return Requirements(tuple(blockers), pending=bound is None)


_NAMES = {
    RepairPath.GKE: "GKE's report-and-replace",
    RepairPath.REPORT: "reportHostAsFaulty",
    RepairPath.DELETE: "delete",
}
_MIN = gke_version(GKE_REPAIR_MIN_VERSION) or (0, 0, 0, 0)


@dataclass(frozen=True)
class PathChoice:
    path: RepairPath
    #: One sentence: why this path, for the card, the plan, the audit and the Events.
    why: str
    #: Set when no path may be approved (a fixed policy on a node that cannot take it).
    refusal: str | None = None
    #: The branch taken when Compute, read at the re-check, does not confirm ``path``; None
    #: when ``path`` is settled, or when the policy allows no other path.
    fallback: RepairPath | None = None


def choose_path(policy: RepairPolicy, facts: HostFacts) -> PathChoice:
    """The path (or the rule between two) for this node under ``policy``, with its reason.

    What Compute said when the approval was asked for settles the path. Where it is still
    unknown, ``auto`` approves a rule: GKE's report-and-replace if Compute confirms the VM
    is reservation-bound at the re-check, otherwise delete; a fixed ``gke`` or ``report``
    approves that path alone and says the re-check refuses it on a VM it cannot take.
    """
    if policy is RepairPolicy.DELETE:
        return PathChoice(RepairPath.DELETE, "LOOPBREAKER_REPAIR_PATH=delete")
    wanted = RepairPath.REPORT if policy is RepairPolicy.REPORT else RepairPath.GKE
    found = requirements(wanted, facts)
    fixed = f"LOOPBREAKER_REPAIR_PATH={policy.value}; " if policy is not RepairPolicy.AUTO else ""
    if found.blockers:
        if policy is RepairPolicy.AUTO:
            return PathChoice(
                RepairPath.DELETE,
                f"GKE's report-and-replace does not apply: {'; '.join(found.blockers)}",
            )
        refusal = (
            f"LOOPBREAKER_REPAIR_PATH={policy.value}, but {_NAMES[wanted]} cannot take node "
            f"{facts.node}: {'; '.join(found.blockers)}"
        )
        return PathChoice(wanted, refusal, refusal)
    machine = facts.machine_type or (facts.compute.machine_type if facts.compute else None)
    takes = f"{_NAMES[wanted]} takes {machine} nodes" + (
        f" on GKE {facts.version}" if wanted is RepairPath.GKE else ""
    )
    if not found.pending:
        return PathChoice(wanted, f"{fixed}{takes}; Compute Engine says {facts.model_words()}")
    gap = (
        f" (Compute Engine was not read when asking: {facts.compute_gap})"
        if (facts.compute_gap)
        else ""
    )
    if policy is RepairPolicy.AUTO:
        return PathChoice(
            wanted,
            f"{takes}, if Compute Engine confirms at the re-check that the VM is "
            f"reservation-bound (provisioning model RESERVATION_BOUND); otherwise cordon, "
            f"drain and delete the VM{gap}",
            fallback=RepairPath.DELETE,
        )
    return PathChoice(
        wanted,
        f"{fixed}{takes}, if Compute Engine confirms at the re-check that the VM is "
        f"reservation-bound; otherwise nothing is changed and the approval is refused, as "
        f"LOOPBREAKER_REPAIR_PATH={policy.value} allows no other path{gap}",
    )


@dataclass(frozen=True)
class Branch:
    """The path the re-check settles on, or why the approved path cannot be taken."""

    path: RepairPath
    why: str
    refusal: str | None = None


def settle_branch(approved: RepairPath, fallback: RepairPath | None, facts: HostFacts) -> Branch:
    """The branch the approval's rule selects with Compute's answer at the re-check.

    The approved path when it holds; else its fallback (the card said so); else a
    refusal that names the path. Compute's word is required here: an unknown reservation
    does not hold.
    """
    if approved is RepairPath.DELETE:
        return Branch(RepairPath.DELETE, "the approved path is delete")
    found = requirements(approved, facts)
    blockers = list(found.blockers)
    if found.pending:
        blockers.append("Compute Engine does not say the VM is reservation-bound")
    if not blockers:
        return Branch(approved, f"Compute Engine says {facts.model_words()}")
    if fallback is not None:
        return Branch(
            fallback,
            f"the approved rule selects {fallback.value} ({describe(fallback)}): "
            f"{'; '.join(blockers)}",
        )
    return Branch(
        approved,
        "",
        f"repair path {approved.value} ({_NAMES[approved]}) refused: {'; '.join(blockers)}; "
        "the approval allows no other path",
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
