"""JobSet objects and the restart-attempt labels of their pods (API JSON, log entries,
``kube_pod_labels``). Pure.

Every name is kubernetes-sigs/jobset's:

- ``api/jobset/v1alpha2/jobset_types.go``: ``status.restarts`` (v0.2+; the global restarts,
  RestartJobSet / RestartJobSetAndIgnoreMaxRestarts), ``status.restartsCountTowardsMax``
  (v0.6.0+), ``status.replicatedJobsStatus[].jobRestarts[]`` (v0.12.0+; the RestartJob /
  RestartJobAndIgnoreMaxRestarts actions, one Job recreated), ``status.
  currentInPlaceRestartAttempt`` (v0.11.0+, feature gate InPlaceRestart), the
  ``RestartingJobSet`` condition type (v0.12.0+) and ``Failed``; label
  ``jobset.sigs.k8s.io/jobset-uid`` (``JobSetUIDKey``, on pods since v0.9.0).
- ``pkg/constants/constants.go``: ``RestartsKey = "jobset.sigs.k8s.io/restart-attempt"``
  (v0.2+) and ``JobRestartAttemptKey = "jobset.sigs.k8s.io/job-restart-attempt"``
  (v0.12.0, only with the RestartJob feature gate); ``labelAndAnnotateObject`` in
  ``pkg/controllers/jobset_controller.go`` puts both on every child Job and pod, with
  ``jobset.sigs.k8s.io/replicatedjob-name`` and ``job-index``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from loopbreaker.errors import InvalidContext
from loopbreaker.model.evidence import JobSetInfo, RestartAttemptSeen, Series
from loopbreaker.timeutil import parse_rfc3339

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_PLURAL = "jobsets"
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
JOB_RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/job-restart-attempt"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
#: The condition the JobSet controller sets True when a failure policy restarts it
#: (v0.12.0 ``JobSetRestarting``), and its terminal ``Failed``.
RESTARTING_CONDITION = "RestartingJobSet"
FAILED_CONDITION = "Failed"

#: GKE writes a pod's labels into its container log entries as ``k8s-pod/<key>``, the
#: dots of the key's prefix as underscores (see examples/telemetry/README.md).
_LOG_PREFIX = "k8s-pod/"

#: kube-state-metrics' ``kube_pod_labels``: each allow-listed label as ``label_<key>``,
#: every character outside ``[a-zA-Z0-9_]`` an underscore (``--metric-labels-allowlist
#: pods=[jobset.sigs.k8s.io/restart-attempt,...]``; kube-state-metrics v2
#: docs/metrics/workload/pod-metrics.md).
POD_LABELS_METRIC = "kube_pod_labels"


def log_label(key: str) -> str:
    """The LogEntry label GKE writes for a pod label."""
    prefix, _, name = key.partition("/")
    return f"{_LOG_PREFIX}{prefix.replace('.', '_')}/{name}"


def metric_label(key: str) -> str:
    """The ``kube_pod_labels`` label kube-state-metrics writes for a pod label."""
    return "label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in key)


def jobset_info(obj: Mapping[str, Any]) -> JobSetInfo | None:
    """A JobSet object; None for anything else (another kind in the same List)."""
    kind = obj.get("kind")
    api = obj.get("apiVersion")
    if kind not in (None, "JobSet") or (isinstance(api, str) and not api.startswith(JOBSET_GROUP)):
        return None
    meta = _map(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    status = _map(obj.get("status"))
    job_restarts: int | None = None
    for rjob in _list(status.get("replicatedJobsStatus")):
        counts = _list(_map(rjob).get("jobRestarts"))
        if counts:
            job_restarts = (job_restarts or 0) + sum(n for n in counts if _is_int(n))
    restarting_since = failed_at = None
    failed_reason = None
    for cond in _list(status.get("conditions")):
        cond = _map(cond)
        if cond.get("status") != "True":
            continue
        if cond.get("type") == RESTARTING_CONDITION:
            restarting_since = _time(cond.get("lastTransitionTime"))
        elif cond.get("type") == FAILED_CONDITION:
            failed_at = _time(cond.get("lastTransitionTime"))
            failed_reason = _str(cond.get("reason"))
    owner = next(
        (_map(o) for o in _list(meta.get("ownerReferences")) if _map(o).get("controller")),
        {},
    )
    return JobSetInfo(
        name=name,
        namespace=_str(meta.get("namespace")),
        uid=_str(meta.get("uid")),
        created_at=_time(meta.get("creationTimestamp")),
        # ``restarts`` is omitempty before v0.10.0: a status without it has not restarted.
        restarts=_int(status.get("restarts"), 0 if status else None),
        restarts_count_towards_max=_int(status.get("restartsCountTowardsMax"), None),
        job_restarts=job_restarts,
        in_place_restarts=_int(status.get("currentInPlaceRestartAttempt"), None),
        restarting_since=restarting_since,
        failed_reason=failed_reason,
        failed_at=failed_at,
        owner_kind=_str(owner.get("kind")),
        owner_name=_str(owner.get("name")),
    )


def pod_attempt_fields(labels: Mapping[str, str]) -> dict[str, Any]:
    """The restart-attempt fields of :class:`PodInfo` from a pod's labels."""
    return {
        "restart_attempt": _label_int(labels.get(RESTART_ATTEMPT_LABEL)),
        "job_restart_attempt": _label_int(labels.get(JOB_RESTART_ATTEMPT_LABEL)),
        "jobset_uid": labels.get(UID_LABEL) or None,
        "job_key": _job_key(labels.get(REPLICATED_JOB_LABEL), labels.get(JOB_INDEX_LABEL)),
    }


