"""A fault on every rank at once is the workload's, not each host's (pure).

When the same fault shows on all, or nearly all, of a workload's nodes within seconds,
one thing failed: the job (a kernel that faults on every GPU, a collective every rank
gives up on), not four machines at the same instant. Hosts are suspects only for the
failures such a group does not explain.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from loopbreaker.diagnosis.steps.pods import PodOwner
from loopbreaker.model import Context, Evidence, Signal

#: Failures this close together on different nodes are one failure.
DEFAULT_WINDOW = timedelta(seconds=10)
#: The share of the workload's nodes a group must cover ("all, or nearly all").
DEFAULT_SHARE = 0.75


@dataclass(frozen=True)
class Sighting:
    """One node showing one fault (``what``: a kind, an Xid) at one moment."""

    node: str
    at: datetime
    what: str


@dataclass(frozen=True)
class Group:
    """The same fault on ``nodes`` of the workload's ``of`` nodes between two moments."""

    what: str
    nodes: tuple[str, ...]
    of: int
    first: datetime
    last: datetime

    @property
    def spread(self) -> str:
        seconds = (self.last - self.first).total_seconds()
        return "the same second" if seconds < 1 else f"{math.ceil(seconds):.0f} s"

    def describe(self) -> str:
        where = (
            f"all {self.of} nodes"
            if len(self.nodes) == self.of
            else f"{len(self.nodes)} of {self.of} nodes"
        )
        return f"{self.what} on {where} of the workload within {self.spread}"


def workload_nodes(ctx: Context, ev: Evidence, signals: Iterable[Signal]) -> frozenset[str]:
    """The nodes the workload's pods ran on, as pod status, kube_pod_info and the pods'
    own log lines show them. Empty when nothing says: then no group is formed."""
    if not ctx.workload:
        return frozenset()
    owns = PodOwner(ctx, ev)
    nodes = {p.node for p in ev.pods or () if p.node and owns(p.name)}
    for s in ev.pod_info or ():
        pod, node = s.labels.get("pod"), s.labels.get("node")
        if node and owns(pod) and any(ctx.in_window(x.at) for x in s.samples):
            nodes.add(node)
    for sig in signals:
        if sig.node and sig.pod and (sig.workload == ctx.workload or owns(sig.pod)):
            nodes.add(sig.node)
    return frozenset(nodes)


def groups(
    sightings: Sequence[Sighting],
    nodes: frozenset[str],
    window: timedelta = DEFAULT_WINDOW,
    share: float = DEFAULT_SHARE,
) -> list[Group]:
    """Groups of the same fault on at least ``share`` of ``nodes`` (and at least two)
    within ``window`` of the group's first sighting."""
    if len(nodes) < 2:
        return []
    needed = max(2, math.ceil(share * len(nodes)))
    found: list[Group] = []
    by_what: dict[str, list[Sighting]] = {}
    for s in sightings:
        if s.node in nodes:
            by_what.setdefault(s.what, []).append(s)
    for what, seen in sorted(by_what.items()):
        seen.sort(key=lambda s: s.at)
        i = 0
        while i < len(seen):
            run = [s for s in seen[i:] if s.at - seen[i].at <= window]
            members = sorted({s.node for s in run})
            if len(members) >= needed:
                found.append(Group(what, tuple(members), len(nodes), run[0].at, run[-1].at))
                i += len(run)
            else:
                i += 1
    return found


def covered(group_list: Iterable[Group], node: str, at: datetime, slack: timedelta) -> bool:
    """Whether a failure of ``node`` at ``at`` is one of the groups' (within ``slack``)."""
    return any(node in g.nodes and g.first - slack <= at <= g.last + slack for g in group_list)
