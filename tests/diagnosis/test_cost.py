"""The cost of a restart loop, through ``loopbreaker diagnose``, on bundled scenarios.

Every expected figure is worked out here from the scenario's own files, with code of its
own: the failure lines the scenario describes (``scenario.json``), the Running samples of
``kube_pod_status_phase`` in ``metrics.om``, the checkpoint lines of ``logs.json`` and the
accelerator requests of ``pods.json``.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopbreaker.cli.main import main
from loopbreaker.timeutil import parse_rfc3339

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "telemetry"
_SAMPLE = re.compile(
    r'^kube_pod_status_phase\{[^}]*pod="(?P<pod>[^"]+)"[^}]*phase="Running"[^}]*\} '
    r"(?P<value>\S+) (?P<at>\d+)"
)


def diagnose(directory: Path, capsys: pytest.CaptureFixture[str], fmt: str = "json") -> Any:
    context = json.loads((directory / "scenario.json").read_text())["context"]
    argv = ["diagnose", "--telemetry", str(directory), "--format", fmt]
    for key, value in context.items():
        argv += [f"--{key.replace('_', '-')}", value]
    assert main(argv) == 0
    out = capsys.readouterr().out
    return json.loads(out) if fmt == "json" else out


def running(directory: Path, workload: str) -> dict[datetime, int]:
    """Sample time -> the workload's pods Running, read straight from metrics.om."""
    counts: dict[datetime, int] = {}
    for line in (directory / "metrics.om").read_text().splitlines():
        match = _SAMPLE.match(line)
        if match and match["pod"].startswith(workload + "-"):
            at = datetime.fromtimestamp(int(match["at"]), tz=UTC)
            counts[at] = counts.get(at, 0) + (1 if float(match["value"]) >= 1 else 0)
    return counts


def back_up(counts: dict[datetime, int], failure: datetime) -> datetime:
    """When every pod runs again after the fall that followed ``failure``."""
    healthy = max(counts.values())
    fell = min(at for at, n in counts.items() if at > failure and n < healthy)
    return min(at for at, n in counts.items() if at > fell and n >= healthy)


def lines(directory: Path, needle: str) -> list[datetime]:
    entries = json.loads((directory / "logs.json").read_text())
    found = [
        parse_rfc3339(e["timestamp"])
        for e in entries
        if needle in (e.get("textPayload") or json.dumps(e.get("jsonPayload") or {}))
    ]
    return sorted(found)


def first_of_each(times: list[datetime], gap: timedelta = timedelta(minutes=10)) -> list[datetime]:
    """The first time of each burst (a failure logs many lines at once)."""
    firsts: list[datetime] = []
    for at in times:
        if not firsts or at - firsts[-1] > gap:
            firsts.append(at)
    return firsts


def accelerators(directory: Path, resource: str, workload: str) -> int:
    pods = json.loads((directory / "pods.json").read_text())["items"]
    return sum(
        int((c.get("resources") or {}).get("limits", {}).get(resource, 0))
        for p in pods
        if p["metadata"]["name"].startswith(workload + "-")
        for c in p["spec"]["containers"]
    )


def test_a_faulty_gpu_host_with_checkpoint_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """gpu-xid-hardware-twice: Xid 48 twice, 15 minutes apart; Hugging Face Trainer
    checkpoints ("Saving model checkpoint to .../checkpoint-N")."""
    directory = EXAMPLES / "gpu-xid-hardware-twice"
    document = diagnose(directory, capsys)
    cost = document["cost"]
    counts = running(directory, "llama3-70b-cpt")
    failures = first_of_each(lines(directory, "NVRM: Xid"))
    assert len(failures) == 2
    ups = [back_up(counts, f) for f in failures]
    downtime = sum((u - f).total_seconds() for f, u in zip(failures, ups, strict=True))
    saves = lines(directory, "Saving model checkpoint to")
    first_save = max(s for s in saves if s <= failures[0])
    # After the first restart the job resumed from that checkpoint: the work redone from
    # when it ran again until the second failure is the second one's loss.
    second_from = max([s for s in saves if s <= failures[1]] + [ups[0]])
    lost = (failures[0] - first_save).total_seconds() + (failures[1] - second_from).total_seconds()
    gpus = accelerators(directory, "nvidia.com/gpu", "llama3-70b-cpt")
    assert (cost["accelerator"], cost["accelerators"], cost["restarts"]) == (
        "nvidia-h100-80gb",
        gpus,
        2,
    )
    assert cost["downtime_s"] == pytest.approx(downtime, abs=1)
    assert cost["lost_progress_s"] == pytest.approx(lost, abs=1)
    assert cost["accelerator_hours"] == pytest.approx(gpus * (downtime + lost) / 3600, abs=0.01)
    window = [parse_rfc3339(document["context"][k]) for k in ("start_time", "end_time")]
    inside = [at for at in counts if window[0] <= at <= window[1]]
    span = (max(inside) - min(inside)).total_seconds()
    assert cost["ettr"] == pytest.approx((span - downtime - lost) / span, abs=0.001)
    assert cost["missing"] == []
    assert any("step 49311" in b for b in cost["basis"])  # the checkpoint's own step


