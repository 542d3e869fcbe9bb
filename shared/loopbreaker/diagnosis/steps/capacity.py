"""Step 4's capacity shortages: what Compute Engine or the cluster autoscaler could not
create, where, and why (pure).

A capacity signal whose reason is one of the catalog's causes (a stockout, a quota, the
IP space, no fitting node pool) names a shortage; shortages of the same cause, machine
type and zone are one. A stockout of the pool's machine type is the strongest capacity
evidence there is, and it says what to do: another zone, a reservation or flex-start.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from loopbreaker.model import Evidence, Signal, SignalKind
from loopbreaker.signals.catalog import CAUSES

STOCKOUT = CAUSES[0]
QUOTA = CAUSES[1]
IP_SPACE = CAUSES[2]


@dataclass(frozen=True)
class Shortage:
    cause: str
    zone: str | None
    machine_type: str | None
    accelerator: str | None
    node_pool: str | None
    #: How many entries report it, and the first one's excerpt.
    count: int
    excerpt: str

    @property
    def what(self) -> str:
        """``a3-highgpu-8g with 8 nvidia-h100-80gb``, or the pool when nothing names it."""
        machine = self.machine_type or (f"node pool {self.node_pool}" if self.node_pool else "")
        if self.accelerator:
            return f"{machine} with {self.accelerator}" if machine else self.accelerator
        return machine or "the requested VMs"

    @property
    def where(self) -> str:
        return f"in {self.zone}" if self.zone else "in its zone"

    def finding(self) -> str:
        if self.cause == STOCKOUT:
            head = f"Compute Engine is out of {self.what} {self.where} (stockout)"
        else:
            head = f"New nodes ({self.what}) cannot be created {self.where}: {self.cause}"
        return f"{head}; {self.count} report(s), e.g. {self.excerpt!r}."

    def tail(self) -> str:
        """The summary's end: what is missing, where."""
        if self.cause == STOCKOUT:
            return (
                f"pods cannot be scheduled: Compute Engine has no {self.what} capacity "
                f"{self.where} (stockout)."
            )
        return f"pods cannot be scheduled: {self.cause} for {self.what} {self.where}."

    def actions(self) -> tuple[str, ...]:
        if self.cause == STOCKOUT:
            return (
                f"Compute Engine is out of {self.what} {self.where}; more quota does not help.",
                f"Run the node pool in another zone with capacity for {self.what} (add node "
                "locations, or let the autoscaler choose with location policy ANY).",
                f"Consume a reservation of {self.what} {self.where} (or reserve for the "
                "training period) so capacity is held for the job.",
                "Use flex-start (Dynamic Workload Scheduler): GKE provisions the nodes when "
                "capacity is available instead of the job restarting on Pending pods.",
            )
        if self.cause == QUOTA:
            return (
                f"Request a Compute Engine quota increase for {self.what} in the region "
                f"of {self.zone or 'the pool'} (the excerpt names the quota).",
                "Until it is granted, size the job or the node pool within the quota.",
            )
        if self.cause == IP_SPACE:
            return (
                "Add a Pod IP range to the cluster (additional Pod ranges) or a larger "
                "subnet: new nodes cannot get their addresses.",
                "Lower max Pods per node on new node pools to use fewer addresses per node.",
            )
        return (
            f"No node pool's nodes fit the pods ({self.excerpt}): review their requests, "
            "selectors and tolerations against the pools' machine types.",
            "Add a node pool whose machine type fits, or enable node auto-provisioning.",
        )


def shortages(signals: Iterable[Signal], ev: Evidence) -> tuple[Shortage, ...]:
    """The shortages the capacity signals name, strongest cause first, then most reported."""
    groups: dict[tuple[str, str | None, str | None], list[Signal]] = {}
    for sig in signals:
        if sig.kind is not SignalKind.UNSCHEDULABLE or sig.reason not in CAUSES:
            continue
        machine = sig.machine_type or _machine_of(sig, ev)
        groups.setdefault((sig.reason, machine, sig.zone), []).append(sig)
    found = [
        Shortage(
            cause=cause,
            zone=zone,
            machine_type=machine,
            accelerator=next((s.accelerator for s in sigs if s.accelerator), None),
            node_pool=next((s.node_pool for s in sigs if s.node_pool), None),
            count=len(sigs),
            excerpt=sigs[0].excerpt,
        )
        for (cause, machine, zone), sigs in groups.items()
    ]
    return tuple(sorted(found, key=lambda s: (CAUSES.index(s.cause), -s.count)))


def is_shortage(sig: Signal) -> bool:
    return sig.kind is SignalKind.UNSCHEDULABLE and sig.reason in CAUSES


def _machine_of(sig: Signal, ev: Evidence) -> str | None:
    """The machine type of the pool the entry names, as its running nodes say: the
    autoscaler names the instance group, a bare stockout code only the VM."""
    group = _group_of(sig.instance) if sig.instance else None
    for node in ev.nodes or ():
        if not node.machine_type:
            continue
        if sig.node_pool and node.node_pool == sig.node_pool:
            return node.machine_type
        if group and node.name.startswith(group + "-"):
            return node.machine_type
    return None


def _group_of(instance: str) -> str | None:
    """``gke-c-pool-1a2b3c4d-x7k2`` -> ``gke-c-pool-1a2b3c4d`` (the VM's instance group)."""
    head, _, suffix = instance.rpartition("-")
    return head if head and len(suffix) == 4 else None
