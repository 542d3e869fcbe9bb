"""The safety limits as the code ships them: each default, and the remediation lease to
the second.

The defaults are what an operator who sets nothing gets (docs/configuration.md lists
them): remediation in dry-run, two host repairs an hour, the circuit breaker above 30 %,
drains waiting ten minutes, GKE's report-and-replace given 45 minutes and failed after 20
unchanged. The lease is how long a delivery that died mid-remediation holds the
incident before a redelivery may resume it: 15 minutes, through the real executor.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import remedkit as R

from loopbreaker.approval.repair import DisruptionSchedule, RepairPolicy
from loopbreaker.errors import TransientError
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.rules import DrainMode, RemediationPolicy
from loopbreaker.settings.load import load_settings


def test_the_policy_defaults() -> None:
    policy = RemediationPolicy()
    assert policy.dry_run is True
    assert policy.max_deletions_per_hour == 2
    assert policy.max_unready_share == 0.30
    assert policy.node_pools is None
    assert policy.drain_mode is DrainMode.WAIT
    assert policy.drain_timeout == timedelta(minutes=10)
    assert policy.repair is RepairPolicy.AUTO
    assert policy.disruption_schedule is DisruptionSchedule.IMMEDIATE
    assert policy.gke_repair_timeout == timedelta(minutes=45)
    assert policy.gke_repair_stall == timedelta(minutes=20)
    assert policy.foreign_markers == ()


def test_an_empty_environment_gets_the_same_defaults() -> None:
    assert load_settings({}).remediation.policy == RemediationPolicy()


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({"LOOPBREAKER_DRY_RUN": "false"}, "dry_run", False),
        ({"LOOPBREAKER_DRAIN_MODE": "wait"}, "drain_mode", DrainMode.WAIT),
        (
            {"LOOPBREAKER_DRAIN_MODE": "delete-after-timeout"},
            "drain_mode",
            DrainMode.DELETE_AFTER_TIMEOUT,
        ),
        ({"LOOPBREAKER_REPAIR_PATH": "gke"}, "repair", RepairPolicy.GKE),
        ({"LOOPBREAKER_REPAIR_PATH": "report"}, "repair", RepairPolicy.REPORT),
        ({"LOOPBREAKER_REPAIR_PATH": "delete"}, "repair", RepairPolicy.DELETE),
        ({"LOOPBREAKER_REPAIR_PATH": "auto"}, "repair", RepairPolicy.AUTO),
    ],
)
def test_the_documented_setting_values_select_each_mode(
    env: dict[str, str], field: str, value: object
) -> None:
    assert getattr(load_settings(env).remediation.policy, field) == value


LIVE = RemediationPolicy(dry_run=False)


def crash_after_the_delete(lab: R.Lab, request_: dict[str, Any]) -> None:
    """One delivery dies right after Compute accepted the delete (the lease stays held)."""
    original = lab.compute.route

    def die(request: Any) -> Any:
        reply = original(request)
        if request.method == "DELETE":
            lab.compute.route = original  # type: ignore[method-assign]
            raise TransientError("the instance died right after the DELETE was accepted")
        return reply

    lab.compute.running_polls = 3
    lab.compute.route = die  # type: ignore[method-assign]
    with pytest.raises(Exception):  # noqa: B017 - the crash, whatever the client makes of it
        lab.remediator(LIVE).handle(request_)
    lab.compute.route = original  # type: ignore[method-assign]


def test_a_dead_delivery_holds_the_incident_for_fifteen_minutes(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    died_at = lab.clock()
    crash_after_the_delete(lab, request_)
    held = lab.incident(request_["incident_id"]).remediation
    assert held is not None and held.lease_until == died_at + timedelta(minutes=15)
    deletes = len(lab.compute.requests)
    lab.clock.set(died_at + timedelta(minutes=15) - timedelta(microseconds=1))
    with pytest.raises(TransientError, match="being remediated by another delivery"):
        lab.remediator(LIVE).handle(request_)
    assert len(lab.compute.requests) == deletes  # the redelivery touched nothing
    lab.clock.set(died_at + timedelta(minutes=15))
    assert R.handle_until_done(lab.remediator(LIVE), request_).result is Result.REMEDIATED


def test_a_resumed_delivery_takes_a_fresh_fifteen_minute_lease(
    lab: R.Lab, request_: dict[str, Any]
) -> None:
    died_at = lab.clock()
    crash_after_the_delete(lab, request_)
    resumed_at = died_at + timedelta(minutes=20)
    lab.clock.set(resumed_at)
    crash_after_the_delete(lab, request_)
    held = lab.incident(request_["incident_id"]).remediation
    assert held is not None and held.lease_until == resumed_at + timedelta(minutes=15)
