"""Remediation decisions: safety limits, re-checks before acting, drain planning (pure).

Stdlib only. The executor (:mod:`loopbreaker.remediation.executor`) reads the world through its
ports and asks this module, before every mutation, whether it may go on. Every limit is
a named default here and set through :class:`RemediationPolicy`; the API clients enforce
nothing.

Before acting (:func:`recheck`): the request is exactly the recorded approval (else it
is *forged* and changes nothing); the approval is unexpired; the node exists, maps to
the approved host and instance, is not opted out, and no other system (GKE's
report-and-replace or host maintenance, another remediator) is handling it
(:mod:`loopbreaker.remediation.owners`); the VM's numeric id is the
approved one (GKE recreates VMs under the same name); the node pool is in scope and not
mostly NotReady (a fleet-wide problem is not a bad host); the cluster's VM deletions in
the last hour are under the limit.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from loopbreaker.approval.repair import (
    Branch,
    ComputeFacts,
    DisruptionSchedule,
    HostFacts,
    RepairPath,
    RepairPolicy,
    settle_branch,
)
from loopbreaker.approval.requests import Approval, Decision, Target
from loopbreaker.errors import InvalidInput, LoopbreakerError, UnsafeToAct
from loopbreaker.model import (
    TOPOLOGY_BLOCK_LABEL,
    TOPOLOGY_HOST_LABEL,
    TOPOLOGY_SUBBLOCK_LABEL,
    HostPlace,
)
from loopbreaker.model.evidence import MACHINE_TYPE_LABEL, RESERVATION_LABEL
from loopbreaker.remediation.owners import Marker, Taint, owner_reasons
from loopbreaker.timeutil import format_rfc3339

DEFAULT_MAX_DELETIONS_PER_HOUR = 2
DEFAULT_MAX_UNREADY_SHARE = 0.30
DEFAULT_DRAIN_TIMEOUT = timedelta(minutes=10)
#: "The API calls usually take 10-12 minutes to report the faulty host" ("Report faulty
#: hosts through GKE"); eviction under PodDisruptionBudgets comes first.
DEFAULT_GKE_REPAIR_TIMEOUT = timedelta(minutes=45)
DEFAULT_GKE_REPAIR_STALL = timedelta(minutes=20)
OPT_OUT_LABEL = "loopbreaker.dev/remediation"
OPT_OUT_VALUE = "disabled"
HOST_LABEL = TOPOLOGY_HOST_LABEL
POOL_LABEL = "cloud.google.com/gke-nodepool"
#: Annotations the cordon leaves on the node, so whoever looks at it knows why.
ANNOTATION_PREFIX = "loopbreaker.dev/"
#: A remediation in progress holds its incident this long before a redelivery may resume it.
REMEDIATION_LEASE = timedelta(minutes=15)
#: First wait after a PodDisruptionBudget refused an eviction (429); doubles, capped.
EVICTION_BACKOFF = timedelta(seconds=5)
MAX_EVICTION_BACKOFF = timedelta(seconds=60)


class DrainMode(StrEnum):
    #: Keep retrying evictions until the timeout, then fail with the node cordoned.
    WAIT = "wait"
    #: After the timeout, delete the pods that could not be evicted and go on.
    DELETE_AFTER_TIMEOUT = "delete-after-timeout"


@dataclass(frozen=True)
class RemediationPolicy:
    """The safety limits; every default is a named constant above."""

    dry_run: bool = True
    max_deletions_per_hour: int = DEFAULT_MAX_DELETIONS_PER_HOUR
    max_unready_share: float = DEFAULT_MAX_UNREADY_SHARE
    #: Node pools remediation may touch; None: every pool.
    node_pools: frozenset[str] | None = None
    drain_mode: DrainMode = DrainMode.WAIT
    drain_timeout: timedelta = DEFAULT_DRAIN_TIMEOUT
    #: Which repair path new approvals are for (:mod:`loopbreaker.approval.repair`).
    repair: RepairPolicy = RepairPolicy.AUTO
    #: ``reportHostAsFaulty``'s disruption schedule on the ``report`` path.
    disruption_schedule: DisruptionSchedule = DisruptionSchedule.IMMEDIATE
    #: The ``gke`` path: how long GKE's report-and-replace may take in all, and how long
    #: its status label may stay unchanged, before the remediation is failed.
    gke_repair_timeout: timedelta = DEFAULT_GKE_REPAIR_TIMEOUT
    gke_repair_stall: timedelta = DEFAULT_GKE_REPAIR_STALL
    #: Labels, annotations and taints other remediators leave on a node they are handling.
    foreign_markers: tuple[Marker, ...] = ()


# --- the request ---------------------------------------------------------------------


_INCIDENT_ID = re.compile(r"^inc-[0-9a-f]{16}$")


class ForgedRequest(LoopbreakerError):
    """A remediation request that is not the incident's recorded approval: ignore it."""


