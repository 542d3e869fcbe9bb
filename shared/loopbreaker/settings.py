"""Configuration: ``LOOPBREAKER_*`` environment variables, parsed and validated once.

:func:`load_settings` is the only reader of the environment. A bad value raises
:class:`ConfigError` naming the variable, so a misconfigured function fails at start-up
instead of on the first event. Every default is a named module constant below.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from loopbreaker.errors import ConfigError

PREFIX = "LOOPBREAKER_"

#: Signals of one key whose event times are at most this far apart form one incident.
DEFAULT_GROUPING_WINDOW = timedelta(minutes=30)
#: An incident is diagnosed once no new signal has arrived for this long (debounce).
DEFAULT_SETTLE_TIME = timedelta(seconds=60)
#: An incident awaiting approval for longer than this expires.
DEFAULT_STALE_AFTER = timedelta(hours=6)
#: Signals kept verbatim per incident; counts per kind stay exact beyond it.
DEFAULT_MAX_SIGNALS = 500
#: PromQL/Logging queries one diagnosis of one incident may spend.
DEFAULT_QUERY_BUDGET = 10
#: Incidents diagnosed per ``on_schedule`` call, so one call stays well inside its timeout.
DEFAULT_SETTLE_BATCH = 25
#: How long dedup keys are remembered: Pub/Sub keeps unacked messages up to 7 days.
DEFAULT_DEDUP_RETENTION = timedelta(days=8)
#: The embedded store of local runs (relative to the working directory).
DEFAULT_LOCAL_STORE = "sqlite:.loopbreaker/incidents.sqlite"
DEFAULT_CLOUD_STORE = "firestore"
DEFAULT_FIRESTORE_DATABASE = "(default)"
DEFAULT_COLLECTION_PREFIX = "loopbreaker"
DEFAULT_NOTIFIER = "log"
DEFAULT_LOG_LEVEL = "INFO"

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
    kind: str  # "log" or "file"
    path: Path | None = None


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
    dry_run: bool = True
    #: Query Managed Prometheus, Cloud Logging and the GKE API when diagnosing.
    live_sources: bool = False
    telemetry_dir: Path | None = None
    notifier: NotifierSpec = NotifierSpec(DEFAULT_NOTIFIER)
    log_level: str = DEFAULT_LOG_LEVEL
    #: ``LOOPBREAKER_*`` names that are set but unknown (typos); logged at start-up.
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    description: str


#: The documented variables, in README order (``python -m loopbreaker.settings`` prints them).
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
        "Record what would be done instead of mutating clusters or VMs.",
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
        "`log` (structured log line) or `file:DIR` (one JSON file per incident).",
    ),
    Variable(
        "LOOPBREAKER_LOG_LEVEL",
        f"`{DEFAULT_LOG_LEVEL}`",
        "`DEBUG`, `INFO`, `WARNING` or `ERROR`.",
    ),
)
_KNOWN = frozenset(v.name for v in VARIABLES)


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
    for name, value in (("GROUPING_WINDOW", grouping), ("STALE_AFTER", stale)):
        if value <= timedelta(0):
            raise ConfigError(f"{PREFIX}{name}: must be longer than zero")
    if retention < timedelta(days=1):
        raise ConfigError(f"{PREFIX}DEDUP_RETENTION: must be at least 1d to cover redeliveries")
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
        dry_run=_bool("DRY_RUN", get("DRY_RUN"), True),
        live_sources=_bool("LIVE_SOURCES", get("LIVE_SOURCES"), runtime is Runtime.CLOUD),
        telemetry_dir=Path(telemetry) if telemetry else None,
        notifier=_notifier(get("NOTIFIER") or DEFAULT_NOTIFIER),
        log_level=log_level,
        unknown=tuple(sorted(k for k in environ if k.startswith(PREFIX) and k not in known)),
    )


def parse_duration(text: str) -> timedelta:
    """``90s``, ``1.5m``, ``6h``, ``7d``. A unit is required: is ``30`` seconds or minutes?"""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration with a unit, such as 60s, 30m, 6h or 7d")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2]])


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
    if raw == "log":
        return NotifierSpec("log")
    if raw.startswith("file:") and raw[len("file:") :].strip():
        return NotifierSpec("file", Path(raw[len("file:") :].strip()).expanduser())
    raise ConfigError(f"{PREFIX}NOTIFIER={raw!r}: expected 'log' or 'file:DIR'")


def markdown_table() -> str:
    """The README table of variables and defaults."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {v.default} | {v.description} |" for v in VARIABLES]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
