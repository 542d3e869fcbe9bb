"""``loopbreaker replay`` on a large file: peak memory and throughput against ``json.load``.

Generates a file of LogEntries (by default 200,000 entries, about 300 MB: the training
job's own container logs with a preemption storm and NCCL timeouts among them) in a
temporary directory, as JSON Lines and as one JSON array; runs the installed
``loopbreaker replay`` on each in a subprocess; and reports, for each layout:

  * the replay's peak RSS (``ru_maxrss`` of that child, as ``RUSAGE_CHILDREN`` reports
    it)                                                               target <= 300 MB
  * its entries/s against ``json.load`` of the same file in this run   target >= 50 %

and, for the record, the entries/s of the streaming reader alone (``signals/files.py``,
every item decoded and checked, nothing classified or stored) against the same ``json.load``.

The exit status is non-zero when a target is missed. Usage::

    python bench/bench_replay_memory.py [--entries N] [--layout jsonl|array|both] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

RSS_TARGET_MB = 300.0
THROUGHPUT_TARGET = 0.50
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


def json_load_rate(path: Path, layout: str) -> tuple[float, int]:
    """(entries/s, entries) of json.load (or json.loads per line) of the whole file."""
    began = time.perf_counter()
    with path.open(encoding="utf-8") as f:
        if layout == "array":
            loaded = json.load(f)
        else:
            loaded = [json.loads(line) for line in f if line.strip()]
    elapsed = time.perf_counter() - began
    count = len(loaded)
    del loaded
    return count / elapsed, count


def reader_rate(path: Path) -> float:
    """Entries/s of loopbreaker's streaming reader over ``path`` (no classify, no store)."""
    from loopbreaker.signals import files

    began = time.perf_counter()
    count = sum(1 for item in files.read([path]) if item.error is None)
    return count / (time.perf_counter() - began)


def run_replay(path: Path, scratch: Path) -> tuple[float, float, dict[str, Any], str]:
    """(seconds, peak RSS in MB, summary, stderr) of ``loopbreaker replay`` on ``path``."""
    env = {
        **os.environ,
        "LOOPBREAKER_PROJECT": PROJECT,
        "LOOPBREAKER_NOTIFIER": f"file:{scratch / 'notifications'}",
    }
    began = time.perf_counter()
    with (scratch / "summary.json").open("w") as out:
        child = subprocess.Popen(
            [str(LOOPBREAKER), "replay", str(path), "--format", "json"],
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert child.stderr is not None
        stderr = child.stderr.read().decode(errors="replace")
        # wait4: this child's own rusage (RUSAGE_CHILDREN is the maximum over all of them).
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - began
    if child.returncode != 0:
        raise SystemExit(f"replay of {path} failed ({child.returncode}):\n{stderr[-2000:]}")
    summary = json.loads((scratch / "summary.json").read_text())
    return elapsed, usage.ru_maxrss / 1024, summary, stderr


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
        # Every replay before any json.load here: a child forked from a large parent
        # counts the parent's pages in its ru_maxrss until it execs.
        replays = {layout: run_replay(path, scratch) for layout, path in paths.items()}
        for layout, path in paths.items():
            seconds, rss_mb, summary, stderr = replays[layout]
            load_rate, loaded = json_load_rate(path, layout)
            reading = reader_rate(path)
            size_mb = path.stat().st_size / 1e6
            rate = summary["read"] / seconds
            ratio = rate / load_rate
            print(f"replay of {loaded:,} entries, {layout}, {size_mb:,.0f} MB")
            print(
                f"    read {summary['read']:,}, accepted {summary['accepted']:,} "
                f"(ignored {summary['ignored']:,}), rejected {summary['rejected_total']:,}, "
                f"incidents {len(summary['incidents'])}"
            )
            print(f"    stderr lines at the default verbosity   {len(stderr.splitlines())}")
            print(
                f"    peak RSS                                {rss_mb:8.1f} MB "
                f"(target <= {RSS_TARGET_MB:.0f} MB)"
            )
            print(
                f"    replay                                  {rate:8,.0f} entries/s "
                f"({seconds:.1f} s)"
            )
            print(f"    json.load of the same file              {load_rate:8,.0f} entries/s")
            print(f"    ratio {ratio:.1%} (target >= {THROUGHPUT_TARGET:.0%})")
            print(
                f"    the streaming reader alone              {reading:8,.0f} entries/s "
                f"({reading / load_rate:.0%} of json.load)"
            )
            if summary["read"] != loaded:
                missed.append(f"{layout}: read {summary['read']} of {loaded}")
            if rss_mb > RSS_TARGET_MB:
                missed.append(f"{layout}: peak RSS {rss_mb:.0f} MB")
            if ratio < THROUGHPUT_TARGET:
                missed.append(f"{layout}: throughput {ratio:.0%} of json.load")
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"RUSAGE_CHILDREN.ru_maxrss over the replays: {children:.1f} MB")
    for miss in missed:
        print(f"MISS {miss}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
