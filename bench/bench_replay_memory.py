"""``loopbreaker replay`` on a large file: peak memory and throughput against ``json.load``.

Generates a file of LogEntries (by default 200,000 entries, about 300 MB: the training
job's own container logs with a preemption storm and NCCL timeouts among them) in a
temporary directory, as JSON Lines and as one JSON array; runs the installed
``loopbreaker replay`` on each in a subprocess; and reports, for each layout:

  * the replay's peak RSS, its reader process included                target <= 300 MB
  * its entries/s against the json module reading the same file in
    this run (``json.load``, or ``json.loads`` of each line)          target >= 50 %
  * its stderr lines at the default verbosity                        target <= 100

and, for the record, the entries/s of the streaming reader alone (``signals/files/__init__.py``,
every item decoded and checked, nothing classified or stored). See ``measure.py``.

The exit status is non-zero when a target is missed. Usage::

    python bench/bench_replay_memory.py [--entries N] [--layout jsonl|array|both] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import measure

RSS_TARGET_MB = 300.0
THROUGHPUT_TARGET = 0.50
MAX_STDERR_LINES = 100
PROJECT = "bench-project"
CLUSTER = "tpu-cluster-prod"
JOBSET = "llama3-70b-training"
LOOPBREAKER = Path(sys.executable).with_name("loopbreaker")

_LOG_LINE = (
    "step {step} | loss {loss:.4f} | lr 3.0e-04 | tokens/s 1.21e6 | mfu 0.52 | "
    "grad_norm 0.93 | data wait 2.1 ms | host {host} | "
)


def entries(count: int) -> Iterator[dict[str, Any]]:
    """The job's logs: mostly ordinary training lines (no failure signature), and every
    50th entry a failure signal (preemptions of one pool, NCCL timeouts)."""
    start = datetime(2026, 5, 20, 6, 0, tzinfo=UTC)
    for n in range(count):
        at = (start + timedelta(milliseconds=50 * n)).isoformat().replace("+00:00", "Z")
        node = f"gke-{CLUSTER}-spot-pool-1a2b3c4d-{n % 64:04x}"
        if n % 50 == 0:
            yield {
                "insertId": f"pool-{n:08d}",
                "logName": f"projects/{PROJECT}/logs/container.googleapis.com%2Fnode-pool-events",
                "resource": {
                    "type": "gke_nodepool",
                    "labels": {
                        "project_id": PROJECT,
                        "location": "us-east5",
                        "cluster_name": CLUSTER,
                        "node_pool_name": "spot-pool",
                    },
                },
                "severity": "INFO",
                "timestamp": at,
                "receiveTimestamp": at,
                "textPayload": f"PreemptionEvent: Node '{node}' in node pool 'spot-pool' was "
                "preempted." + " " * 900,
            }
            continue
        text = _LOG_LINE.format(step=n, loss=2.0 + (n % 97) / 100, host=node) * 6
        if n % 50 == 25:
            text = f"[rank{n % 256}] NCCL WARN Watchdog: collective operation timeout " + text
        yield {
            "insertId": f"c-{n:08d}",
            "logName": f"projects/{PROJECT}/logs/stdout",
            "resource": {
                "type": "k8s_container",
                "labels": {
                    "project_id": PROJECT,
                    "location": "us-east5",
                    "cluster_name": CLUSTER,
                    "namespace_name": "default",
                    "pod_name": f"{JOBSET}-slice-0-{n % 16}-abcde",
                    "container_name": "trainer",
                },
            },
            "labels": {
                "k8s-pod/jobset_sigs_k8s_io/jobset-name": JOBSET,
                "k8s-pod/jobset_sigs_k8s_io/job-index": "0",
                "k8s-pod/batch_kubernetes_io/job-completion-index": str(n % 16),
                "compute.googleapis.com/resource_name": node,
            },
            "severity": "INFO",
            "timestamp": at,
            "receiveTimestamp": at,
            "textPayload": text,
        }


def write(path: Path, count: int, layout: str) -> None:
    with path.open("w", encoding="utf-8") as out:
        if layout == "array":
            out.write("[\n")
        for n, entry in enumerate(entries(count)):
            line = json.dumps(entry, separators=(",", ":"))
            if layout == "array":
                out.write(("," if n else "") + line + "\n")
            else:
                out.write(line + "\n")
        if layout == "array":
            out.write("]\n")


def reader_rate(path: Path) -> float:
    """Entries/s of loopbreaker's streaming reader over ``path`` (no classify, no store)."""
    from loopbreaker.signals import files

    began = time.perf_counter()
    count = sum(1 for item in files.read([path]) if item.error is None)
    return count / (time.perf_counter() - began)


