"""Configuration: ``LOOPBREAKER_*`` environment variables, parsed and validated once.

:func:`load_settings` is the only reader of the environment. A bad value raises
:class:`ConfigError` naming the variable, so a misconfigured function fails at start-up
instead of on the first event. The types and defaults live in ``settings_model``, the
documented table in ``settings_table``, the value parsers in ``settings_values``; every
public name of those is importable from here.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from loopbreaker.approval.repair import DisruptionSchedule, RepairPolicy
from loopbreaker.approval.requests import parse_approvers
from loopbreaker.errors import ConfigError
from loopbreaker.incidents.records import (
    DEFAULT_APPROVAL_TTL,
    DEFAULT_DEDUP_RETENTION,
    DEFAULT_GROUPING_WINDOW,
    DEFAULT_MAX_SIGNALS,
    DEFAULT_SETTLE_TIME,
    DEFAULT_STALE_AFTER,
)
from loopbreaker.remediation.rules import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_GKE_REPAIR_STALL,
    DEFAULT_GKE_REPAIR_TIMEOUT,
    DEFAULT_MAX_DELETIONS_PER_HOUR,
    DrainMode,
    RemediationPolicy,
)
from loopbreaker.settings.model import (
    DEFAULT_CLOUD_STORE,
    DEFAULT_COLLECTION_PREFIX,
    DEFAULT_FIRESTORE_DATABASE,
    DEFAULT_GOOGLE_CHAT_API_URL,
    DEFAULT_GOOGLE_CHAT_CERTS_URL,
    DEFAULT_LOCAL_STORE,
    DEFAULT_LOG_LEVEL,
    DEFAULT_NOTIFIER,
    DEFAULT_QUERY_BUDGET,
    DEFAULT_SETTLE_BATCH,
    DEFAULT_SLACK_API_URL,
    DEFAULT_SLACK_RESPONSE_URL_PREFIX,
    DEFAULT_VERIFY_EVERY,
    DEFAULT_VERIFY_WINDOW,
    MAX_APPROVAL_TTL,
    MAX_DURATION,
    MIN_SIGNING_KEY_LENGTH,
    PREFIX,
    ChatOps,
    NotifierSpec,
    PrometheusSource,
    Remediation,
    Runtime,
    Secret,
    Settings,
    StoreKind,
    StoreSpec,
)
from loopbreaker.settings.parse import (
    URL_RE,
    Getter,
    boolean,
    duration,
    foreign_markers,
    integer,
    notifier_spec,
    parse_duration,
    secret,
    store_spec,
    topic,
    unready_share,
    url,
    workload_kind,
)
from loopbreaker.settings.routes import parse_routes
from loopbreaker.settings.table import VARIABLES, Variable, markdown_table

__all__ = [
    "DEFAULT_APPROVAL_TTL",
    "DEFAULT_CLOUD_STORE",
    "DEFAULT_COLLECTION_PREFIX",
    "DEFAULT_DEDUP_RETENTION",
    "DEFAULT_FIRESTORE_DATABASE",
    "DEFAULT_GOOGLE_CHAT_API_URL",
    "DEFAULT_GOOGLE_CHAT_CERTS_URL",
    "DEFAULT_GROUPING_WINDOW",
    "DEFAULT_LOCAL_STORE",
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_MAX_SIGNALS",
    "DEFAULT_NOTIFIER",
    "DEFAULT_QUERY_BUDGET",
    "DEFAULT_SETTLE_BATCH",
    "DEFAULT_SETTLE_TIME",
    "DEFAULT_SLACK_API_URL",
    "DEFAULT_SLACK_RESPONSE_URL_PREFIX",
    "DEFAULT_STALE_AFTER",
    "DEFAULT_VERIFY_EVERY",
    "DEFAULT_VERIFY_WINDOW",
    "MAX_APPROVAL_TTL",
    "MAX_DURATION",
    "MIN_SIGNING_KEY_LENGTH",
    "PREFIX",
    "VARIABLES",
    "ChatOps",
    "NotifierSpec",
    "PrometheusSource",
    "Remediation",
    "Runtime",
    "Secret",
    "Settings",
    "StoreKind",
    "StoreSpec",
    "Variable",
    "load_settings",
    "markdown_table",
    "parse_duration",
]

_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_SPACE = re.compile(r"^spaces/[A-Za-z0-9_-]+$")
_SUPPORT_PARENT = re.compile(r"^(projects|organizations)/[A-Za-z0-9_.:-]+$")
#: Every secret setting: each may also be given as ``_SECRET_NAME`` or ``_FILE``.
_SECRET_VARIABLES = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "GOOGLE_CHAT_WEBHOOK_URL",
    "ACTION_SIGNING_KEY",
    "ALERT_WEBHOOK_TOKEN",
    "ALERT_WEBHOOK_BASIC_AUTH",
    "PROMETHEUS_BEARER_TOKEN",
    "PROMETHEUS_PASSWORD",
)
_KNOWN = frozenset(
    {v.name for v in VARIABLES if "<" not in v.name}
    | {
        f"{PREFIX}{name}{suffix}"
        for name in _SECRET_VARIABLES
        for suffix in ("_SECRET_NAME", "_FILE")
    }
)


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
    grouping = duration("GROUPING_WINDOW", get("GROUPING_WINDOW"), DEFAULT_GROUPING_WINDOW)
    settle = duration("SETTLE_TIME", get("SETTLE_TIME"), DEFAULT_SETTLE_TIME)
    stale = duration("STALE_AFTER", get("STALE_AFTER"), DEFAULT_STALE_AFTER)
    retention = duration("DEDUP_RETENTION", get("DEDUP_RETENTION"), DEFAULT_DEDUP_RETENTION)
    verify_window = duration("VERIFY_WINDOW", get("VERIFY_WINDOW"), DEFAULT_VERIFY_WINDOW)
    verify_every = duration("VERIFY_EVERY", get("VERIFY_EVERY"), DEFAULT_VERIFY_EVERY)
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
    notifier = notifier_spec(get("NOTIFIER") or DEFAULT_NOTIFIER)
    chatops = _chatops(get, project, notifier)
    remediation = _remediation(get)
    if runtime is Runtime.CLOUD and chatops.approvals_enabled and not chatops.remediation_topic:
        # Locally an approved request is logged; in the cloud it would go nowhere.
        raise ConfigError(
            f"approvals are on ({PREFIX}ACTION_SIGNING_KEY and {PREFIX}APPROVERS) but "
            f"{PREFIX}REMEDIATION_TOPIC is not set: approved requests would go nowhere"
        )
    prometheus = _prometheus(get)
    return Settings(
        runtime=runtime,
        store=store_spec(get("STORE") or store_default),
        project=project,
        firestore_database=get("FIRESTORE_DATABASE") or DEFAULT_FIRESTORE_DATABASE,
        collection_prefix=prefix,
        grouping_window=grouping,
        settle_time=settle,
        stale_after=stale,
        max_signals=integer("MAX_SIGNALS", get("MAX_SIGNALS"), DEFAULT_MAX_SIGNALS),
        query_budget=integer("QUERY_BUDGET", get("QUERY_BUDGET"), DEFAULT_QUERY_BUDGET),
        settle_batch=integer("SETTLE_BATCH", get("SETTLE_BATCH"), DEFAULT_SETTLE_BATCH),
        dedup_retention=retention,
        verify_window=verify_window,
        verify_every=verify_every,
        dry_run=remediation.policy.dry_run,
        live_sources=boolean("LIVE_SOURCES", get("LIVE_SOURCES"), runtime is Runtime.CLOUD),
        telemetry_dir=Path(telemetry) if telemetry else None,
        notifier=notifier,
        chatops=chatops,
        remediation=remediation,
        prometheus=prometheus,
        log_level=log_level,
        workload_kind=workload_kind(get("WORKLOAD_KIND")),
        alert_cluster=get("ALERT_CLUSTER"),
        projects=_projects(get("PROJECTS")),
        unknown=tuple(sorted(k for k in environ if k.startswith(PREFIX) and k not in known)),
    )


def _chatops(get: Getter, project: str | None, notifier: NotifierSpec) -> ChatOps:
    key = secret(get, "ACTION_SIGNING_KEY")
    if key is not None and key.value is not None and len(key.value) < MIN_SIGNING_KEY_LENGTH:
        raise ConfigError(
            f"{PREFIX}ACTION_SIGNING_KEY: at least {MIN_SIGNING_KEY_LENGTH} characters, "
            f"got {len(key.value)}"
        )
    try:
        approvers = parse_approvers(get("APPROVERS") or "")
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}APPROVERS: {exc}") from exc
    ttl = duration("APPROVAL_TTL", get("APPROVAL_TTL"), DEFAULT_APPROVAL_TTL)
    if not timedelta(0) < ttl <= MAX_APPROVAL_TTL:
        raise ConfigError(f"{PREFIX}APPROVAL_TTL: must be longer than zero and at most 24h")
    slack_api = url(get, "SLACK_API_URL", DEFAULT_SLACK_API_URL)
    chat = ChatOps(
        slack_bot_token=secret(get, "SLACK_BOT_TOKEN"),
        slack_channel=get("SLACK_CHANNEL"),
        slack_signing_secret=secret(get, "SLACK_SIGNING_SECRET"),
        # slack_sdk joins method names onto the base URL: it must end in a slash.
        slack_api_url=slack_api if slack_api.endswith("/") else slack_api + "/",
        slack_response_url_prefix=url(
            get, "SLACK_RESPONSE_URL_PREFIX", DEFAULT_SLACK_RESPONSE_URL_PREFIX
        ),
        google_chat_webhook_url=secret(get, "GOOGLE_CHAT_WEBHOOK_URL"),
        google_chat_space=get("GOOGLE_CHAT_SPACE"),
        google_chat_audience=get("GOOGLE_CHAT_AUDIENCE"),
        google_chat_certs_url=url(get, "GOOGLE_CHAT_CERTS_URL", DEFAULT_GOOGLE_CHAT_CERTS_URL),
        google_chat_api_url=url(get, "GOOGLE_CHAT_API_URL", DEFAULT_GOOGLE_CHAT_API_URL),
        approvers=approvers,
        action_signing_key=key,
        approval_ttl=ttl,
        remediation_topic=topic(get("REMEDIATION_TOPIC"), project),
        alert_webhook_token=secret(get, "ALERT_WEBHOOK_TOKEN"),
        alert_webhook_basic_auth=secret(get, "ALERT_WEBHOOK_BASIC_AUTH"),
    )
    raw_routes = get("ROUTES")
    if raw_routes is not None:
        webhook_mode = chat.google_chat_webhook_url is not None
        routes = parse_routes(raw_routes, notifier=notifier.kind, chat_webhook=webhook_mode)
        chat = replace(chat, routes=routes)
    basic = chat.alert_webhook_basic_auth
    if basic is not None and basic.value is not None and ":" not in basic.value:
        raise ConfigError(f"{PREFIX}ALERT_WEBHOOK_BASIC_AUTH: expected user:password")
    webhook = chat.google_chat_webhook_url
    if webhook is not None and webhook.value is not None and not URL_RE.match(webhook.value):
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


#: A Google Cloud project id: 6 to 30 lowercase letters, digits and hyphens.
_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


def _projects(raw: str | None) -> frozenset[str]:
    """``LOOPBREAKER_PROJECTS``: comma-separated project ids; empty: every project."""
    found = frozenset(p.strip() for p in (raw or "").split(",") if p.strip())
    bad = sorted(p for p in found if not _PROJECT_ID.match(p))
    if bad:
        raise ConfigError(f"{PREFIX}PROJECTS: {bad[0]!r} is not a project id")
    return found


#: ``LOOPBREAKER_HOST_ACTION``, the setting ``LOOPBREAKER_REPAIR_PATH`` replaces.
_LEGACY_HOST_ACTIONS = {"delete": RepairPolicy.DELETE, "report-faulty": RepairPolicy.REPORT}


def repair_policy(path: str | None, legacy: str | None) -> RepairPolicy:
    """``LOOPBREAKER_REPAIR_PATH``, or what the older ``LOOPBREAKER_HOST_ACTION`` meant."""
    if path is not None and legacy is not None:
        raise ConfigError(
            f"{PREFIX}HOST_ACTION is the old name of {PREFIX}REPAIR_PATH: set only "
            f"{PREFIX}REPAIR_PATH ({', '.join(p.value for p in RepairPolicy)})"
        )
    if legacy is not None:
        found = _LEGACY_HOST_ACTIONS.get(legacy.strip().lower())
        if found is None:
            raise ConfigError(
                f"{PREFIX}HOST_ACTION={legacy!r}: delete or report-faulty (better: "
                f"{PREFIX}REPAIR_PATH)"
            )
        return found
    try:
        return RepairPolicy((path or RepairPolicy.AUTO.value).strip().lower())
    except ValueError:
        raise ConfigError(
            f"{PREFIX}REPAIR_PATH={path!r}: one of {', '.join(p.value for p in RepairPolicy)}"
        ) from None


def _remediation(get: Getter) -> Remediation:
    limit = get("MAX_DELETIONS_PER_HOUR")
    try:
        deletions = int(limit) if limit is not None else DEFAULT_MAX_DELETIONS_PER_HOUR
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}MAX_DELETIONS_PER_HOUR={limit!r}: a whole number") from exc
    if not 0 <= deletions <= 100:
        raise ConfigError(f"{PREFIX}MAX_DELETIONS_PER_HOUR={deletions}: between 0 and 100")
    share = unready_share(get("MAX_UNREADY_SHARE"))
    pools_raw = get("NODE_POOLS")
    pools = frozenset(p.strip() for p in pools_raw.split(",") if p.strip()) if pools_raw else None
    mode_raw = get("DRAIN_MODE") or DrainMode.WAIT.value
    try:
        mode = DrainMode(mode_raw)
    except ValueError as exc:
        raise ConfigError(
            f"{PREFIX}DRAIN_MODE must be wait or delete-after-timeout: {exc}"
        ) from exc
    timeout = duration("DRAIN_TIMEOUT", get("DRAIN_TIMEOUT"), DEFAULT_DRAIN_TIMEOUT)
    if timeout <= timedelta(0):
        raise ConfigError(f"{PREFIX}DRAIN_TIMEOUT: must be longer than zero")
    repair = repair_policy(get("REPAIR_PATH"), get("HOST_ACTION"))
    schedule_raw = (get("REPORT_DISRUPTION_SCHEDULE") or "immediate").strip().upper()
    try:
        schedule = DisruptionSchedule(schedule_raw)
    except ValueError:
        raise ConfigError(
            f"{PREFIX}REPORT_DISRUPTION_SCHEDULE={schedule_raw.lower()!r}: only immediate "
            "(Compute's reportHostAsFaulty allows only IMMEDIATE today)"
        ) from None
    gke_timeout = duration(
        "GKE_REPAIR_TIMEOUT", get("GKE_REPAIR_TIMEOUT"), DEFAULT_GKE_REPAIR_TIMEOUT
    )
    gke_stall = duration("GKE_REPAIR_STALL", get("GKE_REPAIR_STALL"), DEFAULT_GKE_REPAIR_STALL)
    if not timedelta(0) < gke_stall <= gke_timeout:
        raise ConfigError(
            f"{PREFIX}GKE_REPAIR_STALL ({gke_stall}) must be longer than zero and at most "
            f"{PREFIX}GKE_REPAIR_TIMEOUT ({gke_timeout})"
        )
    parent = get("SUPPORT_PARENT")
    if parent is not None and not _SUPPORT_PARENT.match(parent):
        raise ConfigError(
            f"{PREFIX}SUPPORT_PARENT={parent!r}: expected projects/P or organizations/O"
        )
    kubeconfig = get("KUBECONFIG")
    if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
        raise ConfigError(f"{PREFIX}KUBECONFIG={kubeconfig!r}: no such file")
    endpoints = {
        name: url(get, name, "") if get(name) else None
        for name in ("COMPUTE_ENDPOINT", "SUPPORT_ENDPOINT")
    }
    return Remediation(
        policy=RemediationPolicy(
            dry_run=boolean("DRY_RUN", get("DRY_RUN"), True),
            max_deletions_per_hour=deletions,
            max_unready_share=share,
            node_pools=pools,
            drain_mode=mode,
            drain_timeout=timeout,
            repair=repair,
            disruption_schedule=schedule,
            gke_repair_timeout=gke_timeout,
            gke_repair_stall=gke_stall,
            foreign_markers=foreign_markers(get("FOREIGN_REMEDIATION_MARKERS")),
        ),
        kubeconfig=Path(kubeconfig).expanduser() if kubeconfig else None,
        compute_endpoint=endpoints["COMPUTE_ENDPOINT"],
        support_parent=parent,
        support_classification=get("SUPPORT_CLASSIFICATION"),
        support_endpoint=endpoints["SUPPORT_ENDPOINT"],
    )


def _prometheus(get: Getter) -> PrometheusSource:
    """LOOPBREAKER_PROMETHEUS_*: the URL, the cluster label, and bearer or basic auth."""
    raw_url, label = get("PROMETHEUS_URL"), get("PROMETHEUS_CLUSTER_LABEL")
    token, password = secret(get, "PROMETHEUS_BEARER_TOKEN"), secret(get, "PROMETHEUS_PASSWORD")
    username = get("PROMETHEUS_USERNAME")
    if raw_url is None:
        given = [
            f"{PREFIX}PROMETHEUS_{name}"
            for name, value in (
                ("CLUSTER_LABEL", label),
                ("BEARER_TOKEN", token),
                ("USERNAME", username),
                ("PASSWORD", password),
            )
            if value is not None
        ]
        if given:
            # Without the URL these would be silently unused: say so instead.
            raise ConfigError(f"{given[0]} is set but {PREFIX}PROMETHEUS_URL is not")
        return PrometheusSource()
    if "@" in urlsplit(raw_url).netloc:
        # Checked first, so no message echoes them: the URL names the source everywhere.
        raise ConfigError(
            f"{PREFIX}PROMETHEUS_URL: holds credentials; give them as "
            f"{PREFIX}PROMETHEUS_USERNAME and {PREFIX}PROMETHEUS_PASSWORD"
        )
    # Only with a URL: without one (Managed Prometheus) a cold start does not import them.
    from loopbreaker.diagnosis.readers.flags import cluster_label_name, http_url

    try:
        base_url = http_url(raw_url)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"{PREFIX}PROMETHEUS_URL: {exc}") from exc
    try:
        cluster_label = cluster_label_name(label) if label is not None else None
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"{PREFIX}PROMETHEUS_CLUSTER_LABEL: {exc}") from exc
    if token is not None and (username is not None or password is not None):
        raise ConfigError(
            f"{PREFIX}PROMETHEUS_BEARER_TOKEN and basic auth ({PREFIX}PROMETHEUS_USERNAME, "
            f"{PREFIX}PROMETHEUS_PASSWORD) are both set: use one"
        )
    if (username is None) != (password is None):
        missing = "PROMETHEUS_PASSWORD" if password is None else "PROMETHEUS_USERNAME"
        raise ConfigError(f"basic auth to the Prometheus needs {PREFIX}{missing} too")
    return PrometheusSource(
        url=base_url,
        cluster_label=cluster_label,
        bearer_token=token,
        username=username,
        password=password,
    )


if __name__ == "__main__":
    print(markdown_table())
