"""The pure safety rules, each guard on its own: the circuit breaker at its threshold and
which pods a drain leaves alone."""

from __future__ import annotations

import pytest

from loopbreaker.remediation.rules import (
    NodeState,
    PodState,
    RemediationPolicy,
    evictable,
    fleet_reasons,
)


def pool(ready: int, unready: int) -> list[NodeState]:
    return [NodeState(f"ok-{n}", ready=True) for n in range(ready)] + [
        NodeState(f"down-{n}", ready=False) for n in range(unready)
    ]


@pytest.mark.parametrize(
    ("ready", "unready", "refused"),
    [
        (2, 2, False),  # exactly the threshold: "more than" is refused, this is not
        (1, 3, True),  # just above it
        (3, 1, False),
    ],
)
def test_the_circuit_breaker_refuses_more_than_the_share_not_the_share_itself(
    ready: int, unready: int, refused: bool
) -> None:
    policy = RemediationPolicy(max_unready_share=0.5)
    suspect = NodeState("suspect", ready=False)  # the node being fixed does not count
    reasons = fleet_reasons([suspect, *pool(ready, unready)], policy, "p", suspect="suspect")
    assert bool(reasons) is refused, reasons


def test_a_pool_at_a_zero_share_refuses_any_other_unready_node() -> None:
    policy = RemediationPolicy(max_unready_share=0.0)
    assert fleet_reasons(pool(3, 0), policy, "p") == []
    assert fleet_reasons(pool(3, 1), policy, "p") != []


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pods_are_not_evicted(phase: str) -> None:
    finished = PodState("ml", "done-0", owner_kinds=("Job",), phase=phase)
    running = PodState("ml", "worker-0", owner_kinds=("Job",), phase="Running")
    evict, skip = evictable([finished, running])
    assert evict == [running] and skip == [finished]


def test_the_backoff_stays_capped_however_many_attempts() -> None:
    from datetime import timedelta

    from loopbreaker.remediation.rules import MAX_EVICTION_BACKOFF, backoff

    assert backoff(1) == timedelta(seconds=5) and backoff(2) == timedelta(seconds=10)
    assert backoff(10_000) == MAX_EVICTION_BACKOFF  # no OverflowError on a long wait
