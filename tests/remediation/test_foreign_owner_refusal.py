"""One owner per node, end to end: the executor reads the node through the official
``kubernetes`` client from the local API server, the re-check refuses a node another system
is handling, and the reason reaches the audit trail, the chat message and a
``LoopbreakerRefused`` Event on the node; nothing is mutated. ``loopbreaker remediate
--dry-run`` shows the same refusal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import remedkit as R

from loopbreaker.cli.main import main
from loopbreaker.incidents import Incident, State
from loopbreaker.remediation.executor import Result
from loopbreaker.remediation.owners import parse_markers
from loopbreaker.remediation.rules import RemediationPolicy

#: NVSentinel's state label (commons/pkg/statemanager/statemanager.go) and quarantine
#: annotation (fault-quarantine/pkg/common/common.go), as docs/remediation.md lists them.
NVSENTINEL = (
    "NVSentinel:label:dgxc.nvidia.com/nvsentinel-state,NVSentinel:annotation:quarantineHealthEvent"
)
LIVE = RemediationPolicy(dry_run=False, foreign_markers=parse_markers(NVSENTINEL))


def labelled(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    return lambda n: n["metadata"]["labels"].update({key: value})


def tainted(key: str, effect: str) -> Callable[[dict[str, Any]], None]:
    return lambda n: n["spec"].setdefault("taints", []).append({"key": key, "effect": effect})


def annotated(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    return lambda n: n["metadata"].setdefault("annotations", {}).update({key: value})


def nothing_mutated(lab: R.Lab) -> bool:
    return (
        lab.kube.mutations == []
        and lab.compute.deletes == []
        and lab.compute.fault_reports == []
        and lab.support.created == []
    )


@pytest.mark.parametrize(
    ("prepare", "says"),
    [
        (labelled("cloud.google.com/fault-behavior", "XID"),
         "GKE's report-and-replace (cloud.google.com/fault-behavior=XID)"),
        (labelled("cloud.google.com/report-and-replace-status", "OperationRUNNING"),
         "report-and-replace-status=OperationRUNNING"),
        (labelled("cloud.google.com/active-node-maintenance", "ONGOING"),
         "GKE host maintenance (cloud.google.com/active-node-maintenance=ONGOING)"),
        (tainted("cloud.google.com/impending-node-termination", "NoSchedule"),
         "taint cloud.google.com/impending-node-termination:NoSchedule"),
        (labelled("dgxc.nvidia.com/nvsentinel-state", "remediating"),
         "handled by NVSentinel (label dgxc.nvidia.com/nvsentinel-state=remediating)"),
        (annotated("quarantineHealthEvent", '{"checkName":"SysLogsXIDError"}'),
         "handled by NVSentinel (annotation quarantineHealthEvent="),
    ],
    ids=["fault_behavior", "report_and_replace", "maintenance", "termination",
         "nvsentinel_label", "nvsentinel_annotation"],
)  # fmt: skip
def test_a_node_another_system_handles_is_refused_everywhere_it_is_reported(
    lab: R.Lab,
    approved: tuple[Path, Incident, dict[str, Any]],
    prepare: Callable[[dict[str, Any]], None],
    says: str,
) -> None:
    _, incident, request = approved
    prepare(lab.node())
    report = lab.remediator(LIVE).handle(dict(request))
    assert report.result is Result.FAILED and says in report.reason, report
    assert nothing_mutated(lab)
    failed = lab.incident(incident.id)
    assert failed.state is State.FAILED
    assert failed.remediation is not None
    assert [(s.step.value, s.outcome.value) for s in failed.remediation.steps] == [
        ("recheck", "failed")
    ]
    assert says in failed.audit[-1].note
    # The chat message shows the step and its reason.
    message = lab.notifier.messages[incident.id]
    assert any(says in line for line in message.remediation), message.remediation
    # And kubectl describe node shows it, as a Warning Event on the node.
    assert lab.kube.event_reasons() == ["LoopbreakerRefused"]
    refused = lab.kube.events[0]
    assert refused["type"] == "Warning" and says in refused["note"]
    assert refused["regarding"]["name"] == R.NODE


def test_an_unrelated_taint_and_label_let_remediation_go_on(
    lab: R.Lab, approved: tuple[Path, Incident, dict[str, Any]]
) -> None:
    _, incident, request = approved
    tainted("nvidia.com/gpu", "NoSchedule")(lab.node())
    labelled("cloud.google.com/scheduled-maintenance-time", "1733296000")(lab.node())
    report = lab.remediator(LIVE).handle(dict(request))
    assert report.result is Result.REMEDIATED, report
    assert lab.compute.deletes


def test_remediate_dry_run_shows_the_refusal_and_changes_nothing(
    lab: R.Lab,
    approved: tuple[Path, Incident, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, incident, _ = approved
    labelled("dgxc.nvidia.com/nvsentinel-state", "draining")(lab.node())
    monkeypatch.setenv("LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS", NVSENTINEL)
    argv = ["remediate", incident.id, "--store", lab.store.path, "--dry-run"]
    argv += ["--kubeconfig", str(lab.kubeconfig), "--compute-endpoint", lab.compute.url]
    code = main([*argv, "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["result"] == "planned"
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["recheck"]["outcome"] == "failed"
    detail = steps["recheck"]["detail"]
    assert "handled by NVSentinel (label dgxc.nvidia.com/nvsentinel-state=draining)" in detail
    assert list(steps) == ["recheck"]  # nothing is planned past a refused re-check
    assert nothing_mutated(lab)
    assert lab.incident(incident.id).state is State.APPROVED


def test_a_malformed_marker_setting_is_one_line_and_exit_2(
    lab: R.Lab,
    approved: tuple[Path, Incident, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, incident, _ = approved
    monkeypatch.setenv("LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS", "node:dgxc.nvidia.com/x")
    code = main(["remediate", incident.id, "--store", lab.store.path])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS" in err[0] and "Traceback" not in err[0]
