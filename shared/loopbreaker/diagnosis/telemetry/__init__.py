"""Offline telemetry: the files an SRE can dump with gcloud, promtool and kubectl.

Directory layout (every file optional):
  logs.json        LogEntry array (``gcloud logging read --format=json``)
  *.jsonl          one LogEntry per line, anywhere under the directory
  */**/*.json      LogEntries in subdirectories, as a log sink writes them to Cloud Storage
  metrics.om       OpenMetrics text with timestamps (seconds), ending in ``# EOF``
  nodes.json       ``kubectl get nodes -o json`` (pressure conditions too)
  pods.json        ``kubectl get pods -A -o json`` (container states, limits, reasons)
  jobs.json        ``kubectl get tfjobs,pytorchjobs,trainjobs -A -o json`` (Restarting
                   conditions; a TrainJob's Failed condition)
  jobsets.json     ``kubectl get jobsets -A -o json`` (status.restarts, restartsCountTowardsMax,
                   replicatedJobsStatus[].jobRestarts, conditions, uid and creation time)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from loopbreaker.diagnosis import trainjobs
from loopbreaker.diagnosis.jobsets import LogAttempts, jobset_info, restart_series_seen
from loopbreaker.diagnosis.kube_objects import items_of, job_restart, node_info, pod_info
from loopbreaker.diagnosis.metric_vocabulary import (
    DCGM_XID_METRIC,
    canonical,
    choose,
    missing_reason,
)
from loopbreaker.diagnosis.progress import CheckpointLog
from loopbreaker.diagnosis.telemetry.unreadable import (
    LogFileCheck,
    read_json_document,
    require_file,
)
from loopbreaker.errors import InvalidLogEntry, InvalidTelemetry
from loopbreaker.model import (
    Evidence,
    EvidenceKind,
    NodeInfo,
    PodInfo,
    Sample,
    Series,
    Signal,
    SignalKind,
    SourceStatus,
)
from loopbreaker.model.evidence import JobSetInfo
from loopbreaker.signals import files
from loopbreaker.signals.classify import Identity, Quiet, classify, identity, triage
from loopbreaker.timeutil import from_epoch

METRICS_FILE = "metrics.om"
LOGS_FILE = "logs.json"
NODES_FILE = "nodes.json"
PODS_FILE = "pods.json"
JOBS_FILE = "jobs.json"
JOBSETS_FILE = "jobsets.json"

#: Which metric feeds which kind of evidence, in both vocabularies (metric_vocabulary):
#: a metrics.om dumped from Managed Prometheus or from a kube-prometheus-stack.
METRIC_KINDS: dict[str, EvidenceKind] = {
    "kube_jobset_restarts": EvidenceKind.RESTARTS,
    "training_operator_jobs_restarted_total": EvidenceKind.RESTARTS,
    "kubernetes_io:node_pool_interruption_count": EvidenceKind.INTERRUPTIONS,
    "kubernetes_io:node_status_condition": EvidenceKind.NODE_CONDITIONS,
    "kube_node_status_condition": EvidenceKind.NODE_CONDITIONS,
    "kube_pod_status_phase": EvidenceKind.POD_PHASES,
    "kubernetes_io:pod_status_unschedulable": EvidenceKind.UNSCHEDULABLE,
    "kube_pod_status_unschedulable": EvidenceKind.UNSCHEDULABLE,
    "kube_pod_container_status_last_terminated_reason": EvidenceKind.POD_REASONS,
    "kube_pod_container_status_terminated_reason": EvidenceKind.POD_REASONS,
    "kube_pod_container_status_waiting_reason": EvidenceKind.POD_REASONS,
    "kube_pod_status_reason": EvidenceKind.POD_REASONS,
    "container_memory_working_set_bytes": EvidenceKind.MEMORY,
    "kube_pod_container_resource_limits": EvidenceKind.MEMORY,
    "kube_pod_info": EvidenceKind.POD_INFO,
    # The JobSet restart-attempt pod labels, where kube-state-metrics allow-lists them.
    "kube_pod_labels": EvidenceKind.POD_INFO,
}

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^(?P<name>{_NAME})(?:\{{(?P<labels>.*)\}})?\s+(?P<rest>.+)$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass
class LogRead:
    """Signals read from log files, with the entries that were not LogEntries."""

    signals: list[Signal] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (where, reason)
    files: list[str] = field(default_factory=list)
    #: JobSet restart-attempt pod labels the entries carry (loopbreaker.diagnosis.jobsets).
    attempts: LogAttempts = field(default_factory=LogAttempts)
    #: Checkpoint saves the job logged (loopbreaker.diagnosis.progress).
    checkpoints: CheckpointLog = field(default_factory=CheckpointLog)


def parse_openmetrics(text: str, *, source: str = METRICS_FILE) -> dict[str, list[Series]]:
    """Parse OpenMetrics (or Prometheus text) with timestamps into series by metric name."""
    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[Sample]] = {}
    lines = text.splitlines()
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    if last != "# EOF":
        # OpenMetrics ends every exposition with "# EOF"; without it the file may be cut short.
        raise InvalidTelemetry(
            f"{source}: does not end with '# EOF'; the file may be truncated "
            "(append '# EOF' if it is complete)"
        )
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise InvalidTelemetry(f"{source} line {number}: not a metric sample: {raw[:120]!r}")
        labels = _parse_labels(match["labels"] or "", source, number)
        parts = match["rest"].split()
        if len(parts) < 2:
            raise InvalidTelemetry(
                f"{source} line {number}: sample of {match['name']} has no timestamp; "
                "offline metrics need one (unix seconds)"
            )
        try:
            value = float(parts[0])
            stamp = float(parts[1])
        except ValueError as exc:
            raise InvalidTelemetry(
                f"{source} line {number}: value or timestamp is not a number: {raw[:120]!r}"
            ) from exc
        if not math.isfinite(stamp):
            raise InvalidTelemetry(f"{source} line {number}: timestamp is not finite")
        if stamp > 1e11:  # milliseconds, as the Prometheus text format writes them
            stamp /= 1000.0
        try:
            at = from_epoch(stamp)
        except ValueError as exc:
            raise InvalidTelemetry(f"{source} line {number}: {exc}") from exc
        key = (match["name"], tuple(sorted(labels.items())))
        series.setdefault(key, []).append(Sample(at, value))
    out: dict[str, list[Series]] = {}
    for (name, labels_t), samples in series.items():
        samples.sort(key=lambda s: s.at)
        out.setdefault(name, []).append(Series(name, dict(labels_t), tuple(samples)))
    return out


def _parse_labels(text: str, source: str, number: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            raise InvalidTelemetry(f"{source} line {number}: malformed labels {{{text[:120]}}}")
        value = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], match.group(2))
        labels[match.group(1)] = value
        pos = match.end()
    return labels


class _Span:
    """The first and the last entry of one identity that matched no rule: they tell what
    the logs name (workloads, clusters, the time span), and memory stays bounded by the
    evidence, not by the file. Entries stay undecided (raw) until the end."""

    __slots__ = ("first", "first_at", "last", "last_at")

    def __init__(self, entry: object, at: datetime | None) -> None:
        self.first = self.last = entry
        self.first_at = self.last_at = at

    def add(self, entry: object, at: datetime | None) -> None:
        if at is None:
            return
        if self.first_at is None or at < self.first_at:
            self.first, self.first_at = entry, at
        if self.last_at is None or at > self.last_at:
            self.last, self.last_at = entry, at

    def signals(self) -> list[Signal]:
        ends = [self.first] if self.first is self.last else [self.first, self.last]
        return [e if isinstance(e, Signal) else classify(e) for e in ends]


def read_logs(paths: Iterable[Path], root: Path | None = None) -> LogRead:
    """Classify every entry of the log files (JSON arrays, JSON Lines or one object each),
    streamed: memory holds one entry and the evidence kept, not the file. An entry that
    is not a LogEntry is listed in ``rejected``; a file whose structure breaks is an
    InvalidTelemetry."""
    result = LogRead()
    spans: dict[Identity, _Span] = {}
    for path in paths:
        name = str(path.relative_to(root)) if root is not None else path.name
        result.files.append(name)
        # A file nothing of which reads is unreadable, not a run of rejected entries.
        check = LogFileCheck(path, name, document=name == LOGS_FILE)
        for item in files.read([path]):
            if item.error is not None:
                if item.fatal:
                    raise InvalidTelemetry(f"{item.location(name)}: {item.error}")
                check.refused(item)
                result.rejected.append((item.location(name), item.error))
                continue
            check.read()
            value = item.value
            result.attempts.add(value)
            result.checkpoints.add(value)
            try:
                found = triage(value)
            except InvalidLogEntry as exc:
                check.not_an_entry(item, str(exc))
                result.rejected.append((item.location(name), str(exc)))
                continue
            if isinstance(found, Quiet):
                key, at, kept = found.identity, found.timestamp, value
            elif found.kind is SignalKind.UNRECOGNIZED:
                key, at, kept = identity(found), found.timestamp, found
            else:
                result.signals.append(found)
                continue
            span = spans.get(key)
            if span is None:
                spans[key] = _Span(kept, at)
            else:
                span.add(kept, at)
        check.finish()
    for span in spans.values():
        result.signals += span.signals()
    return result


def log_files(directory: Path) -> list[Path]:
    """logs.json, every *.jsonl, and *.json below subdirectories (Cloud Storage sink layout:
    ``LOG_ID/YYYY/MM/DD/HH:MM:SS_HH:MM:SS_S0.json``, one LogEntry per line)."""
    found = {p for p in directory.rglob("*.jsonl") if p.is_file()}
    found |= {p for p in directory.glob("*/**/*.json") if p.is_file()}
    files = sorted(found)
    top = directory / LOGS_FILE
    if require_file(top, LOGS_FILE):
        files.insert(0, top)
    return files


def _read_json(path: Path) -> Any:
    return read_json_document(path)


def _objects(path: Path, kind: str) -> list[Any]:
    document = _read_json(path)
    if not (
        isinstance(document, list)
        or isinstance(document, dict)
        and ("items" in document or "metadata" in document)
    ):
        raise InvalidTelemetry(
            f"{path.name}: expected the output of 'kubectl get {kind} -o json' "
            f"(a List with items), got {type(document).__name__}"
        )
    return items_of(document)


def load_nodes(path: Path) -> tuple[NodeInfo, ...]:
    return tuple(n for n in (node_info(i) for i in _objects(path, "nodes")) if n)


def load_pods(path: Path) -> tuple[PodInfo, ...]:
    return tuple(p for p in (pod_info(i) for i in _objects(path, "pods -A")) if p)


def load_jobsets(path: Path) -> tuple[JobSetInfo, ...]:
    return tuple(j for j in (jobset_info(i) for i in _objects(path, "jobsets -A")) if j)


def load_directory(directory: Path) -> Evidence:
    """Read every telemetry file present; a missing file marks its evidence unavailable."""
    if not directory.exists():
        raise InvalidTelemetry(f"telemetry directory {directory} does not exist")
    if not directory.is_dir():
        raise InvalidTelemetry(f"telemetry path {directory} is not a directory")
    sources: dict[EvidenceKind, SourceStatus] = {}
    values: dict[str, Any] = {}

    metrics_path = directory / METRICS_FILE
    if metrics_path.is_file():
        try:
            text = metrics_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidTelemetry(f"cannot read {metrics_path}: {exc}") from exc
        parsed = parse_openmetrics(text)
        present = set(parsed)
        for name, kind in METRIC_KINDS.items():
            found = tuple(canonical(s) for s in parsed.get(name, ()))
            values[kind.value] = values.get(kind.value, ()) + found
            if choose(kind, present) is None:
                # Neither vocabulary's names nor their exporter: the file cannot show it.
                reason = missing_reason(kind, METRICS_FILE)
                sources[kind] = SourceStatus(f"file:{METRICS_FILE}", False, reason)
            else:
                sources[kind] = SourceStatus(f"file:{METRICS_FILE}", True)
        values["restart_series_seen"] = restart_series_seen(values.get("restarts", ()))
        if parsed.get(DCGM_XID_METRIC):
            # Recorded only when present: most dumps hold no GPU series, and none is no
            # gap in the evidence of a cluster that runs no dcgm-exporter.
            values["gpu_xids"] = tuple(parsed[DCGM_XID_METRIC])
            sources[EvidenceKind.GPU_XIDS] = SourceStatus(f"file:{METRICS_FILE}", True)
    else:
        for kind in METRIC_KINDS.values():
            sources[kind] = SourceStatus(f"file:{METRICS_FILE}", False, f"{METRICS_FILE} not found")

    files = log_files(directory)
    rejected: tuple[tuple[str, str], ...] = ()
    if files:
        logs = read_logs(files, directory)
        values["signals"] = tuple(logs.signals)
        values["log_restart_attempts"] = logs.attempts.seen()
        values["checkpoints"] = logs.checkpoints.marks()
        rejected = tuple(logs.rejected)
        sources[EvidenceKind.LOGS] = SourceStatus("file:" + ",".join(logs.files), True)
    else:
        sources[EvidenceKind.LOGS] = SourceStatus(
            f"file:{LOGS_FILE}", False, f"no {LOGS_FILE} or *.jsonl found"
        )

    jobs_path = directory / JOBS_FILE
    if require_file(jobs_path, JOBS_FILE):
        jobs = _objects(jobs_path, "tfjobs,pytorchjobs,trainjobs")
        # The jobs' Restarting conditions are restart reports like the operator's Events.
        job_signals = tuple(r for r in (job_restart(i) for i in jobs) if r)
        # TrainJobs (and JobSets a TrainJob owns) name the workload and its Failed reason.
        job_signals += trainjobs.signals(jobs, f"file:{JOBS_FILE}")
        values["signals"] = values.get("signals", ()) + job_signals
        log_status = sources.get(EvidenceKind.LOGS)
        if log_status is None or not log_status.available:
            # "partial": the jobs' conditions are no log, and rule no log signal out.
            sources[EvidenceKind.LOGS] = SourceStatus(
                f"file:{JOBS_FILE}", True, "partial: job conditions only, no log files"
            )

    jobsets_path = directory / JOBSETS_FILE
    if require_file(jobsets_path, JOBSETS_FILE):
        # Recorded only when present, like jobs.json: most setups dump no JobSet objects.
        values["jobsets"] = load_jobsets(jobsets_path)
        sources[EvidenceKind.JOBSETS] = SourceStatus(f"file:{JOBSETS_FILE}", True)
        restarts = sources.get(EvidenceKind.RESTARTS)
        if restarts is None or not restarts.available:
            # The JobSet's own counters are restart data: step 1 is not without a source.
            sources[EvidenceKind.RESTARTS] = SourceStatus(
                f"file:{JOBSETS_FILE}",
                True,
                f"partial: JobSet status only, {METRICS_FILE} not found",
            )

    for name, kind, loader, attr in (
        (NODES_FILE, EvidenceKind.NODES, load_nodes, "nodes"),
        (PODS_FILE, EvidenceKind.PODS, load_pods, "pods"),
    ):
        path = directory / name
        if require_file(path, name):
            values[attr] = loader(path)
            sources[kind] = SourceStatus(f"file:{name}", True)
        else:
            sources[kind] = SourceStatus(f"file:{name}", False, f"{name} not found")

    return Evidence(sources=sources, rejected_entries=rejected, **values)
