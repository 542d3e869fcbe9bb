"""Configuration: ``LOOPBREAKER_*`` environment variables, parsed and validated once.

:func:`load_settings` is the only reader of the environment. A bad value raises
:class:`ConfigError` naming the variable, so a misconfigured function fails at start-up
instead of on the first event. Every default is a named module constant below.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from loopbreaker.approval.requests import parse_approvers
from loopbreaker.errors import ConfigError, LoopbreakerError
from loopbreaker.incidents.records import (
    DEFAULT_APPROVAL_TTL,
    DEFAULT_DEDUP_RETENTION,
    DEFAULT_GROUPING_WINDOW,
    DEFAULT_MAX_SIGNALS,
    DEFAULT_SETTLE_TIME,
    DEFAULT_STALE_AFTER,
)
from loopbreaker.model import WorkloadKind
from loopbreaker.remediation.rules import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_MAX_DELETIONS_PER_HOUR,
    DEFAULT_MAX_UNREADY_SHARE,
    OPT_OUT_LABEL,
    OPT_OUT_VALUE,
    DrainMode,
    HostAction,
    RemediationPolicy,
)

PREFIX = "LOOPBREAKER_"
#: No duration setting may exceed this (date arithmetic on it must not overflow).
MAX_DURATION = timedelta(days=366)

#: PromQL/Logging queries one diagnosis of one incident may spend.
DEFAULT_QUERY_BUDGET = 16
#: Incidents diagnosed per ``on_schedule`` call, so one call stays well inside its timeout.
DEFAULT_SETTLE_BATCH = 25
#: After `remediated`: how long the workload is watched, and how often it is looked at.
DEFAULT_VERIFY_WINDOW = timedelta(hours=2)
DEFAULT_VERIFY_EVERY = timedelta(minutes=10)
#: The embedded store of local runs (relative to the working directory).
DEFAULT_LOCAL_STORE = "sqlite:.loopbreaker/incidents.sqlite"
DEFAULT_CLOUD_STORE = "firestore"
DEFAULT_FIRESTORE_DATABASE = "(default)"
DEFAULT_COLLECTION_PREFIX = "loopbreaker"
DEFAULT_NOTIFIER = "log"
DEFAULT_LOG_LEVEL = "INFO"
#: Approval requests may not outlive this, however LOOPBREAKER_APPROVAL_TTL is set.
MAX_APPROVAL_TTL = timedelta(hours=24)
DEFAULT_SLACK_API_URL = "https://slack.com/api/"
#: Where Slack's ``response_url`` of an interaction points; others are never posted to.
DEFAULT_SLACK_RESPONSE_URL_PREFIX = "https://hooks.slack.com/"
DEFAULT_GOOGLE_CHAT_CERTS_URL = (
    "https://www.googleapis.com/service_accounts/v1/metadata/x509/chat@system.gserviceaccount.com"
)
DEFAULT_GOOGLE_CHAT_API_URL = "https://chat.googleapis.com"
#: The minimum length of LOOPBREAKER_ACTION_SIGNING_KEY (an HMAC key is as strong as it is long).
MIN_SIGNING_KEY_LENGTH = 16

_LIMITS = {"MAX_SIGNALS": (1, 10_000), "QUERY_BUDGET": (0, 1_000), "SETTLE_BATCH": (1, 1_000)}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class Runtime(StrEnum):
    """Where loopbreaker runs; it picks the default store."""

    CLOUD = "cloud"
    LOCAL = "local"


class StoreKind(StrEnum):
    FIRESTORE = "firestore"
    SQLITE = "sqlite"


@dataclass(frozen=True)
class StoreSpec:
    kind: StoreKind
    path: Path | None = None

    def __str__(self) -> str:
        return f"sqlite:{self.path}" if self.kind is StoreKind.SQLITE else self.kind.value


@dataclass(frozen=True)
class NotifierSpec:
    kind: str  # "log", "file", "slack" or "google-chat"
    path: Path | None = None


@dataclass(frozen=True)
class Secret:
    """A secret given by value, or by Secret Manager version name (resolved at start).

    Its value never appears in ``repr()`` (settings get logged and printed in tracebacks).
    """

    value: str | None = None
    name: str | None = None

    def __repr__(self) -> str:
        return f"Secret(name={self.name!r})" if self.name else "Secret(<value>)"

    def get(self) -> str:
        if self.value is None:
            raise ConfigError(f"secret {self.name} was not resolved before use")
        return self.value


@dataclass(frozen=True)
class ChatOps:
    """Chat notifiers, verification of clicks, approvals and the remediation topic."""

    slack_bot_token: Secret | None = None
    slack_channel: str | None = None
    slack_signing_secret: Secret | None = None
    slack_api_url: str = DEFAULT_SLACK_API_URL
    slack_response_url_prefix: str = DEFAULT_SLACK_RESPONSE_URL_PREFIX
    google_chat_webhook_url: Secret | None = None
    google_chat_space: str | None = None
    google_chat_audience: str | None = None
    google_chat_certs_url: str = DEFAULT_GOOGLE_CHAT_CERTS_URL
    google_chat_api_url: str = DEFAULT_GOOGLE_CHAT_API_URL
    approvers: frozenset[str] = frozenset()
    action_signing_key: Secret | None = None
    approval_ttl: timedelta = DEFAULT_APPROVAL_TTL
    remediation_topic: str | None = None
    #: What ``on_alertmanager_webhook`` accepts: a bearer token, ``user:password``, or both.
    alert_webhook_token: Secret | None = None
    alert_webhook_basic_auth: Secret | None = None

    @property
    def approvals_enabled(self) -> bool:
        """Buttons are shown only when clicks can be verified and someone may click."""
        return self.action_signing_key is not None and bool(self.approvers)

    def secrets(self) -> dict[str, Secret]:
        """Every secret setting that is set, by field name."""
        found = {
            "slack_bot_token": self.slack_bot_token,
            "slack_signing_secret": self.slack_signing_secret,
            "google_chat_webhook_url": self.google_chat_webhook_url,
            "action_signing_key": self.action_signing_key,
            "alert_webhook_token": self.alert_webhook_token,
            "alert_webhook_basic_auth": self.alert_webhook_basic_auth,
        }
        return {k: v for k, v in found.items() if v is not None}


@dataclass(frozen=True)
class Remediation:
    """How ``on_remediation_request`` acts, and where it finds the cluster and APIs."""

    policy: RemediationPolicy = RemediationPolicy()
    kubeconfig: Path | None = None
    compute_endpoint: str | None = None
    support_parent: str | None = None
    support_classification: str | None = None
    support_endpoint: str | None = None


@dataclass(frozen=True)
class Settings:
    """Everything configurable, validated. Build it with :func:`load_settings`."""

    runtime: Runtime = Runtime.LOCAL
    store: StoreSpec = StoreSpec(StoreKind.SQLITE, Path(".loopbreaker/incidents.sqlite"))
    project: str | None = None
    firestore_database: str = DEFAULT_FIRESTORE_DATABASE
    collection_prefix: str = DEFAULT_COLLECTION_PREFIX
    grouping_window: timedelta = DEFAULT_GROUPING_WINDOW
    settle_time: timedelta = DEFAULT_SETTLE_TIME
    stale_after: timedelta = DEFAULT_STALE_AFTER
    max_signals: int = DEFAULT_MAX_SIGNALS
    query_budget: int = DEFAULT_QUERY_BUDGET
    settle_batch: int = DEFAULT_SETTLE_BATCH
    dedup_retention: timedelta = DEFAULT_DEDUP_RETENTION
    #: How long a remediated workload is watched before it counts as ``verified``.
    verify_window: timedelta = DEFAULT_VERIFY_WINDOW
    #: How often ``on_schedule`` looks at a workload under watch.
    verify_every: timedelta = DEFAULT_VERIFY_EVERY
    dry_run: bool = True
    #: Query Managed Prometheus, Cloud Logging and the GKE API when diagnosing.
    live_sources: bool = False
    telemetry_dir: Path | None = None
    notifier: NotifierSpec = NotifierSpec(DEFAULT_NOTIFIER)
    chatops: ChatOps = ChatOps()
    remediation: Remediation = Remediation()
    log_level: str = DEFAULT_LOG_LEVEL
    #: The kind of workload a signal that does not say is about.
    workload_kind: WorkloadKind = WorkloadKind.JOBSET
    #: The cluster of alerts that carry no ``cluster`` label (one Prometheus per cluster).
    alert_cluster: str | None = None
    #: ``LOOPBREAKER_*`` names that are set but unknown (typos); logged at start-up.
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    description: str


#: The documented variables, in docs/configuration.md order
#: (``python -m loopbreaker.app.settings`` prints them).
VARIABLES: tuple[Variable, ...] = (
    Variable(
        "LOOPBREAKER_STORE",
        f"`{DEFAULT_CLOUD_STORE}` in Cloud Functions, `{DEFAULT_LOCAL_STORE}` locally",
        "Incident store: `firestore` or `sqlite:PATH`.",
    ),
    Variable(
        "LOOPBREAKER_PROJECT",
        "`GOOGLE_CLOUD_PROJECT`, else none",
        "Project of the Firestore database, and of incident keys whose entry names none.",
    ),
    Variable(
        "LOOPBREAKER_FIRESTORE_DATABASE",
        f"`{DEFAULT_FIRESTORE_DATABASE}`",
        "Firestore database id.",
    ),
    Variable(
        "LOOPBREAKER_COLLECTION_PREFIX",
        f"`{DEFAULT_COLLECTION_PREFIX}`",
        "Prefix of the Firestore collections (`<prefix>_incidents`, `_keys`, `_dedup`, `_hosts`).",
    ),
    Variable(
        "LOOPBREAKER_GROUPING_WINDOW",
        "`30m`",
        "Signals of one key whose event times are within this gap of an incident join it.",
    ),
    Variable(
        "LOOPBREAKER_SETTLE_TIME",
        "`60s`",
        "Diagnose an incident once no signal arrived for this long (debounce).",
    ),
    Variable(
        "LOOPBREAKER_STALE_AFTER",
        "`6h`",
        "An incident awaiting approval longer than this becomes `expired`.",
    ),
    Variable(
        "LOOPBREAKER_VERIFY_WINDOW",
        "`2h`",
        "After `remediated`, watch the workload this long: no restart of the same cause "
        "makes it `verified`, one on the same host (or the new VM on it) `recurred`.",
    ),
    Variable(
        "LOOPBREAKER_VERIFY_EVERY",
        "`10m`",
        "How often `on_schedule` checks a workload under watch (at most "
        "`LOOPBREAKER_SETTLE_BATCH` incidents per run).",
    ),
    Variable(
        "LOOPBREAKER_MAX_SIGNALS",
        f"`{DEFAULT_MAX_SIGNALS}`",
        "Signals kept verbatim per incident (counts per kind stay exact).",
    ),
    Variable(
        "LOOPBREAKER_QUERY_BUDGET",
        f"`{DEFAULT_QUERY_BUDGET}`",
        "PromQL/Logging queries one diagnosis of one incident may run.",
    ),
    Variable(
        "LOOPBREAKER_SETTLE_BATCH",
        f"`{DEFAULT_SETTLE_BATCH}`",
        "Incidents diagnosed per `on_schedule` call; the rest wait for the next call.",
    ),
    Variable(
        "LOOPBREAKER_DEDUP_RETENTION",
        "`8d`",
        "How long delivery dedup keys are kept (Pub/Sub redelivers for up to 7 days).",
    ),
    Variable(
        "LOOPBREAKER_DRY_RUN",
        "`true`",
        "Remediation reads the cluster and VM and records the exact calls it would make, "
        "without sending any mutating request; `false` acts.",
    ),
    Variable(
        "LOOPBREAKER_MAX_DELETIONS_PER_HOUR",
        f"`{DEFAULT_MAX_DELETIONS_PER_HOUR}`",
        "VM deletions per cluster in any hour, counted in the store; more are refused.",
    ),
    Variable(
        "LOOPBREAKER_MAX_UNREADY_SHARE",
        f"`{DEFAULT_MAX_UNREADY_SHARE:g}`",
        "Circuit breaker: refuse and escalate when more than this share (0-1, or a "
        "percentage such as `30%`) of the node pool is NotReady.",
    ),
    Variable(
        "LOOPBREAKER_NODE_POOLS",
        "all",
        "Comma-separated node pools remediation may touch. Nodes (or pools, whose labels "
        f"GKE copies to nodes) labelled `{OPT_OUT_LABEL}={OPT_OUT_VALUE}` are never touched.",
    ),
    Variable(
        "LOOPBREAKER_DRAIN_MODE",
        "`wait`",
        "`wait`: retry evictions a PodDisruptionBudget blocks until the drain timeout, then "
        "fail with the node cordoned; `delete-after-timeout`: then delete those pods.",
    ),
    Variable(
        "LOOPBREAKER_DRAIN_TIMEOUT",
        "`10m`",
        "How long a drain may take in all (it spans redeliveries).",
    ),
    Variable(
        "LOOPBREAKER_HOST_ACTION",
        "`delete`",
        "`delete` (`instances.delete`: the managed instance group recreates the VM) or "
        "`report-faulty` (`instances.reportHostAsFaulty`: reservations, compact placement).",
    ),
    Variable(
        "LOOPBREAKER_SUPPORT_PARENT",
        "none",
        "`projects/P` or `organizations/O`: file a Cloud Support case with the ticket draft; "
        "none: the draft stays on the incident and in the message.",
    ),
    Variable(
        "LOOPBREAKER_SUPPORT_CLASSIFICATION",
        "the first `Compute Engine` classification",
        "Case classification id for support cases.",
    ),
    Variable(
        "LOOPBREAKER_KUBECONFIG",
        "the GKE API (`clusters.get`)",
        "Kubeconfig of the cluster to remediate; otherwise its endpoint comes from the GKE "
        "API with the function's own credentials.",
    ),
    Variable(
        "LOOPBREAKER_COMPUTE_ENDPOINT",
        "Google's",
        "Compute Engine API endpoint (tests, private endpoints).",
    ),
    Variable(
        "LOOPBREAKER_SUPPORT_ENDPOINT",
        "Google's",
        "Cloud Support API endpoint (tests, private endpoints).",
    ),
    Variable(
        "LOOPBREAKER_LIVE_SOURCES",
        "`true` in Cloud Functions, `false` locally",
        "Diagnoses query Managed Prometheus, Cloud Logging and the GKE API of the incident's "
        "project (within the query budget); `false` uses only the incident's own signals "
        "and the telemetry directory.",
    ),
    Variable(
        "LOOPBREAKER_TELEMETRY_DIR",
        "none",
        "Offline telemetry directory (see `loopbreaker diagnose --telemetry`); with live "
        "sources on, live readers fill in what it lacks.",
    ),
    Variable(
        "LOOPBREAKER_NOTIFIER",
        f"`{DEFAULT_NOTIFIER}`",
        "`slack`, `google-chat`, `log` (structured log line) or `file:DIR` (one JSON file "
        "per incident).",
    ),
    Variable(
        "LOOPBREAKER_SLACK_BOT_TOKEN",
        "none",
        "Bot token (`xoxb-…`) for `chat.postMessage` / `chat.update`; needed by `slack`.",
    ),
    Variable("LOOPBREAKER_SLACK_CHANNEL", "none", "Channel id the incident messages go to."),
    Variable(
        "LOOPBREAKER_SLACK_SIGNING_SECRET",
        "none",
        "Verifies `X-Slack-Signature` on button clicks; without it Slack clicks get 401.",
    ),
    Variable(
        "LOOPBREAKER_SLACK_API_URL",
        f"`{DEFAULT_SLACK_API_URL}`",
        "Slack Web API base URL (tests and gateways point it elsewhere).",
    ),
    Variable(
        "LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX",
        f"`{DEFAULT_SLACK_RESPONSE_URL_PREFIX}`",
        "A refused click is answered in an ephemeral message through the interaction's "
        "`response_url`, only when it starts with this (tests point it elsewhere).",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_WEBHOOK_URL",
        "none",
        "Incoming webhook of a Google Chat space (one thread per incident).",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_SPACE",
        "none",
        "`spaces/…`: post and update cards through the Chat API as the Chat app instead.",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_AUDIENCE",
        "none",
        "Audience of Google Chat's bearer tokens (the app's project number or endpoint "
        "URL); without it Google Chat clicks get 401.",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_CERTS_URL",
        "Google's certificates of `chat@system.gserviceaccount.com`",
        "Where the keys that sign Google Chat's tokens are fetched from.",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_API_URL",
        f"`{DEFAULT_GOOGLE_CHAT_API_URL}`",
        "Chat API base URL (with `LOOPBREAKER_GOOGLE_CHAT_SPACE`).",
    ),
    Variable(
        "LOOPBREAKER_APPROVERS",
        "none",
        "Comma-separated Slack user ids and/or Google Chat emails who may approve or reject "
        "(`slack:` / `google-chat:` may say which); a Slack click matches only user ids, a "
        "Chat click only emails. None: approvals are off.",
    ),
    Variable(
        "LOOPBREAKER_ACTION_SIGNING_KEY",
        "none",
        f"HMAC-SHA256 key (at least {MIN_SIGNING_KEY_LENGTH} characters) that signs the action "
        "request in every button; none: no buttons, the message says approvals are off.",
    ),
    Variable(
        "LOOPBREAKER_APPROVAL_TTL",
        "`30m`",
        "How long an approval request and its buttons are valid (at most `24h`, and never "
        "longer than `LOOPBREAKER_STALE_AFTER`); then the incident becomes `expired`.",
    ),
    Variable(
        "LOOPBREAKER_REMEDIATION_TOPIC",
        "none",
        "`projects/P/topics/T` (or `T` with a project) that approved remediation requests are "
        "published to; required by `on_chat_action` in Cloud Functions, locally they are "
        "logged.",
    ),
    Variable(
        "LOOPBREAKER_WORKLOAD_KIND",
        "`jobset`",
        "`jobset`, `tfjob` or `pytorchjob`: the kind of a workload whose signals do not say "
        "(pod labels, Event kinds and alert labels do).",
    ),
    Variable(
        "LOOPBREAKER_ALERT_WEBHOOK_TOKEN",
        "none",
        "Bearer token `on_alertmanager_webhook` accepts (`Authorization: Bearer`, or "
        "`?auth_token=` for Cloud Monitoring webhook channels).",
    ),
    Variable(
        "LOOPBREAKER_ALERT_WEBHOOK_BASIC_AUTH",
        "none",
        "`user:password` that `on_alertmanager_webhook` accepts as HTTP basic auth. With "
        "neither this nor the token set, every request is refused (401).",
    ),
    Variable(
        "LOOPBREAKER_ALERT_CLUSTER",
        "none",
        "Cluster of alerts that carry no `cluster` label (a Prometheus per cluster).",
    ),
    Variable(
        "LOOPBREAKER_<SECRET>_SECRET_NAME",
        "none",
        "For `SLACK_BOT_TOKEN`, `SLACK_SIGNING_SECRET`, `GOOGLE_CHAT_WEBHOOK_URL`, "
        "`ACTION_SIGNING_KEY`, `ALERT_WEBHOOK_TOKEN` and `ALERT_WEBHOOK_BASIC_AUTH`: a "
        "Secret Manager version "
        "(`projects/P/secrets/S/versions/V`) read once at start instead of the value.",
    ),
    Variable(
        "LOOPBREAKER_LOG_LEVEL",
        f"`{DEFAULT_LOG_LEVEL}`",
        "`DEBUG`, `INFO`, `WARNING` or `ERROR`.",
    ),
)
_SECRET_VARIABLES = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "GOOGLE_CHAT_WEBHOOK_URL",
    "ACTION_SIGNING_KEY",
    "ALERT_WEBHOOK_TOKEN",
    "ALERT_WEBHOOK_BASIC_AUTH",
)
_KNOWN = frozenset(
    {v.name for v in VARIABLES if "<" not in v.name}
    | {f"{PREFIX}{name}_SECRET_NAME" for name in _SECRET_VARIABLES}
)
_SECRET_NAME = re.compile(r"^projects/[^/\s]+/secrets/[^/\s]+/versions/[^/\s]+$")
_TOPIC = re.compile(r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/[A-Za-z][\w.~+%-]{2,254}$")
_BARE_TOPIC = re.compile(r"^[A-Za-z][\w.~+%-]{2,254}$")
_SPACE = re.compile(r"^spaces/[A-Za-z0-9_-]+$")
_SUPPORT_PARENT = re.compile(r"^(projects|organizations)/[A-Za-z0-9_.:-]+$")
_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def load_settings(
    environ: Mapping[str, str], *, runtime: Runtime = Runtime.LOCAL, known: frozenset[str] = _KNOWN
) -> Settings:
    """Parse ``environ``; raise ConfigError naming the first bad variable."""

    def get(name: str) -> str | None:
        value = environ.get(PREFIX + name)
        return value.strip() if value is not None and value.strip() else None

    store_default = DEFAULT_CLOUD_STORE if runtime is Runtime.CLOUD else DEFAULT_LOCAL_STORE
    project = get("PROJECT") or environ.get("GOOGLE_CLOUD_PROJECT") or None
    prefix = get("COLLECTION_PREFIX") or DEFAULT_COLLECTION_PREFIX
    if not _PREFIX_RE.match(prefix):
        raise ConfigError(
            f"{PREFIX}COLLECTION_PREFIX={prefix!r}: use letters, digits, '_' or '-', "
            "starting with a letter"
        )
    log_level = (get("LOG_LEVEL") or DEFAULT_LOG_LEVEL).upper()
    if log_level not in _LOG_LEVELS:
        raise ConfigError(f"{PREFIX}LOG_LEVEL={log_level!r}: expected one of {_LOG_LEVELS}")
    telemetry = get("TELEMETRY_DIR")
    if telemetry and not Path(telemetry).expanduser().is_dir():
        # Caught here, not at the first diagnosis, which would fail every minute.
        raise ConfigError(f"{PREFIX}TELEMETRY_DIR={telemetry!r}: not a directory")
    grouping = _duration("GROUPING_WINDOW", get("GROUPING_WINDOW"), DEFAULT_GROUPING_WINDOW)
    settle = _duration("SETTLE_TIME", get("SETTLE_TIME"), DEFAULT_SETTLE_TIME)
    stale = _duration("STALE_AFTER", get("STALE_AFTER"), DEFAULT_STALE_AFTER)
    retention = _duration("DEDUP_RETENTION", get("DEDUP_RETENTION"), DEFAULT_DEDUP_RETENTION)
    verify_window = _duration("VERIFY_WINDOW", get("VERIFY_WINDOW"), DEFAULT_VERIFY_WINDOW)
    verify_every = _duration("VERIFY_EVERY", get("VERIFY_EVERY"), DEFAULT_VERIFY_EVERY)
    for name, value in (("VERIFY_WINDOW", verify_window), ("VERIFY_EVERY", verify_every)):
        if value < timedelta(minutes=1):
            raise ConfigError(
                f"{PREFIX}{name}: must be at least 1m (on_schedule runs every minute)"
            )
    for name, value in (("GROUPING_WINDOW", grouping), ("STALE_AFTER", stale)):
        if value <= timedelta(0):
            raise ConfigError(f"{PREFIX}{name}: must be longer than zero")
    if retention < timedelta(days=1):
        raise ConfigError(f"{PREFIX}DEDUP_RETENTION: must be at least 1d to cover redeliveries")
    notifier = _notifier(get("NOTIFIER") or DEFAULT_NOTIFIER)
    chatops = _chatops(get, project, notifier)
    remediation = _remediation(get)
    if runtime is Runtime.CLOUD and chatops.approvals_enabled and not chatops.remediation_topic:
        # Locally an approved request is logged; in the cloud it would go nowhere.
        raise ConfigError(
            f"approvals are on ({PREFIX}ACTION_SIGNING_KEY and {PREFIX}APPROVERS) but "
            f"{PREFIX}REMEDIATION_TOPIC is not set: approved requests would go nowhere"
        )
    return Settings(
        runtime=runtime,
        store=_store(get("STORE") or store_default),
        project=project,
        firestore_database=get("FIRESTORE_DATABASE") or DEFAULT_FIRESTORE_DATABASE,
        collection_prefix=prefix,
        grouping_window=grouping,
        settle_time=settle,
        stale_after=stale,
        max_signals=_int("MAX_SIGNALS", get("MAX_SIGNALS"), DEFAULT_MAX_SIGNALS),
        query_budget=_int("QUERY_BUDGET", get("QUERY_BUDGET"), DEFAULT_QUERY_BUDGET),
        settle_batch=_int("SETTLE_BATCH", get("SETTLE_BATCH"), DEFAULT_SETTLE_BATCH),
        dedup_retention=retention,
        verify_window=verify_window,
        verify_every=verify_every,
        dry_run=remediation.policy.dry_run,
        live_sources=_bool("LIVE_SOURCES", get("LIVE_SOURCES"), runtime is Runtime.CLOUD),
        telemetry_dir=Path(telemetry) if telemetry else None,
        notifier=notifier,
        chatops=chatops,
        remediation=remediation,
        log_level=log_level,
        workload_kind=_workload_kind(get("WORKLOAD_KIND")),
        alert_cluster=get("ALERT_CLUSTER"),
        unknown=tuple(sorted(k for k in environ if k.startswith(PREFIX) and k not in known)),
    )


def _workload_kind(value: str | None) -> WorkloadKind:
    if value is None:
        return WorkloadKind.JOBSET
    try:
        return WorkloadKind.parse(value)
    except LoopbreakerError as exc:
        raise ConfigError(f"{PREFIX}WORKLOAD_KIND: {exc}") from exc


def parse_duration(text: str) -> timedelta:
    """``90s``, ``1.5m``, ``6h``, ``7d``. A unit is required: is ``30`` seconds or minutes?"""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration with a unit, such as 60s, 30m, 6h or 7d")
    seconds = float(match[1]) * _UNITS[match[2]]
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{text!r} is longer than {MAX_DURATION.days}d")
    return timedelta(seconds=seconds)


def _duration(name: str, raw: str | None, default: timedelta) -> timedelta:
    if raw is None:
        return default
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}{name}={raw!r}: {exc}") from exc


def _int(name: str, raw: str | None, default: int) -> int:
    if raw is None:
        return default
    low, high = _LIMITS[name]
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}{name}={raw!r}: expected a whole number") from exc
    if not low <= value <= high:
        raise ConfigError(f"{PREFIX}{name}={value}: must be between {low} and {high}")
    return value


def _bool(name: str, raw: str | None, default: bool) -> bool:
    if raw is None:
        return default
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{PREFIX}{name}={raw!r}: expected true or false")


def _store(raw: str) -> StoreSpec:
    if raw == StoreKind.FIRESTORE.value:
        return StoreSpec(StoreKind.FIRESTORE)
    if raw.startswith("sqlite:") and raw[len("sqlite:") :].strip():
        return StoreSpec(StoreKind.SQLITE, Path(raw[len("sqlite:") :].strip()).expanduser())
    raise ConfigError(f"{PREFIX}STORE={raw!r}: expected 'firestore' or 'sqlite:PATH'")


def _notifier(raw: str) -> NotifierSpec:
    if raw in ("log", "slack", "google-chat"):
        return NotifierSpec(raw)
    if raw.startswith("file:") and raw[len("file:") :].strip():
        return NotifierSpec("file", Path(raw[len("file:") :].strip()).expanduser())
    raise ConfigError(
        f"{PREFIX}NOTIFIER={raw!r}: expected 'slack', 'google-chat', 'log' or 'file:DIR'"
    )


def _secret(get: Callable[[str], str | None], name: str) -> Secret | None:
    value = get(name)
    secret_name = get(f"{name}_SECRET_NAME")
    if value is not None and secret_name is not None:
        raise ConfigError(f"{PREFIX}{name} and {PREFIX}{name}_SECRET_NAME are both set: use one")
    if secret_name is not None:
        if not _SECRET_NAME.match(secret_name):
            raise ConfigError(
                f"{PREFIX}{name}_SECRET_NAME={secret_name!r}: expected "
                "projects/PROJECT/secrets/SECRET/versions/VERSION"
            )
        return Secret(name=secret_name)
    return Secret(value=value) if value is not None else None


def _url(get: Callable[[str], str | None], name: str, default: str) -> str:
    raw = get(name) or default
    if not _URL.match(raw):
        raise ConfigError(f"{PREFIX}{name}={raw!r}: expected an http(s) URL")
    return raw


def _chatops(
    get: Callable[[str], str | None], project: str | None, notifier: NotifierSpec
) -> ChatOps:
    key = _secret(get, "ACTION_SIGNING_KEY")
    if key is not None and key.value is not None and len(key.value) < MIN_SIGNING_KEY_LENGTH:
        raise ConfigError(
            f"{PREFIX}ACTION_SIGNING_KEY: at least {MIN_SIGNING_KEY_LENGTH} characters, "
            f"got {len(key.value)}"
        )
    try:
        approvers = parse_approvers(get("APPROVERS") or "")
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}APPROVERS: {exc}") from exc
    ttl = _duration("APPROVAL_TTL", get("APPROVAL_TTL"), DEFAULT_APPROVAL_TTL)
    if not timedelta(0) < ttl <= MAX_APPROVAL_TTL:
        raise ConfigError(f"{PREFIX}APPROVAL_TTL: must be longer than zero and at most 24h")
    slack_api = _url(get, "SLACK_API_URL", DEFAULT_SLACK_API_URL)
    chat = ChatOps(
        slack_bot_token=_secret(get, "SLACK_BOT_TOKEN"),
        slack_channel=get("SLACK_CHANNEL"),
        slack_signing_secret=_secret(get, "SLACK_SIGNING_SECRET"),
        # slack_sdk joins method names onto the base URL: it must end in a slash.
        slack_api_url=slack_api if slack_api.endswith("/") else slack_api + "/",
        slack_response_url_prefix=_url(
            get, "SLACK_RESPONSE_URL_PREFIX", DEFAULT_SLACK_RESPONSE_URL_PREFIX
        ),
        google_chat_webhook_url=_secret(get, "GOOGLE_CHAT_WEBHOOK_URL"),
        google_chat_space=get("GOOGLE_CHAT_SPACE"),
        google_chat_audience=get("GOOGLE_CHAT_AUDIENCE"),
        google_chat_certs_url=_url(get, "GOOGLE_CHAT_CERTS_URL", DEFAULT_GOOGLE_CHAT_CERTS_URL),
        google_chat_api_url=_url(get, "GOOGLE_CHAT_API_URL", DEFAULT_GOOGLE_CHAT_API_URL),
        approvers=approvers,
        action_signing_key=key,
        approval_ttl=ttl,
        remediation_topic=_topic(get("REMEDIATION_TOPIC"), project),
        alert_webhook_token=_secret(get, "ALERT_WEBHOOK_TOKEN"),
        alert_webhook_basic_auth=_secret(get, "ALERT_WEBHOOK_BASIC_AUTH"),
    )
    basic = chat.alert_webhook_basic_auth
    if basic is not None and basic.value is not None and ":" not in basic.value:
        raise ConfigError(f"{PREFIX}ALERT_WEBHOOK_BASIC_AUTH: expected user:password")
    webhook = chat.google_chat_webhook_url
    if webhook is not None and webhook.value is not None and not _URL.match(webhook.value):
        raise ConfigError(f"{PREFIX}GOOGLE_CHAT_WEBHOOK_URL: expected an http(s) URL")
    if chat.google_chat_space is not None and not _SPACE.match(chat.google_chat_space):
        raise ConfigError(
            f"{PREFIX}GOOGLE_CHAT_SPACE={chat.google_chat_space!r}: expected spaces/NAME"
        )
    if notifier.kind == "slack":
        needed = (("SLACK_BOT_TOKEN", chat.slack_bot_token), ("SLACK_CHANNEL", chat.slack_channel))
        missing = [f"{PREFIX}{n}" for n, v in needed if v is None]
        if missing:
            raise ConfigError(f"{PREFIX}NOTIFIER=slack needs {' and '.join(missing)}")
    if notifier.kind == "google-chat" and (webhook is None) == (chat.google_chat_space is None):
        raise ConfigError(
            f"{PREFIX}NOTIFIER=google-chat needs exactly one of {PREFIX}GOOGLE_CHAT_WEBHOOK_URL "
            f"and {PREFIX}GOOGLE_CHAT_SPACE"
        )
    return chat


def _remediation(get: Callable[[str], str | None]) -> Remediation:
    limit = get("MAX_DELETIONS_PER_HOUR")
    try:
        deletions = int(limit) if limit is not None else DEFAULT_MAX_DELETIONS_PER_HOUR
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}MAX_DELETIONS_PER_HOUR={limit!r}: a whole number") from exc
    if not 0 <= deletions <= 100:
        raise ConfigError(f"{PREFIX}MAX_DELETIONS_PER_HOUR={deletions}: between 0 and 100")
    share = _share(get("MAX_UNREADY_SHARE"))
    pools_raw = get("NODE_POOLS")
    pools = frozenset(p.strip() for p in pools_raw.split(",") if p.strip()) if pools_raw else None
    mode_raw = get("DRAIN_MODE") or DrainMode.WAIT.value
    action_raw = get("HOST_ACTION") or HostAction.DELETE.value
    try:
        mode, action = DrainMode(mode_raw), HostAction(action_raw)
    except ValueError as exc:
        raise ConfigError(
            f"{PREFIX}DRAIN_MODE must be wait or delete-after-timeout, {PREFIX}HOST_ACTION "
            f"delete or report-faulty: {exc}"
        ) from exc
    timeout = _duration("DRAIN_TIMEOUT", get("DRAIN_TIMEOUT"), DEFAULT_DRAIN_TIMEOUT)
    if timeout <= timedelta(0):
        raise ConfigError(f"{PREFIX}DRAIN_TIMEOUT: must be longer than zero")
    parent = get("SUPPORT_PARENT")
    if parent is not None and not _SUPPORT_PARENT.match(parent):
        raise ConfigError(
            f"{PREFIX}SUPPORT_PARENT={parent!r}: expected projects/P or organizations/O"
        )
    kubeconfig = get("KUBECONFIG")
    if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
        raise ConfigError(f"{PREFIX}KUBECONFIG={kubeconfig!r}: no such file")
    endpoints = {
        name: _url(get, name, "") if get(name) else None
        for name in ("COMPUTE_ENDPOINT", "SUPPORT_ENDPOINT")
    }
    return Remediation(
        policy=RemediationPolicy(
            dry_run=_bool("DRY_RUN", get("DRY_RUN"), True),
            max_deletions_per_hour=deletions,
            max_unready_share=share,
            node_pools=pools,
            drain_mode=mode,
            drain_timeout=timeout,
            host_action=action,
        ),
        kubeconfig=Path(kubeconfig).expanduser() if kubeconfig else None,
        compute_endpoint=endpoints["COMPUTE_ENDPOINT"],
        support_parent=parent,
        support_classification=get("SUPPORT_CLASSIFICATION"),
        support_endpoint=endpoints["SUPPORT_ENDPOINT"],
    )


def _share(raw: str | None) -> float:
    if raw is None:
        return DEFAULT_MAX_UNREADY_SHARE
    text = raw.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}MAX_UNREADY_SHARE={raw!r}: a share such as 0.3 or 30%") from exc
    if not 0 <= value <= 1:
        raise ConfigError(f"{PREFIX}MAX_UNREADY_SHARE={raw!r}: between 0 and 1 (0% and 100%)")
    return value


def _topic(raw: str | None, project: str | None) -> str | None:
    if raw is None:
        return None
    if _TOPIC.match(raw):
        return raw
    if _BARE_TOPIC.match(raw) and "/" not in raw:
        if project is None:
            raise ConfigError(
                f"{PREFIX}REMEDIATION_TOPIC={raw!r}: a bare topic name needs "
                f"{PREFIX}PROJECT or GOOGLE_CLOUD_PROJECT; or give projects/P/topics/T"
            )
        return f"projects/{project}/topics/{raw}"
    raise ConfigError(f"{PREFIX}REMEDIATION_TOPIC={raw!r}: expected projects/P/topics/T")


def markdown_table() -> str:
    """The table in docs/configuration.md of variables and defaults."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {v.default} | {v.description} |" for v in VARIABLES]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