def run_replay(path: Path, scratch: Path) -> tuple[measure.Run, dict[str, Any]]:
    """``loopbreaker replay`` on ``path``: its run (time, peak memory with its reader
    process, stderr) and its summary."""
    env = {
        **os.environ,
        "LOOPBREAKER_PROJECT": PROJECT,
        "LOOPBREAKER_NOTIFIER": f"file:{scratch / 'notifications'}",
    }
    done = measure.best([str(LOOPBREAKER), "replay", str(path), "--format", "json"], env=env)
    if done.code != 0:
        raise SystemExit(f"replay of {path} failed ({done.code})")
    return done, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--layout", choices=("jsonl", "array", "both"), default="both")
    parser.add_argument("--keep", type=Path, help="generate the files here and keep them")
    args = parser.parse_args()
    layouts = ("jsonl", "array") if args.layout == "both" else (args.layout,)
    missed = []
    with tempfile.TemporaryDirectory(prefix="loopbreaker-replay-bench-") as tmp:
        scratch = Path(tmp)
        folder = args.keep or scratch
        folder.mkdir(parents=True, exist_ok=True)
        paths = {}
        for layout in layouts:
            path = folder / f"entries-{args.entries}.{'json' if layout == 'array' else 'jsonl'}"
            if not path.exists():
                write(path, args.entries, layout)
            paths[layout] = path
        for layout, path in paths.items():
            done, summary = run_replay(path, scratch)
            baseline = args.entries / measure.json_seconds(path, layout)
            reading = reader_rate(path)
            size_mb = path.stat().st_size / 1e6
            rate = summary["read"] / done.seconds
            ratio = rate / baseline
            print(f"replay of {args.entries:,} entries, {layout}, {size_mb:,.0f} MB")
            print(
                f"    read {summary['read']:,}, accepted {summary['accepted']:,} "
                f"(ignored {summary['ignored']:,}), rejected {summary['rejected_total']:,}, "
                f"incidents {len(summary['incidents'])}"
            )
            print(f"    stderr lines at the default verbosity   {done.stderr_lines}")
            print(
                f"    peak RSS, with the reader process       {done.peak_mb:8.1f} MB "
                f"(goal <= {RSS_TARGET_MB:.0f} MB, before 60-66 MB at 8e4c544)"
            )
            print(
                f"    replay                                  {rate:8,.0f} entries/s "
                f"({done.seconds:.1f} s)"
            )
            print(f"    json reading the same file              {baseline:8,.0f} entries/s")
            print(
                f"    ratio {ratio:.1%} (goal >= {THROUGHPUT_TARGET:.0%}, before 34-36% at 8e4c544)"
            )
            print(
                f"    the streaming reader alone              {reading:8,.0f} entries/s "
                f"({reading / baseline:.0%} of json)"
            )
            if summary["read"] != args.entries:
                missed.append(f"{layout}: read {summary['read']} of {args.entries}")
            if done.peak_mb > RSS_TARGET_MB:
                missed.append(f"{layout}: peak RSS {done.peak_mb:.0f} MB")
            if ratio < THROUGHPUT_TARGET:
                missed.append(f"{layout}: throughput {ratio:.0%} of json")
            if done.stderr_lines > MAX_STDERR_LINES:
                missed.append(f"{layout}: {done.stderr_lines} stderr lines")
    for miss in missed:
        print(f"MISS {miss}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