def test_an_nccl_loop_without_any_checkpoint_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pytorchjob-nccl-timeout with every line that mentions a checkpoint left out."""
    directory = tmp_path / "pytorchjob-nccl-timeout"
    shutil.copytree(EXAMPLES / "pytorchjob-nccl-timeout", directory)
    entries = json.loads((directory / "logs.json").read_text())
    kept = [e for e in entries if "checkpoint" not in json.dumps(e).lower()]
    assert len(kept) < len(entries)
    (directory / "logs.json").write_text(json.dumps(kept))
    document = diagnose(directory, capsys)
    cost = document["cost"]
    assert cost["lost_progress_s"] is None
    assert cost["missing"] == ["lost progress: the logs show no checkpoint save of bert-ddp"]
    gpus = accelerators(directory, "nvidia.com/gpu", "bert-ddp")
    assert cost["accelerators"] == gpus == 8
    # Downtime only, said so.
    assert cost["accelerator_hours"] == pytest.approx(gpus * cost["downtime_s"] / 3600, abs=0.01)
    assert any(b.endswith("(downtime only)") for b in cost["basis"])
    assert any("an upper bound: lost progress unknown" in b for b in cost["basis"])
    text = diagnose(directory, capsys, "text")
    assert "lost progress unknown" in text.splitlines()[2]
    # The basis follows the steps, each figure with what it rests on or lacks.
    basis = text.split("Cost basis:\n", 1)[1].splitlines()
    assert basis[0] == "  - restarts: 3, as step 1 counted them"
    assert "  - missing: lost progress: the logs show no checkpoint save of bert-ddp" in basis


def test_a_tpu_slice(capsys: pytest.CaptureFixture[str]) -> None:
    """faulty-host: a TPU v5p slice whose host fails twice (a kernel BUG, then hardware
    errors and a panic)."""
    directory = EXAMPLES / "faulty-host"
    cost = diagnose(directory, capsys)["cost"]
    counts = running(directory, "llama3-70b-training")
    failures = [
        lines(directory, "BUG: unable to handle kernel")[0],
        lines(directory, "[Hardware Error]")[0],
    ]
    downtime = sum((back_up(counts, f) - f).total_seconds() for f in failures)
    chips = accelerators(directory, "google.com/tpu", "llama3-70b-training")
    assert (cost["accelerator"], cost["accelerators"]) == ("tpu-v5p-slice", chips)
    assert chips == 16
    assert cost["downtime_s"] == pytest.approx(downtime, abs=1)
    # Its checkpoint line ("Saving checkpoint for step N to gs://...") is no framework's
    # documented wording: lost progress stays unknown rather than guessed.
    assert cost["lost_progress_s"] is None
    assert cost["accelerator_hours"] == pytest.approx(chips * downtime / 3600, abs=0.01)


def test_a_tfjob(capsys: pytest.CaptureFixture[str]) -> None:
    """tfjob-faulty-host: the chief and parameter servers request no GPU; the 4 workers
    request 8 each."""
    directory = EXAMPLES / "tfjob-faulty-host"
    document = diagnose(directory, capsys)
    cost = document["cost"]
    counts = running(directory, "resnet50-ps")
    failures = [lines(directory, "NVRM: Xid")[0], lines(directory, "mce: [Hardware Error]")[0]]
    downtime = sum((back_up(counts, f) - f).total_seconds() for f in failures)
    assert cost["accelerators"] == accelerators(directory, "nvidia.com/gpu", "resnet50-ps") == 32
    assert cost["downtime_s"] == pytest.approx(downtime, abs=1)
    assert cost["restarts"] == document["restart_increase"] == 2
    # The ticket carries the business impact, as support cases ask for it.
    impact = document["ticket_draft"]["business_impact"]
    assert impact.startswith("2 restart(s) of a training job on 32 nvidia-h100-80gb cost about")
    markdown = diagnose(directory, capsys, "markdown")
    assert "## Business impact" in markdown and "- **Business impact:**" in markdown


def test_no_loop_has_no_cost(capsys: pytest.CaptureFixture[str]) -> None:
    assert diagnose(EXAMPLES / "no-restarts", capsys)["cost"] is None
