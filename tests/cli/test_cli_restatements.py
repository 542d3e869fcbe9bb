"""`loopbreaker diagnose` counts one collective timeout once, however many lines restate it.

When ProcessGroupNCCL's watchdog gives up on a collective, the same rank goes on to print the
desync report (TORCH_NCCL_DESYNC_DEBUG), the flight recorder's dump lines, libstdc++'s
``terminate called after throwing an instance of 'c10::DistBackendError'`` with the exception's
``what():`` line, and c10's ``Exception raised from checkTimeout at ...`` backtrace. Each line
below is copied from a log a user posted (the catalog cites them); the burst replaces every
fault line of the nccl-application-hang scenario, so it is the only failure the logs show.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_cli_diagnose import ROOT, context_args, run_json

from loopbreaker.model import WORKLOAD_FAULT_KINDS, SignalKind
from loopbreaker.signals.classify import classify

SCENARIO = ROOT / "examples" / "telemetry" / "nccl-application-hang"
COORDINATOR = "gpt-neox-pretrain-workers-0-0-vm57q"
#: The watchdog's own line of the scenario's second failure, on the coordinator.
TIMEOUT_AT = "2026-01-27T16:47:23.820665022Z"

#: What the same rank prints after the watchdog's line, in order (sources: pytorch.toml).
BURST = [
    # the desync report (pytorch/pytorch#152623)
    "[rank0]:[E515 18:36:47.343377708 ProcessGroupNCCL.cpp:1937] Rank 0",
    "         - [0] Timeout at collective: ALLREDUCE, #315",
    "         - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync"
    " are:",
    "             [7] finished collective #182, but didn't join collective #183 (count from 1)",
    "         - Snapshot of ranks' latest states:",
    # the flight recorder (sgl-project/sglang#10216, PrimeIntellect-ai/prime-rl#3186)
    "[rank7]:[E909 08:45:30.167721114 ProcessGroupNCCL.cpp:732] Stack trace of the failed"
    " collective not found, potentially because FlightRecorder is disabled. You can enable it"
    " by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.",
    "[rank7]:[E909 08:45:30.167879018 ProcessGroupNCCL.cpp:2584] [PG ID 2 PG GUID 3 Rank 7]"
    " First PG on this rank to signal dumping.",
    "[rank1]:[E801 01:01:39.255294610 ProcessGroupNCCL.cpp:1628] [PG ID 0 PG GUID"
    " 0(default_pg) Rank 1] ProcessGroupNCCL preparing to dump debug info. Include stack"
    " trace: 1, only active collectives: 0",
    # the uncaught exception (mittagessen/party#7)
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread"
    " terminated with exception: [Rank 0] Watchdog caught collective operation timeout:"
    " WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran"
    " for 1800093 milliseconds before timing out.",
    "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:618 (most recent call first):",
    "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::"
    "duration<long, std::ratio<1l, 1000l> > >) + 0x1e1 (0x7fb5d10a04e1 in /usr/local/lib/"
    "python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
]


def _fault(entry: dict[str, Any]) -> bool:
    return classify(entry).kind in WORKLOAD_FAULT_KINDS


def telemetry(tmp_path: Path) -> Path:
    """The scenario with one failure left: the coordinator's watchdog line at TIMEOUT_AT and,
    a millisecond apart after it, the lines that restate it."""
    target = tmp_path / "restatements"
    shutil.copytree(SCENARIO, target)
    logs: list[dict[str, Any]] = json.loads((target / "logs.json").read_text())
    timeout = next(e for e in logs if e.get("timestamp") == TIMEOUT_AT)
    assert timeout["resource"]["labels"]["pod_name"] == COORDINATOR
    assert "Watchdog caught collective operation timeout" in timeout["textPayload"]
    kept = [e for e in logs if e is timeout or not _fault(e)]
    for n, text in enumerate(BURST, start=1):
        line = json.loads(json.dumps(timeout))
        line["insertId"] = f"restates-{n:02d}"
        line["textPayload"] = text
        line["timestamp"] = f"2026-01-27T16:47:23.{821 + n:03d}000000Z"
        kept.append(line)
    (target / "logs.json").write_text(json.dumps(kept))
    return target


def test_only_the_lines_that_state_the_timeout_are_signals() -> None:
    entries = [{"resource": {"type": "k8s_container"}, "textPayload": t} for t in BURST]
    signals = [(t, classify(e).kind) for t, e in zip(BURST, entries, strict=True)]
    stating = [(t, k) for t, k in signals if k is not SignalKind.UNRECOGNIZED]
    # what(): carries the exception's message, the watchdog's timeout again: the same kind.
    what = next(t for t in BURST if t.startswith("  what():  "))
    assert stating == [(what, SignalKind.NCCL_TIMEOUT)]


def test_a_timeout_and_its_restatements_are_one_failure_of_the_application(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = json.loads((SCENARIO / "scenario.json").read_text())
    directory = telemetry(tmp_path)
    argv = ["diagnose", *context_args(spec), "--telemetry", str(directory), "--format", "json"]
    out = run_json(capsys, argv)
    assert out["root_cause"] == "application"
    assert out["remediation"]["path"] == "inspect_application"
    assert out["remediation"]["requires_approval"] is False
    assert out["suspect_hosts"] == []
    step4 = [f["message"] for f in out["evidence"] if f["step"] == 4]
    logged = [m for m in step4 if m.startswith("The coordinator (")]
    # One failure: the collective timeout, once, on the rank that timed out. The type line
    # before what() used to add dist_backend_error; the backtrace, the desync report and the
    # flight recorder's lines add nothing.
    assert len(logged) == 1, step4
    assert f"{COORDINATOR}) logged nccl_timeout: " in logged[0], logged
    assert not any("fault line(s) from other workers" in m for m in step4), step4
