"""What every step shares: findings, series arithmetic, what belongs to the context (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from loopbreaker.model import (
    KUBEFLOW_CHIEF_TYPES,
    Context,
    Evidence,
    EvidenceKind,
    Finding,
    RootCause,
    Series,
    Signal,
    SignalKind,
)
from loopbreaker.timeutil import format_rfc3339

#: Failures of one host, inside the window plus remembered history, that make it faulty.
DEFAULT_FAULTY_HOST_FAILURES = 2


#: Observations of one node this close together are one failure episode.
DEFAULT_MERGE_WINDOW = timedelta(minutes=10)


#: How far back remembered host failures (from earlier incidents) still count.
DEFAULT_HOST_HISTORY = timedelta(days=7)


#: Pods Pending this long without being scheduled point to missing capacity; shorter
#: Pending spells are the normal gap while a restarted JobSet recreates its pods.
DEFAULT_PENDING_FOR = timedelta(minutes=5)


@dataclass(frozen=True)
class Thresholds:
    faulty_host_failures: int = DEFAULT_FAULTY_HOST_FAILURES
    merge_window: timedelta = DEFAULT_MERGE_WINDOW
    host_history: timedelta = DEFAULT_HOST_HISTORY
    pending_for: timedelta = DEFAULT_PENDING_FOR


DEFAULT_THRESHOLDS = Thresholds()


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Notes:
    """Findings per step, collected while the rules look at the evidence."""

    by_step: dict[int, list[Finding]] = field(default_factory=lambda: defaultdict(list))
    #: Evidence a source that was read lacks (``kind: what``), for ``missing_evidence``.
    missing: list[str] = field(default_factory=list)
    #: The same, per step: a step with a gap is ``partial``, not ``done``.
    gaps: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(
        self,
        step: int,
        message: str,
        cause: RootCause | None = None,
        *,
        supports: bool = True,
        source: str | None = None,
    ) -> None:
        self.by_step[step].append(Finding(step, message, cause, supports, source))

    def no_data(self, step: int, missing: str, source: str | None) -> None:
        """A source was read but holds nothing of the workload for this step: say so as a
        finding and in ``missing_evidence`` (the diagnosis is partial)."""
        what, _, detail = missing.partition(": ")
        self.add(step, f"No data: {detail}.", supports=False, source=source)
        self.missing.append(f"{what}: {detail} ({source or 'no source'})")
        self.gaps[step].append(f"{source or 'no source'}: no data: {detail}")

    def absence(
        self,
        step: int,
        ev: Evidence,
        kinds: Iterable[EvidenceKind],
        claim: str,
        what: str,
        cause: RootCause | None,
    ) -> None:
        """State the absence ``claim`` only when every kind of evidence that could have
        shown ``what`` was read whole; with part of it read, say what was not (never
        "no X" over missing evidence). Nothing at all when none of it was read: the step
        is then ``unavailable`` and says why."""
        wanted = tuple(dict.fromkeys(kinds))
        gaps = unread(ev, wanted)
        if not gaps:
            self.add(step, claim, cause, supports=False)
        elif len(gaps) < len(wanted):
            self.add(
                step,
                f"{what} not ruled out: none in the evidence read, but {'; '.join(gaps)}.",
                supports=False,
            )


#: A source's reason that starts so marks evidence read only in part (a live reader's
#: failed filter, skipped entries, nothing inside the window): it rules nothing out.
PARTIAL = "partial"


def read_whole(ev: Evidence, kind: EvidenceKind) -> bool:
    """The kind of evidence was read, and read whole."""
    status = ev.sources.get(kind)
    return status is not None and status.available and not _partly(status.reason)


def unread(ev: Evidence, kinds: Iterable[EvidenceKind]) -> list[str]:
    """The kinds not read whole, each with why (``pods: pods.json not found``)."""
    out: list[str] = []
    for kind in kinds:
        status = ev.sources.get(kind)
        if status is None:
            out.append(f"{kind.value}: not read")
        elif not status.available:
            out.append(f"{kind.value}: {status.reason or 'unavailable'}")
        elif _partly(status.reason):
            out.append(f"{kind.value}: {status.reason}")
    return out


def _partly(reason: str | None) -> bool:
    return (reason or "").startswith(PARTIAL)


def labels_match(labels: Mapping[str, str], wanted: Mapping[str, str | None]) -> bool:
    """A label that the series carries must equal the wanted value, when one is known."""
    return all(
        value is None or key not in labels or labels[key] == value for key, value in wanted.items()
    )


def increase(series: Series, start: datetime, end: datetime, *, from_zero: bool) -> float:
    """Increase of a counter-like series inside [start, end], counting resets.

    The baseline is the last sample at or before ``start``. A series with no sample before
    the window starts from its first sample (like PromQL ``increase``), or from zero when
    ``from_zero`` (a series that appears when its first event happens).
    """
    before = [s for s in series.samples if s.at <= start]
    inside = [s for s in series.samples if start < s.at <= end]
    if before:
        previous = before[-1].value
    elif from_zero:
        previous = 0.0
    elif inside:
        previous, inside = inside[0].value, inside[1:]
    else:
        return 0.0
    total = 0.0
    for sample in inside:
        if sample.value >= previous:
            total += sample.value - previous
        else:  # reset: the counter (or a recreated JobSet) started again from zero
            total += sample.value
        previous = sample.value
    return total


def covers(series: Iterable[Series], ctx: Context) -> bool:
    """Some series has a sample inside the window (data that ends before it, or starts
    after it, says nothing about the issue time)."""
    return any(ctx.in_window(sample.at) for s in series for sample in s.samples)


def window(ctx: Context) -> str:
    return f"{format_rfc3339(ctx.start_time)} to {format_rfc3339(ctx.end_time)}"


def last_value(series: Iterable[Series], end: datetime) -> float | None:
    values = [s.samples[-1].value for s in (_upto(x, end) for x in series) if s.samples]
    return max(values) if values else None


def _upto(series: Series, end: datetime) -> Series:
    return replace(series, samples=tuple(s for s in series.samples if s.at <= end))


COORDINATOR = {False: "worker 0 of slice 0", True: "the Chief or Master, else Worker 0"}


def with_role(sig: Signal, ctx: Context, ev: Evidence, signals: Sequence[Signal]) -> Signal:
    """Kubeflow: Worker 0 coordinates only when the job has no Chief or Master."""
    if sig.replica_type != "worker" or not sig.coordinator:
        return sig
    chief = any(
        p.replica_type in KUBEFLOW_CHIEF_TYPES for p in ev.pods or () if p.workload == ctx.workload
    ) or any(s.replica_type in KUBEFLOW_CHIEF_TYPES for s in signals if is_workload(s, ctx))
    return replace(sig, coordinator=False) if chief else sig


def unique(signals: Iterable[Signal]) -> list[Signal]:
    """Drop repeats of one entry: log export does not de-duplicate (logName, timestamp,
    insertId), and the same entry may sit in two dumped files."""
    seen: set[tuple[str | None, datetime | None, str]] = set()
    out: list[Signal] = []
    for sig in signals:
        if sig.insert_id is not None:
            key = (sig.log_name, sig.timestamp, sig.insert_id)
            if key in seen:
                continue
            seen.add(key)
        out.append(sig)
    return out


def in_scope(sig: Signal, ctx: Context, ev: Evidence) -> bool:
    """Inside the window and about this cluster (Compute audit entries name no cluster)."""
    if not ctx.in_window(sig.timestamp):
        return False
    if sig.cluster is not None:
        return sig.cluster == ctx.cluster
    if ctx.project and sig.project and sig.project != ctx.project:
        return False
    # A VM Compute could not create is named as an instance only: never a node.
    where = sig.node or sig.instance
    if where is None:
        return sig.kind in (SignalKind.JOB_RESTARTING, SignalKind.UNRECOGNIZED) or is_workload(
            sig, ctx
        )
    known = {n.name for n in ev.nodes or ()}
    return where in known or where.startswith(f"gke-{ctx.cluster}-") or not known


def is_workload(sig: Signal, ctx: Context) -> bool:
    if sig.workload is not None:
        return sig.workload == ctx.workload
    return bool(sig.pod and named_after(sig.pod, ctx.workload))


def named_after(pod: str, workload: str) -> bool:
    """A pod named as its workload's controller names them (``WORKLOAD-…``)."""
    return pod.startswith(workload + "-")


def hm(moment: datetime) -> str:
    return moment.strftime("%H:%M:%SZ")


def short_list(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
