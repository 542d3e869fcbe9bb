"""What the large-file benchmarks measure: a command's time, its peak memory with every
process it starts, and the json module's time on the same file, each in a fresh process
and each the fastest of ROUNDS runs.

Peak memory is the largest sum of the resident sets of the command and its descendants
(``/proc``, sampled every 20 ms), so a replay's reader process counts too; ``wait4``'s
``ru_maxrss`` of the command alone is kept as a floor. The baseline is the json module
reading the same file into memory: ``json.load`` of an array, ``json.loads`` of each line
of JSON Lines (``json.load`` cannot read those).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SAMPLE_SECONDS = 0.02
#: Timed runs of each command and of each baseline: the fastest counts (as timeit does),
#: so a busy moment of the machine does not decide a ratio; memory is the largest.
ROUNDS = 2


@dataclass
class Run:
    seconds: float
    peak_mb: float
    stderr_lines: int
    code: int
    stdout: str


def run(argv: list[str], env: dict[str, str] | None = None) -> Run:
    """Run ``argv``; its wall time, peak memory (with its descendants) and output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        peak = _Sampler(child.pid)
        peak.start()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        peak.stop()
        out.seek(0)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        return Run(
            seconds,
            max(peak.kb, usage.ru_maxrss) / 1024,
            len(stderr.splitlines()),
            child.returncode,
            out.read().decode(errors="replace"),
        )


def best(argv: list[str], env: dict[str, str] | None = None, rounds: int = ROUNDS) -> Run:
    """``argv`` run ``rounds`` times: the fastest time, the largest peak memory and
    stderr, and the output of the first run (every run must succeed alike)."""
    runs = [run(argv, env) for _ in range(rounds)]
    first = runs[0]
    if any(r.code != first.code for r in runs):
        raise SystemExit(f"{argv[:2]} exited with {[r.code for r in runs]} in {rounds} runs")
    return Run(
        min(r.seconds for r in runs),
        max(r.peak_mb for r in runs),
        max(r.stderr_lines for r in runs),
        first.code,
        first.stdout,
    )


def json_seconds(path: Path, layout: str) -> float:
    """Seconds the json module takes to read ``path`` into memory, in a fresh process
    (the fastest of ROUNDS runs)."""
    if layout == "array":
        code = "import json, sys; json.load(open(sys.argv[1], 'rb'))"
    else:
        code = "import json, sys; [json.loads(line) for line in open(sys.argv[1], 'rb')]"
    done = best([sys.executable, "-c", code, str(path)])
    if done.code != 0:
        raise SystemExit(f"json could not read {path}")
    return done.seconds


class _Sampler(threading.Thread):
    """The largest summed VmRSS of a process and its descendants, in kB."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.kb = 0
        self._done = threading.Event()

    def stop(self) -> None:
        self._done.set()
        self.join()

    def run(self) -> None:
        while not self._done.is_set():
            self.kb = max(self.kb, sum(_rss_kb(p) for p in _tree(self.pid)))
            self._done.wait(SAMPLE_SECONDS)


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        todo.extend(int(c) for c in children)
    return found


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0
