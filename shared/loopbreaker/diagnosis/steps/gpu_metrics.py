"""GPU faults as NVIDIA's dcgm-exporter reports them, read as step 3 reads node logs (pure).

``DCGM_FI_DEV_XID_ERRORS`` is a gauge, "Value of the last XID error encountered"
(NVIDIA/dcgm-exporter 4.5.3-4.8.2, ``etc/default-counters.csv``), one series per GPU. The
exporter labels it ``gpu`` (index), ``UUID``, ``pci_bus_id``, ``device``, ``modelName`` and,
when it knows the node, ``Hostname`` (``internal/pkg/rendermetrics/render_metrics.go``); its
Helm chart sets ``NODE_NAME`` from ``spec.nodeName``, which becomes ``Hostname``
(``deployment/templates/daemonset.yaml``). With pod mapping on (the chart's default
``DCGM_EXPORTER_KUBERNETES=true``) it adds the pod using the GPU as ``pod``, ``namespace``,
``container`` (``internal/pkg/transformation/kubernetes.go``).

The collector then adds its own target labels. Where they collide and the target wins,
Prometheus keeps the exporter's as ``exported_pod``, ``exported_namespace``,
``exported_container``: the dcgm-exporter chart's ServiceMonitor has ``honorLabels: false``
(``deployment/values.yaml``), and Managed Service for Prometheus' PodMonitoring /
ClusterPodMonitoring (GKE's managed DCGM package) write the target's ``namespace``, ``pod``
and ``container`` the same way. So the workload's pod is ``exported_pod`` when there is
one, and ``pod`` only when no collector label took its place.

A gauge holds the *last* Xid, so a fault is a rise: a sample with an Xid other than the
sample before it on the same GPU (0 -> 79, 48 -> 79). A GPU already showing an Xid at its
first sample says nothing of when that Xid came; the same Xid twice without a reset in
between shows once. Each rise becomes a :class:`Signal` classed by NVIDIA's Xid catalog
(:mod:`loopbreaker.signals.xid`), as the driver's ``NVRM: Xid`` log line would be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from loopbreaker.diagnosis.metric_vocabulary import CLUSTER_LABELS, DCGM_XID_METRIC
from loopbreaker.model import Series, Signal, SignalKind
from loopbreaker.signals import xid

#: ``Signal.signature`` of a rise read from dcgm-exporter (not a catalog signature).
SIGNATURE = "dcgm.xid_errors"
#: Where the node is, first found: a label the scrape adds, then DCGM's own ``Hostname``.
NODE_LABELS = ("node", "kubernetes_node", "exported_node", "Hostname")
#: The exporter's own pod labels, as each collector leaves them.
_POD_LABELS = (("exported_pod", "pod"), ("exported_namespace", "namespace"))
_CONTAINER_LABELS = ("exported_container", "container")
#: ``container`` values of the exporter itself (its chart's container is ``exporter``; the
#: GPU Operator's ``nvidia-dcgm-exporter``): a target label, never the workload's.
_EXPORTER_CONTAINERS = frozenset({"exporter", "nvidia-dcgm-exporter", "dcgm-exporter"})
_KINDS: Mapping[xid.XidClass, SignalKind] = {
    xid.XidClass.HARDWARE: SignalKind.HARDWARE_FAILURE,
    xid.XidClass.APPLICATION: SignalKind.GPU_APPLICATION_ERROR,
}
#: The widest gap between two samples that still counts as one scrape apart.
_MAX_STEP = timedelta(minutes=2)


@dataclass(frozen=True)
class _Gpu:
    node: str
    gpu: str
    uuid: str


def _first(labels: Mapping[str, str], names: Sequence[str]) -> str | None:
    return next((labels[n] for n in names if labels.get(n)), None)


def _workload(labels: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """The pod, namespace and container using the GPU, if the exporter mapped one."""
    exporter_target = labels.get("container") in _EXPORTER_CONTAINERS
    found: list[str | None] = []
    for exported, own in _POD_LABELS:
        value = labels.get(exported) or None
        if value is None and not exporter_target and "exported_pod" not in labels:
            value = labels.get(own) or None
        found.append(value)
    container = labels.get(_CONTAINER_LABELS[0]) or (
        None if exporter_target else labels.get(_CONTAINER_LABELS[1]) or None
    )
    return found[0], found[1], container


def signals(series: Iterable[Series]) -> list[Signal]:
    """One signal per rise of a GPU's last Xid; series of one GPU (the exporter restarted,
    the target's labels changed) are read as one."""
    samples: dict[_Gpu, dict[datetime, float]] = {}
    labels_of: dict[_Gpu, Mapping[str, str]] = {}
    for s in series:
        if s.metric != DCGM_XID_METRIC:
            continue
        node = _first(s.labels, NODE_LABELS)
        if node is None:
            continue
        key = _Gpu(node, s.labels.get("gpu", ""), s.labels.get("UUID", ""))
        timeline = samples.setdefault(key, {})
        for sample in s.samples:
            timeline[sample.at] = max(timeline.get(sample.at, 0.0), sample.value)
        labels_of[key] = s.labels
    found: list[Signal] = []
    for key, timeline in sorted(samples.items(), key=lambda kv: (kv[0].node, kv[0].gpu)):
        previous: int | None = None
        for at in sorted(timeline):
            value = int(timeline[at])
            if previous is not None and value > 0 and value != previous:
                found.append(_signal(key, labels_of[key], at, previous, value))
            previous = value
    return found


def _signal(gpu: _Gpu, labels: Mapping[str, str], at: datetime, was: int, now: int) -> Signal:
    entry = xid.lookup(now)
    pod, namespace, container = _workload(labels)
    uuid = f" ({gpu.uuid})" if gpu.uuid else ""
    model = labels.get("modelName")
    return Signal(
        kind=_KINDS.get(entry.cls, SignalKind.GPU_ERROR),
        timestamp=at,
        severity="ERROR",
        cluster=_first(labels, CLUSTER_LABELS),
        node=gpu.node,
        namespace=namespace,
        pod=pod,
        container=container,
        reason=(
            f"Xid {entry.number} ({entry.cls.value}: {entry.name}) on GPU {gpu.gpu}{uuid}, per DCGM"
        ),
        accelerator=model,
        excerpt=f'{DCGM_XID_METRIC}{{gpu="{gpu.gpu}", Hostname="{gpu.node}"}} {was} -> {now}',
        signature=SIGNATURE,
    )


def is_dcgm(sig: Signal) -> bool:
    return sig.signature == SIGNATURE


def scrape_step(series: Iterable[Series]) -> timedelta:
    """The usual gap between two samples of one GPU (its scrape interval), at most two
    minutes: rises on different nodes within one step happened "at once"."""
    gaps = sorted(
        b.at - a.at
        for s in series
        if s.metric == DCGM_XID_METRIC
        for a, b in zip(s.samples, s.samples[1:], strict=False)
        if b.at > a.at
    )
    if not gaps:
        return timedelta(0)
    return min(gaps[len(gaps) // 2], _MAX_STEP)
