"""The approved target the re-check tests share: one A3 node and its VM, every identity in
place, and the approval for them (pure data, built through the rules' own types)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from loopbreaker.approval.requests import Approval, Decision, Platform, Target
from loopbreaker.model import HostPlace
from loopbreaker.remediation.rules import HOST_LABEL, POOL_LABEL, InstanceState, NodeState

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
TARGET = Target(
    node="gke-a3-pool-1a2b-x7k2",
    instance="gke-a3-pool-1a2b-x7k2",
    instance_id="4471936583212201",
    zone="us-central1-a",
    project="proj",
    physical_host="ce876975be10972b",
    node_pool="a3-pool",
    cluster="train",
)
APPROVAL = Approval(
    Decision.APPROVED, "req-1", "isolate_host", TARGET, "U1", Platform.SLACK, NOW,
    expires_at=NOW + timedelta(hours=1),
)  # fmt: skip


def approved_node(
    target: Target = TARGET, labels: dict[str, str] | None = None, **changes: Any
) -> NodeState:
    """The approved node as the API serves it (NotReady: it is the failing one)."""
    state = NodeState(
        target.node,
        labels={HOST_LABEL: target.physical_host, POOL_LABEL: "a3-pool", **(labels or {})},
        ready=False,
        provider_id=f"gce://{target.project}/{target.zone}/{target.instance}",
        instance_id=target.instance_id,
    )
    return replace(state, **changes)


def approved_vm(target: Target = TARGET, **changes: Any) -> InstanceState:
    """The approved VM as Compute answers it, on the approved host."""
    found = InstanceState(
        target.instance, target.instance_id, place=HostPlace(target.physical_host)
    )
    return replace(found, **changes)