_LOG_NAME = log_label(NAME_LABEL)
_LOG_UID = log_label(UID_LABEL)
_LOG_ATTEMPT = log_label(RESTART_ATTEMPT_LABEL)
_LOG_JOB_ATTEMPT = log_label(JOB_RESTART_ATTEMPT_LABEL)
_LOG_RJOB = log_label(REPLICATED_JOB_LABEL)
_LOG_INDEX = log_label(JOB_INDEX_LABEL)


_Key = tuple[str, str | None, str | None, str | None, int, str | None]


class LogAttempts:
    """Restart-attempt labels seen on log entries: the first and last time of each value
    per JobSet (uid) and Job, so memory is bounded by the attempts, not the entries."""

    def __init__(self) -> None:
        self._seen: dict[_Key, list[datetime]] = {}

    def add(self, entry: object) -> None:
        if not isinstance(entry, Mapping):
            return
        labels = entry.get("labels")
        if not isinstance(labels, Mapping) or _LOG_ATTEMPT not in labels:
            return
        name = labels.get(_LOG_NAME)
        stamp = entry.get("timestamp")
        if not isinstance(name, str) or not name or not isinstance(stamp, str):
            return
        at = _time(stamp)
        if at is None:
            return
        resource = _map(_map(entry.get("resource")).get("labels"))
        namespace = _str(resource.get("namespace_name"))
        cluster = _str(resource.get("cluster_name"))
        uid = labels.get(_LOG_UID)
        uid = uid if isinstance(uid, str) and uid else None
        job = _job_key(labels.get(_LOG_RJOB), labels.get(_LOG_INDEX))
        for value, of_job in (
            (labels.get(_LOG_ATTEMPT), None),
            (labels.get(_LOG_JOB_ATTEMPT) if job else None, job),
        ):
            attempt = _label_int(value)
            if attempt is None:
                continue
            key = (name, namespace, uid, of_job, attempt, cluster)
            span = self._seen.get(key)
            if span is None:
                self._seen[key] = [at, at]
            else:
                span[0], span[1] = min(span[0], at), max(span[1], at)

    def seen(self) -> tuple[RestartAttemptSeen, ...]:
        return tuple(
            RestartAttemptSeen(name, ns, at, attempt, uid, job, cluster)
            for (name, ns, uid, job, attempt, cluster), span in sorted(
                self._seen.items(), key=lambda kv: (kv[1][0], kv[0][4])
            )
            for at in dict.fromkeys(span)
        )


_METRIC_NAME = metric_label(NAME_LABEL)
_METRIC_UID = metric_label(UID_LABEL)
_METRIC_ATTEMPT = metric_label(RESTART_ATTEMPT_LABEL)
_METRIC_JOB_ATTEMPT = metric_label(JOB_RESTART_ATTEMPT_LABEL)
_METRIC_RJOB = metric_label(REPLICATED_JOB_LABEL)
_METRIC_INDEX = metric_label(JOB_INDEX_LABEL)


def metric_attempts(series: Iterable[Series]) -> list[RestartAttemptSeen]:
    """Restart attempts from ``kube_pod_labels`` series that carry the allow-listed
    labels: one observation per sample (the pod existed with that label then)."""
    out: list[RestartAttemptSeen] = []
    for s in series:
        if s.metric != POD_LABELS_METRIC:
            continue
        name = s.labels.get(_METRIC_NAME)
        if not name:
            continue
        namespace = s.labels.get("namespace") or s.labels.get("exported_namespace")
        cluster = s.labels.get("cluster") or s.labels.get("cluster_name")
        uid = s.labels.get(_METRIC_UID) or None
        job = _job_key(s.labels.get(_METRIC_RJOB), s.labels.get(_METRIC_INDEX))
        for value, of_job in (
            (s.labels.get(_METRIC_ATTEMPT), None),
            (s.labels.get(_METRIC_JOB_ATTEMPT) if job else None, job),
        ):
            attempt = _label_int(value)
            if attempt is None:
                continue
            out += [
                RestartAttemptSeen(
                    name, namespace, sample.at, attempt, uid, of_job, cluster, origin="metric"
                )
                for sample in s.samples
                if sample.value > 0
            ]
    return out


#: Labels that place a restart series (whose job, which namespace, which cluster).
_PLACING = ("framework", "job_namespace", "namespace", "jobset_name", "cluster", "cluster_name")
_SEEN_LIMIT = 12


def restart_series_seen(series: Iterable[Series] | None) -> tuple[str, ...] | None:
    """Each distinct restart series in short, ``metric{framework=…, job_namespace=…}``, at
    most a dozen: before scoping, so a hint can say what the source did hold."""
    if series is None:
        return None
    seen: dict[str, None] = {}
    for s in series:
        placed = ", ".join(f"{k}={s.labels[k]}" for k in _PLACING if s.labels.get(k))
        seen[f"{s.metric}{{{placed}}}"] = None
    names = sorted(seen)
    extra = len(names) - _SEEN_LIMIT
    return tuple(names[:_SEEN_LIMIT]) + ((f"{extra} more",) if extra > 0 else ())


def _job_key(rjob: object, index: object) -> str | None:
    if isinstance(rjob, str) and rjob and isinstance(index, str) and index.isdigit():
        return f"{rjob}-{index}"
    return None


def _label_int(value: object) -> int | None:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _int(value: object, default: int | None) -> int | None:
    return value if _is_int(value) else default  # type: ignore[return-value]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_rfc3339(value)
    except (InvalidContext, ValueError):
        return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
