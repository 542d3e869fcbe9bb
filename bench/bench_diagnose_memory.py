"""``loopbreaker diagnose`` on big LogEntry files: peak memory and throughput against
``json.load``.

A generated file of ENTRIES realistic entries (about 1.5 kB each, as a GKE sink writes
them: container logs of the workload's pods with NCCL timeouts among them) is read by
``loopbreaker diagnose`` in a subprocess, once as JSON Lines and once as a JSON array. The
baseline, measured in the same run, is the json module reading the same file in its own
subprocess (``json.load``, or ``json.loads`` of each line: see ``measure.py``). Targets
(issue 16): peak RSS at most 300 MB, at least half of json's entries per second, at most
100 stderr lines at default verbosity. ``replay`` has its own benchmark,
``bench/bench_replay_memory.py``.

Run: ``python bench/bench_diagnose_memory.py [--entries N]`` (``make bench`` runs it).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import measure

CLI = Path(sys.executable).with_name("loopbreaker")
CLUSTER, NAMESPACE, JOBSET = "tpu-cluster-prod", "default", "llama3-70b-training"
START = datetime(2026, 5, 20, 7, 45, tzinfo=UTC)
MAX_RSS_MB = 300.0
#: Issue 41's goals for ``diagnose`` on each layout, entries per second as a share of the
#: json module reading the same file, and what 8e4c544 (before the catalog) measured.
GOALS = {"jsonl": 0.90, "array": 0.60}
BEFORE = {"jsonl": 0.89, "array": 0.59}
MAX_STDERR_LINES = 100


def entry(n: int, rng: random.Random) -> dict[str, object]:
    at = START + timedelta(milliseconds=n * 9)
    stamp = at.isoformat().replace("+00:00", "Z")
    pod = f"{JOBSET}-slice-0-{n % 16}-{'abcde'[n % 5] * 5}"
    base = {
        "insertId": f"{n:012x}",
        "timestamp": stamp,
        "receiveTimestamp": stamp,
        "logName": "projects/customer-ai-project-123/logs/stdout",
        "severity": "INFO",
        "resource": {
            "type": "k8s_container",
            "labels": {
                "project_id": "customer-ai-project-123",
                "location": "us-east5",
                "cluster_name": CLUSTER,
                "namespace_name": NAMESPACE,
                "pod_name": pod,
                "container_name": "jax-tpu",
            },
        },
        "labels": {
            "k8s-pod/jobset_sigs_k8s_io/jobset-name": JOBSET,
            "k8s-pod/jobset_sigs_k8s_io/job-index": "0",
            "k8s-pod/batch_kubernetes_io/job-completion-index": str(n % 16),
            "compute.googleapis.com/resource_name": f"gke-{CLUSTER}-tpu-pool-3f9a2b1c-{n % 16:04d}",
        },
    }
    if n % 50_000 == 7:
        base["textPayload"] = "NCCL WARN Timeout: watchdog caught collective operation timeout"
        base["severity"] = "ERROR"
    else:
        loss = rng.random()
        base["textPayload"] = (
            f"step {n}: loss={loss:.6f} lr=3.0e-04 tokens/s=182734.5 mfu=0.54 "
            + "x" * (700 + n % 300)
        )
    return base


def generate(directory: Path, count: int) -> tuple[Path, Path]:
    rng = random.Random(7)
    jsonl, array = directory / "lines" / "logs.jsonl", directory / "array" / "logs.json"
    jsonl.parent.mkdir()
    array.parent.mkdir()
    with jsonl.open("w") as lines, array.open("w") as whole:
        whole.write("[\n")
        for n in range(count):
            text = json.dumps(entry(n, rng))
            lines.write(text + "\n")
            whole.write(("," if n else "") + text + "\n")
        whole.write("]\n")
    return jsonl, array


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200_000)
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        jsonl, array = generate(directory, args.entries)
        size = jsonl.stat().st_size / 1e6
        print(f"large files: {args.entries} entries, {size:.0f} MB as JSON Lines and as an array")
        context = [
            "--cluster", CLUSTER, "--namespace", NAMESPACE, "--workload", JOBSET,
            "--issue-time", "2026-05-20T08:15:00Z", "--offline",
        ]  # fmt: skip
        for label, layout, path in (("JSON Lines", "jsonl", jsonl), ("JSON array", "array", array)):
            base_rate = args.entries / measure.json_seconds(path, layout)
            done = measure.best([str(CLI), "diagnose", *context, "--telemetry", str(path.parent)])
            rate = args.entries / done.seconds
            ratio = rate / base_rate
            passed = (
                done.code == 0
                and done.peak_mb <= MAX_RSS_MB
                and ratio >= GOALS[layout]
                and done.stderr_lines <= MAX_STDERR_LINES
            )
            ok &= passed
            print(
                f"  diagnose {label:<10}: {rate:,.0f} entries/s ({ratio:.2f} x json's "
                f"{base_rate:,.0f}, goal >= {GOALS[layout]}, before {BEFORE[layout]} at 8e4c544), "
                f"peak {done.peak_mb:.0f} MB (goal <= {MAX_RSS_MB:.0f}, before 60-66 at "
                f"8e4c544), {done.stderr_lines} stderr lines, exit {done.code} "
                f"{'ok' if passed else 'MISSED'}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
