"""Host maintenance as evidence: GKE's node labels and taint, Compute's upcomingMaintenance."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from builders import WORKLOAD, at, ctx, evidence, looping, not_ready
from fakes import RecordingSleep
from fakeservers import ComputeServer, KubernetesServer, write_kubeconfig

from loopbreaker.cli.main import main
from loopbreaker.diagnosis.engine import diagnose
from loopbreaker.diagnosis.kube_objects import node_info
from loopbreaker.diagnosis.readers.compute import ComputeHostLookup
from loopbreaker.diagnosis.readers.google_auth import anonymous
from loopbreaker.diagnosis.readers.kube import KubernetesReader
from loopbreaker.diagnosis.readers.retry import RetryPolicy
from loopbreaker.diagnosis.readers.sources import resolve_hosts
from loopbreaker.model import Diagnosis, NodeInfo, PodInfo, RemediationPath, RootCause
from loopbreaker.model.evidence import NodeMaintenance

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN = ROOT / "examples" / "telemetry" / "unknown"
SCHEDULED = "cloud.google.com/scheduled-maintenance-time"
ACTIVE = "cloud.google.com/active-node-maintenance"
TAINT = "cloud.google.com/impending-node-termination"


def epoch(moment: datetime) -> str:
    return str(int(moment.timestamp()))


def node_obj(
    name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """A Node as ``kubectl get nodes -o json`` prints it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"cloud.google.com/gke-nodepool": "tpu-pool", **(labels or {})},
        },
        "spec": {"providerID": f"gce://proj/us-east5-a/{name}", "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def pods_on(*nodes: str) -> tuple[PodInfo, ...]:
    return tuple(
        PodInfo(
            name=f"{WORKLOAD}-workers-0-{i}-abcde",
            namespace="default",
            phase="Running",
            node=n,
            workload=WORKLOAD,
            workload_kind="jobset",
        )
        for i, n in enumerate(nodes)
    )


def run(*nodes: dict[str, Any], on: tuple[str, ...] = ("n1", "n2")) -> Diagnosis:
    infos = tuple(i for i in (node_info(n) for n in nodes) if i is not None)
    # looping(): the JobSet gauge rises at T-20m and T+5m.
    return diagnose(ctx(), evidence(restarts=(looping(),), nodes=infos, pods=pods_on(*on)))


def findings(d: Diagnosis, step: int = 2) -> list[str]:
    return [f.message for f in d.steps[step - 1].findings]


# --- reading the node -----------------------------------------------------------------------


def test_labels_and_taint_are_read_from_the_node_object() -> None:
    info = node_info(
        node_obj(
            "n1",
            {SCHEDULED: "1733083200", ACTIVE: "ONGOING"},
            [{"key": TAINT, "effect": "NoSchedule"}],
        )
    )
    assert info is not None and info.maintenance is not None
    assert info.maintenance.scheduled_at == datetime(2024, 12, 1, 20, 0, tzinfo=UTC)
    assert info.maintenance.active == "ONGOING"
    assert info.maintenance.terminating
    assert info.maintenance.under_way


def test_a_node_without_them_has_no_maintenance_and_a_bad_value_is_not_a_time() -> None:
    plain = node_info(node_obj("n1"))
    assert plain is not None and plain.maintenance is None
    odd = node_info(node_obj("n1", {SCHEDULED: "2026-05-20T08:00:00Z"}))
    assert odd is not None and odd.maintenance is None


# --- the verdict ----------------------------------------------------------------------------


def test_restart_at_a_workload_nodes_maintenance_start_is_maintenance() -> None:
    d = run(node_obj("n1", {SCHEDULED: epoch(at(4))}), node_obj("n2"))
    assert d.root_cause is RootCause.MAINTENANCE
    assert d.remediation.path is RemediationPath.PLAN_MAINTENANCE
    assert "host maintenance of node n1, started at 08:19:00Z" in d.summary
    assert d.remediation.actions[0] == (
        "Host maintenance of node n1 started at 08:19:00Z; the workload restarted at 08:20:00Z."
    )
    assert any("quiet period" in a for a in d.remediation.actions)
    assert any("opportunistic maintenance" in a for a in d.remediation.actions)
    assert not any("No host maintenance" in f for f in findings(d))
    assert any("n1 (08:19:00Z)" in f for f in findings(d))


def test_maintenance_scheduled_after_the_restarts_is_ruled_out() -> None:
    d = run(node_obj("n1", {SCHEDULED: epoch(at(20))}), node_obj("n2"))
    assert d.root_cause is RootCause.UNKNOWN
    ruled_out = [f for f in d.steps[1].findings if "ruled out" in f.message]
    assert len(ruled_out) == 1 and not ruled_out[0].supports
    assert "scheduled for 08:35:00Z, after the restarts: it had not started" in (
        ruled_out[0].message
    )
    # Still named: it is scheduled inside the window.
    assert any("n1 (08:35:00Z)" in f for f in findings(d))


def test_maintenance_after_the_window_is_ruled_out_with_its_date() -> None:
    later = at(60 * 24 * 3)
    d = run(node_obj("n1", {SCHEDULED: epoch(later)}), node_obj("n2"))
    assert d.root_cause is RootCause.UNKNOWN
    assert any("2026-05-23T08:15:00Z" in f and "ruled out" in f for f in findings(d))
    assert not any("scheduled inside the window" in f for f in findings(d))


def test_another_workloads_node_is_named_but_decides_nothing() -> None:
    d = run(node_obj("n1"), node_obj("n9", {SCHEDULED: epoch(at(4))}))
    assert d.root_cause is RootCause.UNKNOWN
    assert any("scheduled inside the window: n9 (08:19:00Z)" in f for f in findings(d))


def test_active_maintenance_and_taint_are_findings_not_a_verdict() -> None:
    d = run(node_obj("n1", {ACTIVE: "ONGOING"}, [{"key": TAINT, "effect": "NoSchedule"}]))
    assert d.root_cause is RootCause.UNKNOWN
    assert any(
        f"{ACTIVE}=ONGOING, taint {TAINT}" in f and "when the nodes were read" in f
        for f in findings(d)
    )


def test_no_restart_at_a_start_inside_the_window_is_not_the_cause() -> None:
    d = run(node_obj("n1", {SCHEDULED: epoch(at(-10))}))
    assert d.root_cause is RootCause.UNKNOWN
    assert any("no restart of the workload at its start" in f for f in findings(d))


def test_the_maintenance_nodes_failure_is_not_counted_against_its_host() -> None:
    infos = tuple(
        i
        for i in (node_info(node_obj("n1", {SCHEDULED: epoch(at(4))})), node_info(node_obj("n2")))
        if i is not None
    )
    d = diagnose(
        ctx(),
        evidence(nodes=infos, pods=pods_on("n1", "n2"), node_conditions=not_ready("n1", [(4, 9)])),
    )
    assert d.root_cause is RootCause.MAINTENANCE
    assert d.suspect_hosts == ()
    assert any("explained by a preemption or maintenance" in f for f in findings(d, 3))


# --- the CLI on a copy of a bundled scenario -------------------------------------------------


def _scenario(tmp_path: Path, label_at: dict[str, datetime]) -> tuple[Path, list[str]]:
    """The ``unknown`` scenario (restarts at 23:41 and 00:07) with labelled nodes."""
    copy = tmp_path / "telemetry"
    shutil.copytree(UNKNOWN, copy)
    nodes = json.loads((copy / "nodes.json").read_text())
    for item in nodes["items"]:
        when = label_at.get(item["metadata"]["name"])
        if when is not None:
            item["metadata"]["labels"][SCHEDULED] = epoch(when)
    (copy / "nodes.json").write_text(json.dumps(nodes))
    spec = json.loads((copy / "scenario.json").read_text())
    args = ["diagnose", "--offline", "--telemetry", str(copy), "--format", "json"]
    for key, value in spec["context"].items():
        args += [f"--{key.replace('_', '-')}", value]
    return copy, args


NODE = "gke-l4-dev-cluster-l4-pool-9b264017-mkk7"


def test_cli_maintenance_when_a_restart_matches_its_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, args = _scenario(tmp_path, {NODE: datetime(2026, 9, 15, 23, 40, tzinfo=UTC)})
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["root_cause"] == "maintenance"
    assert out["remediation"]["path"] == "plan_maintenance"
    assert f"host maintenance of node {NODE}, started at 23:40:00Z" in out["summary"]
    assert out["remediation"]["actions"][0].endswith("the workload restarted at 23:41:00Z.")


def test_cli_maintenance_ruled_out_when_it_starts_after_the_restarts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, args = _scenario(tmp_path, {NODE: datetime(2026, 9, 16, 0, 20, tzinfo=UTC)})
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["root_cause"] == "unknown"
    step2 = next(s for s in out["steps"] if s["number"] == 2)
    texts = [f["message"] if isinstance(f, dict) else f for f in step2["findings"]]
    assert any(NODE in t and "ruled out" in t for t in texts)
    assert any(f"scheduled inside the window: {NODE} (00:20:00Z)" in t for t in texts)


# --- live readers -----------------------------------------------------------------------------


def test_live_node_reader_reads_the_labels_and_taint(tmp_path: Path) -> None:
    nodes = [
        node_obj("n1", {SCHEDULED: "1780882500"}, [{"key": TAINT, "effect": "NoSchedule"}]),
        node_obj("n2"),
    ]
    with KubernetesServer(nodes, [], token="t") as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, token="t")
        reader = KubernetesReader.from_kubeconfig(
            config, timeout=0.4, retry=RetryPolicy(attempts=1, sleep=RecordingSleep())
        )
        read = reader.nodes()
    assert read[0].maintenance == NodeMaintenance(
        scheduled_at=datetime.fromtimestamp(1780882500, UTC), terminating=True
    )
    assert read[1].maintenance is None


