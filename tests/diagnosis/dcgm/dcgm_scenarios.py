"""Telemetry directories whose GPU faults only NVIDIA's dcgm-exporter saw (no node log).

The cluster, nodes, pods and restarts are ``gpu-xid-application-every-rank``'s (4 A3 High
nodes of 8 H100, restarts 2 -> 4 at T-9.4m and T+2.6m, nodes Ready throughout); its
logs.json is left out. ``DCGM_FI_DEV_XID_ERRORS`` is added per GPU, scraped every 30 s
with a few seconds between nodes, with the labels each collector leaves:

- the exporter's own (NVIDIA/dcgm-exporter 4.5.3-4.8.2, internal/pkg/rendermetrics/
  render_metrics.go): ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``,
  ``Hostname`` (the chart's NODE_NAME), ``DCGM_FI_DRIVER_VERSION`` (a ``label`` row of
  etc/default-counters.csv), and the pod using the GPU (internal/pkg/transformation/
  kubernetes.go: ``pod``, ``namespace``, ``container``);
- Managed Service for Prometheus (GKE's managed DCGM package, a ClusterPodMonitoring):
  resource labels ``project_id``, ``location``, ``cluster``, ``namespace``, ``job``,
  ``instance`` and the target's ``pod`` and ``container`` (TargetLabels.metadata default
  for ClusterPodMonitoring), so the exporter's pod labels become ``exported_*``;
- kube-prometheus-stack with the GPU Operator's ServiceMonitor (``honorLabels: false``,
  as the dcgm-exporter chart's deployment/values.yaml): the target's ``namespace``,
  ``pod``, ``container``, ``service``, ``endpoint``, ``job``, ``instance`` win, no cluster
  label, and the exporter's pod labels become ``exported_*``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from harness.kube_prometheus_stack import rewrite

from loopbreaker.timeutil import parse_rfc3339

ROOT = Path(__file__).resolve().parents[3]
BASE = ROOT / "examples" / "telemetry" / "gpu-xid-application-every-rank"
SPEC = json.loads((BASE / "scenario.json").read_text())
ISSUE = parse_rfc3339(SPEC["context"]["issue_time"])
FIRST = ISSUE - timedelta(minutes=9.4)
SECOND = ISSUE + timedelta(minutes=2.6)
#: Node -> (physical host, workload pod), from the base scenario's nodes.json and pods.json.
NODES = {
    "gke-a3-kernels-use5-a3-pool-ede44a66-tco9": "moe-16b-fp8-workers-0-0-72j2h",
    "gke-a3-kernels-use5-a3-pool-ede44a66-brei": "moe-16b-fp8-workers-0-1-tcwqx",
    "gke-a3-kernels-use5-a3-pool-ede44a66-wcq8": "moe-16b-fp8-workers-0-2-vdcf8",
    "gke-a3-kernels-use5-a3-pool-ede44a66-lqcp": "moe-16b-fp8-workers-0-3-fdwgx",
}
FAULTY_NODE = "gke-a3-kernels-use5-a3-pool-ede44a66-brei"
FAULTY_HOST = "85b08b8eb30a18bef5df4432f88310a8"
FAULTY_GPU = 5
#: Seconds after the 30 s scrape tick at which each node's exporter is scraped.
_OFFSETS = (0, 7, 13, 21)
_PCI = ("04", "05", "0a", "0b", "84", "85", "8a", "8b")
MANAGED, KPS = "managed-prometheus", "kube-prometheus-stack"

#: (node, gpu, unix seconds) -> the GPU's last Xid then.
Timeline = Callable[[str, int, float], int]


def hardware_twice(node: str, gpu: int, at: float) -> int:
    """Xid 48 (double-bit ECC) on one GPU at each restart; a GPU reset in between clears
    the field; every other GPU quiet."""
    if node != FAULTY_NODE or gpu != FAULTY_GPU:
        return 0
    first, second = FIRST.timestamp(), SECOND.timestamp()
    if first <= at < first + 300 or at >= second:
        return 48
    return 0


def application_every_gpu(node: str, gpu: int, at: float) -> int:
    """Every GPU of every node: Xid 13 at the first restart, Xid 31 at the second."""
    if at >= SECOND.timestamp():
        return 31
    return 13 if at >= FIRST.timestamp() else 0


def _labels(vocabulary: str, node: str, gpu: int) -> dict[str, str]:
    index = list(NODES).index(node)
    exporter = {
        "gpu": str(gpu),
        "UUID": f"GPU-{index:02d}{gpu:02d}a1c4-7d2e-4f6b-9c3a-5e8f0b2d{index}{gpu}1e",
        "pci_bus_id": f"00000000:{_PCI[gpu]}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": node,
        "DCGM_FI_DRIVER_VERSION": "550.90.07",
        "exported_container": "pytorch",
        "exported_namespace": SPEC["context"]["namespace"],
        "exported_pod": NODES[node],
    }
    if vocabulary == MANAGED:
        target = {
            "cluster": SPEC["context"]["cluster"],
            "location": "us-east5",
            "project_id": SPEC["context"]["project"],
            "namespace": "gke-managed-system",
            "job": "dcgm-exporter",
            "instance": f"{node}:dcgm-exporter-metrics",
            "pod": f"dcgm-exporter-{node[-4:]}x",
            "container": "dcgm-exporter",
        }
    else:
        target = {
            "container": "nvidia-dcgm-exporter",
            "endpoint": "gpu-metrics",
            "instance": f"10.52.{index}.7:9400",
            "job": "nvidia-dcgm-exporter",
            "namespace": "gpu-operator",
            "pod": f"nvidia-dcgm-exporter-{node[-4:]}q",
            "service": "nvidia-dcgm-exporter",
        }
    return {**exporter, **target}


def dcgm_lines(timeline: Timeline, vocabulary: str) -> list[str]:
    start = int((FIRST - timedelta(minutes=20)).timestamp())
    end = int((SECOND + timedelta(minutes=20)).timestamp())
    lines = [
        "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
    ]
    for index, node in enumerate(NODES):
        for gpu in range(8):
            labels = ",".join(f'{k}="{v}"' for k, v in _labels(vocabulary, node, gpu).items())
            for tick in range(start, end, 30):
                at = tick + _OFFSETS[index]
                value = timeline(node, gpu, at)
                lines.append(f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {value} {at}")
    return lines


def write(target: Path, timeline: Timeline, vocabulary: str = MANAGED) -> Path:
    """The base scenario without its logs, DCGM's series added to its metrics.om."""
    target.mkdir(parents=True)
    for name in ("nodes.json", "pods.json", "scenario.json"):
        shutil.copy(BASE / name, target / name)
    text = (BASE / "metrics.om").read_text()
    if vocabulary == KPS:
        text = rewrite(text)
    body = [line for line in text.splitlines() if line.strip() != "# EOF"]
    (target / "metrics.om").write_text(
        "\n".join(body + dcgm_lines(timeline, vocabulary)) + "\n# EOF\n"
    )
    return target


def context_args() -> list[str]:
    return [
        arg
        for key, value in SPEC["context"].items()
        if value
        for arg in (f"--{key.replace('_', '-')}", value)
    ]
