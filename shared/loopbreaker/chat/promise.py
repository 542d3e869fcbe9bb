"""What an approval promises, in the words a human checks: the card's repair-path lines and
the Approve button's label and confirmation (pure).

Each says exactly what the approved path does, or the rule between two paths when Compute's
answer was not known when asking (:mod:`loopbreaker.approval.repair`); the executor then
does that and nothing else.
"""

from __future__ import annotations

from loopbreaker.approval.repair import FAULT_BEHAVIOR_LABEL, GKE_FAULT_BEHAVIOR, RepairPath
from loopbreaker.approval.requests import Target


def repair_actions(target: Target) -> tuple[str, ...]:
    """What the approval buttons approve, path by path, and why that path."""
    path = target.repair_path
    why = f" Why: {target.repair_why}." if target.repair_why else ""
    vm = f"VM {target.instance} (id {target.instance_id}) in {target.zone}"
    drain = (
        f"After human approval: cordon node {target.node}, then drain it through the Eviction "
        "API, respecting PodDisruptionBudgets."
    )
    if path is RepairPath.GKE:
        value = GKE_FAULT_BEHAVIOR[target.fault_reason]
        hand_over = (
            f"label node {target.node} {FAULT_BEHAVIOR_LABEL}={value} "
            f"({target.fault_reason.value}); GKE evicts its pods under their "
            "PodDisruptionBudgets, reports the host and brings the node back on a healthy host. "
            "loopbreaker evicts and deletes nothing; an error or no progress leaves the node "
            "cordoned."
        )
        if target.fallback_path is RepairPath.DELETE:
            # The card states the rule the re-check applies, in words a human can check.
            return (
                "Repair path gke if Compute Engine confirms the VM is reservation-bound, "
                f"otherwise delete.{why}",
                f"After human approval, Compute Engine is read again. If {vm} is "
                f"reservation-bound (provisioning model RESERVATION_BOUND): {hand_over}",
                f"Otherwise: cordon node {target.node}, drain it through the Eviction API "
                f"(respecting PodDisruptionBudgets), then delete {vm} so its managed instance "
                "group recreates it on healthy hardware.",
            )
        return (
            f"Repair path gke (GKE's report-and-replace).{why}",
            f"After human approval: {hand_over}",
        )
    if path is RepairPath.REPORT:
        return (
            f"Repair path report (reportHostAsFaulty).{why}",
            drain,
            f"Report the host of {vm} as faulty ({target.fault_reason.value}).",
        )
    if path is RepairPath.DELETE:
        return (
            f"Repair path delete.{why}",
            drain,
            f"Delete {vm} so its managed instance group recreates it on healthy hardware.",
        )
    return (
        drain,
        f"Isolate {vm}: delete it so its managed instance group recreates it on healthy "
        "hardware, or report its host as faulty, as LOOPBREAKER_REPAIR_PATH says.",
    )


def button_words(target: Target) -> tuple[str, str]:
    """(the Approve button's label, its confirmation) for the path or rule approved."""
    vm = f"VM {target.instance} (id {target.instance_id}) on host {target.physical_host}"
    drain = f"Cordon and drain {target.node}, then"
    path = target.repair_path
    if path is RepairPath.GKE and target.fallback_path is RepairPath.DELETE:
        return (
            "Approve: GKE repair, else delete VM",
            f"Hand {target.node} to GKE's report-and-replace if Compute confirms {vm} is "
            f"reservation-bound; otherwise cordon and drain it, then delete the VM.",
        )
    if path is RepairPath.GKE:
        return (
            "Approve: hand node to GKE repair",
            f"Label {target.node} for GKE's report-and-replace, which repairs {vm}.",
        )
    if path is RepairPath.REPORT:
        return "Approve: cordon, drain, report host", f"{drain} report the host of {vm} as faulty."
    return "Approve: cordon, drain, delete VM", f"{drain} delete {vm}."
