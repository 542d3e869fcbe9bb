"""`loopbreaker diagnose` and the approval card on a faulty A3 host whose nodes.json
carries GKE's node health prediction label (set here, as GKE's CronJob would set it:
"Enable node health prediction in a GKE cluster",
https://docs.cloud.google.com/ai-hypercomputer/docs/workloads/enable-node-health-prediction).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from chatkit import SIGNING_KEY, chat_settings

from loopbreaker.chat import notify
from loopbreaker.chat import render as R
from loopbreaker.cli.main import main
from loopbreaker.incidents import State
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.replay import run as replay

ROOT = Path(__file__).resolve().parents[2]
LABEL = "gke.google.com/recommended-to-run-large-training-workload"
# An A3 High node pool: GKE documents the label for its GPU machine families only.
SCENARIO = "gpu-xid-hardware-twice"
FAULTY_NODE = "gke-a3-prod-usc1-a3-pool-3cb4b4b1-k2w8"
HEALTHY_NODE = "gke-a3-prod-usc1-a3-pool-3cb4b4b1-p8c3"


def _labelled(dest: Path, values: dict[str, str]) -> dict[str, Any]:
    """A copy of the scenario with the label set on the named nodes."""
    source = ROOT / "examples" / "telemetry" / SCENARIO
    shutil.copytree(source, dest)
    nodes = json.loads((dest / "nodes.json").read_text())
    for item in nodes["items"]:
        name = item["metadata"]["name"]
        if name in values:
            item["metadata"]["labels"][LABEL] = values[name]
    (dest / "nodes.json").write_text(json.dumps(nodes))
    spec: dict[str, Any] = json.loads((source / "scenario.json").read_text())
    return spec


def _diagnose(directory: Path, spec: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> Any:
    argv = ["diagnose", "--telemetry", str(directory), "--format", "json"]
    for key, value in spec["context"].items():
        argv += [f"--{key.replace('_', '-')}", value]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_the_label_supports_the_faulty_host_verdict_it_does_not_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _labelled(tmp_path / "plain", {})
    plain = _diagnose(tmp_path / "plain", spec, capsys)
    _labelled(tmp_path / "flagged", {FAULTY_NODE: "false", HEALTHY_NODE: "false"})
    out = _diagnose(tmp_path / "flagged", spec, capsys)
    for key in ("root_cause", "restart_loop", "remediation"):
        assert out[key] == plain[key], key
    assert out["root_cause"] == "faulty_host"
    assert [s["host"] for s in out["suspect_hosts"]] == [s["host"] for s in plain["suspect_hosts"]]
    assert out["suspect_hosts"][0]["health_prediction"] == {FAULTY_NODE: "false"}
    hints = [f for f in out["evidence"] if LABEL in f["message"]]
    [support] = [f for f in hints if FAULTY_NODE in f["message"]]
    assert support["supports"] is True and support["cause"] == "faulty_host"
    # The node of the workload that never failed is named, and decides nothing.
    [forecast] = [f for f in hints if HEALTHY_NODE in f["message"]]
    assert forecast["supports"] is False and forecast["cause"] is None
    assert f"{FAULTY_NODE}=false" in out["ticket_draft"]["summary"]
    assert LABEL not in plain["ticket_draft"]["summary"]


def test_the_approval_card_names_the_label_value_beside_the_host(tmp_path: Path) -> None:
    telemetry = tmp_path / "telemetry"
    _labelled(telemetry, {FAULTY_NODE: "false"})
    store_path = tmp_path / "incidents.sqlite"
    replay.run(
        [telemetry / "logs.json"],
        settings=chat_settings(),
        telemetry=telemetry,
        store_path=store_path,
    )
    store = SqliteStore(store_path)
    try:
        [incident] = store.list_incidents(states={State.AWAITING_APPROVAL})
    finally:
        store.close()
    n = notify.render(incident, signing_key=SIGNING_KEY.encode())
    [row] = n.hosts
    assert row["health"] == f"GKE health prediction {FAULTY_NODE}=false"
    slack = json.dumps(R.slack_message(n))
    chat = json.dumps(R.google_chat_message(n))
    for body in (slack, chat):
        assert f"GKE health prediction {FAULTY_NODE}=false" in body
        assert LABEL in body  # the ticket draft's summary names the label
