"""The settings' types and defaults: what :func:`~loopbreaker.settings.load.load_settings` returns.

Every default is a named module constant here; :mod:`loopbreaker.settings.load` re-exports
them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from loopbreaker.errors import ConfigError
from loopbreaker.incidents.records import (
    DEFAULT_APPROVAL_TTL,
    DEFAULT_DEDUP_RETENTION,
    DEFAULT_GROUPING_WINDOW,
    DEFAULT_MAX_SIGNALS,
    DEFAULT_SETTLE_TIME,
    DEFAULT_STALE_AFTER,
)
from loopbreaker.incidents.routes import Routes
from loopbreaker.model import WorkloadKind
from loopbreaker.remediation.rules import RemediationPolicy

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
    """A secret given by value, by Secret Manager version name (resolved at start), or by
    the file a mounted Kubernetes Secret holds it in (read when the settings are loaded).

    Its value never appears in ``repr()`` (settings get logged and printed in tracebacks).
    """

    value: str | None = None
    name: str | None = None
    file: Path | None = None

    def __repr__(self) -> str:
        if self.name:
            return f"Secret(name={self.name!r})"
        return f"Secret(file={str(self.file)!r})" if self.file else "Secret(<value>)"

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
    #: LOOPBREAKER_ROUTES: where each incident's messages go and who approves its repair.
    #: None: one channel, and LOOPBREAKER_APPROVERS for every incident.
    routes: Routes | None = None

    @property
    def approvals_enabled(self) -> bool:
        """Buttons are shown only when clicks can be verified and someone may click."""
        if self.action_signing_key is None:
            return False
        return self.routes.any_approvers if self.routes is not None else bool(self.approvers)

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
class PrometheusSource:
    """A self-run Prometheus (kube-prometheus-stack) that diagnoses read metrics from."""

    url: str | None = None
    #: A label name, ``none`` (one Prometheus per cluster), or None: found out from the server.
    cluster_label: str | None = None
    bearer_token: Secret | None = None
    #: HTTP basic auth, as Prometheus' own ``basic_auth`` (username, password).
    username: str | None = None
    password: Secret | None = None

    def secrets(self) -> dict[str, Secret]:
        """Every secret setting that is set, by field name."""
        found = {"bearer_token": self.bearer_token, "password": self.password}
        return {k: v for k, v in found.items() if v is not None}


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
    #: LOOPBREAKER_PROMETHEUS_*: metrics from a self-run Prometheus instead of Managed's.
    prometheus: PrometheusSource = PrometheusSource()
    log_level: str = DEFAULT_LOG_LEVEL
    #: The kind of workload a signal that does not say is about.
    workload_kind: WorkloadKind = WorkloadKind.JOBSET
    #: The cluster of alerts that carry no ``cluster`` label (one Prometheus per cluster).
    alert_cluster: str | None = None
    #: LOOPBREAKER_PROJECTS: the projects served; an entry from any other opens nothing.
    #: Empty: every project the sinks deliver.
    projects: frozenset[str] = frozenset()
    #: ``LOOPBREAKER_*`` names that are set but unknown (typos); logged at start-up.
    unknown: tuple[str, ...] = ()
