"""The chat message says what the loop cost, in one line, on Slack and Google Chat."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import remedkit as R

from loopbreaker.chat import notify
from loopbreaker.chat.render import google_chat_message, slack_message


def test_the_message_of_a_diagnosed_loop_carries_its_cost(tmp_path: Path) -> None:
    incident, _ = R.approve_faulty(tmp_path / "incidents.sqlite", R.A3)
    assert incident.diagnosis is not None
    stored = incident.diagnosis.document["cost"]
    message = notify.render(incident)
    [line] = [value for label, value in message.facts if label == "Cost"]
    hours = f"≈ {stored['accelerator_hours']:.0f} accelerator-hours"
    assert line.startswith(f"2 restart(s) × {stored['accelerators']} nvidia-h100-80gb {hours}")
    assert "since the last checkpoint" in line
    assert line in json.dumps(slack_message(message), ensure_ascii=False)
    assert line in json.dumps(google_chat_message(message), ensure_ascii=False)


def test_a_stored_cost_from_another_version_gives_no_line(tmp_path: Path) -> None:
    from dataclasses import replace

    incident, _ = R.approve_faulty(tmp_path / "incidents.sqlite", R.A3)
    assert incident.diagnosis is not None
    odd = {**incident.diagnosis.document, "cost": {"accelerator_hours": "lots"}}
    changed = replace(incident, diagnosis=replace(incident.diagnosis, document=odd))
    assert [label for label, _ in notify.render(changed).facts if label == "Cost"] == []


def test_the_diagnosed_log_line_carries_the_cost_for_the_log_based_metric(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """loopbreaker/accelerator_hours_lost (Terraform) extracts jsonPayload.accelerator_hours
    and jsonPayload.root_cause of incident_diagnosed."""
    with caplog.at_level(logging.INFO, logger="loopbreaker"):
        R.approve_faulty(tmp_path / "incidents.sqlite", R.A3)
    diagnosed = [
        r.fields  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "fields", {}).get("event") == "incident_diagnosed"
    ]
    with_cost = [f for f in diagnosed if f.get("accelerator_hours") is not None]
    assert with_cost, diagnosed  # the workload's diagnoses; the pool's saw no loop
    last = with_cost[-1]
    assert last["root_cause"] == "faulty_host" and last["accelerator"] == "nvidia-h100-80gb"
    assert last["workload"] == "llama3-70b-cpt"
    assert last["physical_host"] == "d41c7e9a2b6f08e35a1c9d7f4e2b6a80"
    # Diagnosed again as signals came in: the hours added sum to the last figure, once.
    added = sum(f["accelerator_hours_added"] for f in with_cost)
    assert added == pytest.approx(last["accelerator_hours"], abs=1e-9)
    assert all("accelerator_hours" not in f for f in diagnosed if f not in with_cost)