UPCOMING = {
    "type": "SCHEDULED",
    "canReschedule": True,
    "windowStartTime": "2026-05-20T08:19:00Z",
    "windowEndTime": "2026-05-20T12:19:00Z",
    "latestWindowStartTime": "2026-05-27T08:19:00Z",
    "maintenanceStatus": "PENDING",
}


@pytest.fixture
def compute() -> Iterator[ComputeServer]:
    key = ("proj", "us-east5-a", "n1")
    with ComputeServer({key: "host-a"}, maintenance={key: UPCOMING}) as server:
        yield server


def test_compute_upcoming_maintenance_reaches_the_node_and_the_verdict(
    compute: ComputeServer,
) -> None:
    lookup = ComputeHostLookup(
        "proj",
        credentials=anonymous(),
        api_endpoint=compute.url,
        timeout=0.4,
        retry=RetryPolicy(attempts=1, sleep=RecordingSleep()),
    )
    labelled = node_info(node_obj("n1", {ACTIVE: "ONGOING"}))
    assert labelled is not None
    nodes, _ = resolve_hosts([labelled, NodeInfo("n2", zone="us-east5-a")], [lookup])
    m = nodes[0].maintenance
    assert m is not None
    assert m.active == "ONGOING"  # GKE's label kept beside Compute's window
    assert (m.window_start, m.window_end) == (at(4), at(4) + timedelta(hours=4))
    assert (m.status, m.type, m.can_reschedule) == ("PENDING", "SCHEDULED", True)
    assert m.latest_start == at(4) + timedelta(days=7)
    assert nodes[1].maintenance is None
    d = diagnose(ctx(), evidence(nodes=nodes, pods=pods_on("n1", "n2")))
    assert d.root_cause is RootCause.MAINTENANCE
    assert any("Compute Engine upcomingMaintenance SCHEDULED, PENDING" in f for f in findings(d))


def test_the_ticket_names_nodes_with_maintenance_inside_the_window() -> None:
    infos = tuple(
        i
        for i in (node_info(node_obj("n1")), node_info(node_obj("n7", {SCHEDULED: epoch(at(12))})))
        if i is not None
    )
    down = not_ready("n1", [(-20, -15)]) + not_ready("n1", [(5, 9)])
    hosted = tuple(replace(i, physical_host="host-a") if i.name == "n1" else i for i in infos)
    d = diagnose(ctx(), evidence(nodes=hosted, pods=pods_on("n1"), node_conditions=down))
    assert d.root_cause is RootCause.FAULTY_HOST
    assert d.ticket_draft is not None
    assert (
        "Host maintenance is scheduled inside the window on: n7 (2026-05-20T08:27:00Z)."
        in d.ticket_draft.summary
    )
