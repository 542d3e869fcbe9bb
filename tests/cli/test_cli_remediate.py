"""``loopbreaker remediate`` through the CLI against local Kubernetes and Compute APIs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import chatkit as K
import pytest
import remedkit as R
from fakes import FakeClock

from loopbreaker.cli.main import main
from loopbreaker.incidents import Incident, State


@pytest.fixture(scope="module")
def approved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident]:
    path = tmp_path_factory.mktemp("approved") / "template.sqlite"
    incident, _ = R.approve_faulty(path)
    return path, incident


@pytest.fixture
def lab(approved: tuple[Path, Incident], tmp_path: Path) -> Iterator[R.Lab]:
    path, incident = approved
    assert incident.approval is not None
    clock = FakeClock(incident.approval.at)
    with R.lab(K.copy_store(path, tmp_path / "incidents.sqlite"), clock, tmp_path) as made:
        yield made


def run(lab: R.Lab, incident_id: str, *extra: str) -> int:
    argv = [
        "remediate",
        incident_id,
        "--store",
        lab.store.path,
        "--kubeconfig",
        str(lab.kubeconfig),
        "--compute-endpoint",
        lab.compute.url,
        "--format",
        "json",
        *extra,
    ]
    return main(argv)


def test_the_default_is_a_dry_run_plan_and_nothing_changes(
    lab: R.Lab, approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str]
) -> None:
    _, incident = approved
    code = run(lab, incident.id)
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["result"] == "planned"
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["recheck"]["outcome"] == "done"
    assert steps["cordon"]["calls"][0].startswith(f"PATCH /api/v1/nodes/{R.NODE}")
    assert lab.kube.mutations == [] and lab.compute.deletes == []
    assert lab.incident(incident.id).state is State.APPROVED


def test_no_dry_run_isolates_the_host(
    lab: R.Lab, approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str]
) -> None:
    _, incident = approved
    code = run(lab, incident.id, "--no-dry-run")
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["result"] == "remediated", report
    assert len(lab.compute.deletes) == 1 and lab.node()["spec"]["unschedulable"] is True
    assert lab.incident(incident.id).state is State.REMEDIATED
    # Running it again is refused and does nothing.
    assert run(lab, incident.id, "--no-dry-run") == 2
    assert "is remediated: only an approved incident" in capsys.readouterr().err
    assert len(lab.compute.deletes) == 1


def test_an_incident_that_is_not_approved_is_refused(
    lab: R.Lab, approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str]
) -> None:
    from dataclasses import replace

    _, incident = approved
    lab.store.update(incident.id, lambda i: replace(i, state=State.AWAITING_APPROVAL))
    code = run(lab, incident.id, "--no-dry-run")
    err = capsys.readouterr().err
    assert code == 2 and "only an approved incident" in err
    assert lab.kube.mutations == [] and lab.compute.deletes == []


def test_unknown_ids_and_both_modes_are_refused(
    lab: R.Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(lab, "inc-nope") == 2
    assert "no incident 'inc-nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["remediate", "inc-x", "--dry-run", "--no-dry-run"])
    assert exited.value.code == 2


def test_the_dry_run_of_a_gke_path_names_the_path_and_plans_one_label(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An A3 node's approval is for GKE's report-and-replace: the text plan says so."""
    incident, _ = R.approve_faulty(tmp_path / "incidents.sqlite", R.A3)
    assert incident.approval is not None
    target = incident.approval.target
    clock = FakeClock(incident.approval.at)
    with R.gke_lab(tmp_path / "incidents.sqlite", clock, tmp_path, target) as lab:
        argv = ["remediate", incident.id, "--store", lab.store.path, "--dry-run"]
        argv += ["--kubeconfig", str(lab.kubeconfig), "--compute-endpoint", lab.compute.url]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f"Dry-run remediation plan of {incident.id}: planned" in out
        assert "dry run, repair path gke:" in out
        assert "repair path gke (hand the node to GKE's report-and-replace)" in out
        assert (
            f"PATCH /api/v1/nodes/{target.node} labels cloud.google.com/fault-behavior=XID" in out
        )
        assert "evict" not in out.split("hand_to_gke", 1)[1].split("await_gke", 1)[0].lower() or (
            "loopbreaker evicts and deletes nothing" in out
        )
        assert lab.kube.mutations == [] and lab.compute.fault_reports == []