@dataclass(frozen=True)
class RemediationRequest:
    incident_id: str
    approval_id: str
    dedup_id: str
    action: str
    target: Target

    @classmethod
    def parse(cls, data: object) -> RemediationRequest:
        if not isinstance(data, Mapping):
            raise InvalidInput("a remediation request must be a JSON object")
        incident_id = data.get("incident_id")
        if not isinstance(incident_id, str) or not _INCIDENT_ID.match(incident_id):
            raise InvalidInput(f"remediation request: {incident_id!r} is not an incident id")
        try:
            return cls(
                incident_id=str(data["incident_id"]),
                approval_id=str(data["approval_id"]),
                dedup_id=str(data["dedup_id"]),
                action=str(data["action"]),
                target=Target.from_dict(data["target"]),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise InvalidInput(f"remediation request lacks {exc}") from exc


def check_request(request: RemediationRequest, approval: Approval | None) -> Approval:
    """The approval this request is for; ForgedRequest when it is not exactly that."""
    if approval is None or approval.decision is not Decision.APPROVED:
        raise ForgedRequest(f"incident {request.incident_id} has no approval")
    if request.approval_id != approval.request_id:
        raise ForgedRequest(
            f"request names approval {request.approval_id}, the incident's is {approval.request_id}"
        )
    if request.target != approval.target:
        raise ForgedRequest(
            f"request names VM {request.target.instance} (id {request.target.instance_id}); "
            f"the approval is for {approval.target.instance} (id {approval.target.instance_id})"
        )
    if request.action != approval.action:
        raise ForgedRequest(f"request action {request.action} was not approved")
    return approval


# --- what the executor read ----------------------------------------------------------


@dataclass(frozen=True)
class NodeState:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool | None = None
    #: ``spec.providerID``: ``gce://PROJECT/ZONE/INSTANCE``.
    provider_id: str | None = None
    instance_id: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    #: ``status.nodeInfo.kubeletVersion``.
    kubelet_version: str | None = None


@dataclass(frozen=True)
class InstanceState:
    name: str
    id: str
    status: str = "RUNNING"
    #: Where Compute Engine says the VM runs (``resourceStatus``), None when it says nothing.
    place: HostPlace | None = None
    #: The last part of ``machineType``, e.g. ``a3-megagpu-8g``.
    machine_type: str | None = None
    #: ``scheduling.provisioningModel`` (``RESERVATION_BOUND``, ``SPOT``...).
    provisioning_model: str | None = None
    #: ``reservationAffinity.consumeReservationType``.
    reservation_type: str | None = None


@dataclass(frozen=True)
class PodState:
    namespace: str
    name: str
    owner_kinds: tuple[str, ...] = ()
    mirror: bool = False
    phase: str | None = None
    #: ``metadata.deletionTimestamp`` is set: evicted or deleted, still shutting down.
    terminating: bool = False


def recheck(
    target: Target,
    approval: Approval,
    *,
    now: datetime,
    node: NodeState | None,
    instance: InstanceState | None,
    pool: Sequence[NodeState],
    deletions_last_hour: int,
    policy: RemediationPolicy,
) -> list[str]:
    """Why remediation must not start (empty: it may). Every reason is shown to humans."""
    reasons: list[str] = []
    if approval.expires_at <= now:
        reasons.append(f"the approval expired at {format_rfc3339(approval.expires_at)}")
    if node is None:
        reasons.append(f"node {target.node} no longer exists")
    else:
        reasons += _node_reasons(target, node, policy)
    if instance is None:
        reasons.append(f"VM {target.instance} in {target.zone} no longer exists")
    elif instance.id != target.instance_id:
        reasons.append(
            f"VM {target.instance} now has id {instance.id}, not the approved "
            f"{target.instance_id}: it was recreated; the approved VM is gone"
        )
    elif target.host_known:
        reasons += _host_reasons(target, node, instance)
    pool_name = (node.labels.get(POOL_LABEL) if node else None) or target.node_pool
    if pool_name is None:
        reasons.append("the node pool is unknown, so the circuit breaker cannot be checked")
    reasons += fleet_reasons(pool, policy, pool_name, suspect=target.node)
    if instance is not None and instance.status == "REPAIRING":
        # Compute is already repairing the host ("Troubleshoot the faulty host API": an
        # instance may stay REPAIRING): another owner, whatever the path.
        reasons.append(f"Compute Engine is already repairing VM {target.instance} (REPAIRING)")
    if node is not None and instance is not None:
        refusal = select_branch(target, node, instance, policy).refusal
        if refusal:
            reasons.append(refusal)
    # Every path takes a host out of service: one hourly budget for all of them.
    if deletions_last_hour >= policy.max_deletions_per_hour:
        reasons.append(
            f"{deletions_last_hour} host repair(s) (VM deletions, host reports, hand-overs to "
            f"GKE) in cluster {target.cluster or '?'} in the last hour (limit "
            f"{policy.max_deletions_per_hour})"
        )
    return reasons


def approved_path(target: Target, policy: RemediationPolicy) -> RepairPath:
    """The path the approval was for; an approval from before paths existed keeps what its
    card said then: delete the VM, or report its host when the policy says report."""
    if target.repair_path is not None:
        return target.repair_path
    return RepairPath.REPORT if policy.repair is RepairPolicy.REPORT else RepairPath.DELETE


def select_branch(
    target: Target, node: NodeState, instance: InstanceState, policy: RemediationPolicy
) -> Branch:
    """The path the approval's rule selects with Compute's answer now (the re-check's).

    The approved path where it holds; its fallback where the card named one; else a
    refusal naming the path (a fixed policy on a VM it cannot take). The policy in force
    when the approval was asked for is the one that counts: it is on the target.
    """
    facts = HostFacts(
        node.name,
        machine_type=node.labels.get(MACHINE_TYPE_LABEL) or instance.machine_type,
        version=node.kubelet_version,
        reservation=node.labels.get(RESERVATION_LABEL),
        compute=ComputeFacts(
            provisioning_model=instance.provisioning_model,
            reservation_type=instance.reservation_type,
            machine_type=instance.machine_type,
            status=instance.status,
        ),
    )
    return settle_branch(approved_path(target, policy), target.fallback_path, facts)


def _host_reasons(target: Target, node: NodeState | None, instance: InstanceState) -> list[str]:
    """Compute Engine's place of the VM against the approved host, part by part.

    The approved host is the host id; the node's topology labels add its block and
    sub-block. Only parts both sides know are compared, and each one that differs is
    named. Compute reporting no place at all is a doubt: refuse.
    """
    if instance.place is None:
        return [
            f"Compute Engine reports no physical host for VM {target.instance}: the suspect "
            f"host {target.physical_host} cannot be confirmed"
        ]
    labels = node.labels if node is not None else {}
    expected = HostPlace(
        target.physical_host,
        labels.get(TOPOLOGY_BLOCK_LABEL) or None,
        labels.get(TOPOLOGY_SUBBLOCK_LABEL) or None,
    )
    differs = expected.differences(instance.place)
    if not differs:
        return []
    return [
        f"Compute Engine puts VM {target.instance} on another place than the approved host "
        f"{target.physical_host}: {'; '.join(differs)}"
    ]


def _node_reasons(target: Target, node: NodeState, policy: RemediationPolicy) -> list[str]:
    reasons = []
    if node.labels.get(OPT_OUT_LABEL) == OPT_OUT_VALUE:
        reasons.append(f"node {node.name} opted out ({OPT_OUT_LABEL}={OPT_OUT_VALUE})")
    reasons += owner_reasons(
        node.name, node.labels, node.annotations, node.taints, policy.foreign_markers
    )
    # Every identity the node carries must still be the approved one; a missing one is a
    # doubt, and doubt means do nothing.
    host = node.labels.get(HOST_LABEL)
    if target.host_known and host != target.physical_host:
        reasons.append(
            f"node {node.name} is on host {host or '(no ' + HOST_LABEL + ' label)'}, not the "
            f"suspect {target.physical_host}"
        )
    expected = f"gce://{target.project}/{target.zone}/{target.instance}"
    if node.provider_id != expected:
        reasons.append(f"node {node.name} is backed by {node.provider_id}, not {expected}")
    if node.instance_id != target.instance_id:
        reasons.append(
            f"node {node.name} is backed by VM id {node.instance_id}, not {target.instance_id}"
        )
    pool = node.labels.get(POOL_LABEL) or target.node_pool
    if policy.node_pools is not None and pool not in policy.node_pools:
        reasons.append(f"node pool {pool} is not in LOOPBREAKER_NODE_POOLS")
    return reasons


def fleet_reasons(
    pool: Sequence[NodeState],
    policy: RemediationPolicy,
    pool_name: str | None,
    *,
    suspect: str | None = None,
) -> list[str]:
    """The circuit breaker: refuse when too much of the pool is NotReady.

    GKE copies node-pool labels onto its nodes, so a pool's opt-out label is checked on
    the node itself (:func:`_node_reasons`).
    """
    reasons = []
    # The suspect node itself is expected to be NotReady: it is the one being fixed.
    others = [n for n in pool if n.name != suspect]
    if others:
        unready = sum(1 for n in others if n.ready is not True)
        share = unready / len(others)
        if share > policy.max_unready_share:
            reasons.append(
                f"{unready} of {len(others)} other nodes of pool {pool_name} are NotReady "
                f"({share:.0%} > {policy.max_unready_share:.0%}): a fleet-wide problem, "
                "not a bad host; escalate"
            )
    return reasons


def evictable(pods: Iterable[PodState]) -> tuple[list[PodState], list[PodState]]:
    """(pods to evict, pods a drain leaves alone: DaemonSet, mirror and finished pods)."""
    evict, skip = [], []
    for pod in pods:
        if pod.mirror or "DaemonSet" in pod.owner_kinds or pod.phase in ("Succeeded", "Failed"):
            skip.append(pod)
        else:
            evict.append(pod)
    return evict, skip


def backoff(attempt: int) -> timedelta:
    """Wait before eviction attempt ``attempt`` + 1 after a 429."""
    # The exponent is capped before it can overflow a timedelta on a long wait.
    grown: timedelta = EVICTION_BACKOFF * 2 ** min(max(0, attempt - 1), 16)
    return min(grown, MAX_EVICTION_BACKOFF)


def cordon_annotations(incident_id: str, approval: Approval, now: datetime) -> dict[str, str]:
    return {
        f"{ANNOTATION_PREFIX}incident": incident_id,
        f"{ANNOTATION_PREFIX}reason": (
            f"physical host {approval.target.physical_host} failed repeatedly"
        ),
        f"{ANNOTATION_PREFIX}approved-by": f"{approval.actor} via {approval.platform.value}",
        f"{ANNOTATION_PREFIX}cordoned-at": format_rfc3339(now),
    }


def hand_over_annotations(incident_id: str, approval: Approval, now: datetime) -> dict[str, str]:
    """What the ``gke`` path leaves on the node beside GKE's label: who handed it over."""
    notes = cordon_annotations(incident_id, approval, now)
    notes.pop(f"{ANNOTATION_PREFIX}cordoned-at")
    notes[f"{ANNOTATION_PREFIX}handed-to-gke-at"] = format_rfc3339(now)
    return notes


def delete_request_id(incident_id: str, approval_id: str) -> str:
    """A UUID derived from incident and approval: a redelivery cannot delete twice."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"loopbreaker:{incident_id}:{approval_id}"))


def refuse(reasons: Sequence[str]) -> UnsafeToAct:
    return UnsafeToAct("; ".join(reasons))
