"""Parsers of one kind of setting value each; a bad value is a ConfigError naming it."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from loopbreaker.errors import ConfigError, InvalidInput, LoopbreakerError
from loopbreaker.model import WorkloadKind
from loopbreaker.remediation.owners import Marker, parse_markers
from loopbreaker.remediation.rules import DEFAULT_MAX_UNREADY_SHARE
from loopbreaker.settings.model import (
    MAX_DURATION,
    PREFIX,
    NotifierSpec,
    Secret,
    StoreKind,
    StoreSpec,
)

#: Reads one ``LOOPBREAKER_<NAME>`` (stripped; None when unset or blank).
Getter = Callable[[str], str | None]

_LIMITS = {"MAX_SIGNALS": (1, 10_000), "QUERY_BUDGET": (0, 1_000), "SETTLE_BATCH": (1, 1_000)}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_SECRET_NAME = re.compile(r"^projects/[^/\s]+/secrets/[^/\s]+/versions/[^/\s]+$")
_TOPIC = re.compile(r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/[A-Za-z][\w.~+%-]{2,254}$")
_BARE_TOPIC = re.compile(r"^[A-Za-z][\w.~+%-]{2,254}$")
URL_RE = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def workload_kind(value: str | None) -> WorkloadKind:
    if value is None:
        return WorkloadKind.JOBSET
    try:
        return WorkloadKind.parse(value)
    except LoopbreakerError as exc:
        raise ConfigError(f"{PREFIX}WORKLOAD_KIND: {exc}") from exc


def parse_duration(text: str) -> timedelta:
    """``90s``, ``1.5m``, ``6h``, ``7d``. A unit is required: is ``30`` seconds or minutes?"""
    match = _DURATION_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration with a unit, such as 60s, 30m, 6h or 7d")
    seconds = float(match[1]) * _UNITS[match[2]]
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{text!r} is longer than {MAX_DURATION.days}d")
    return timedelta(seconds=seconds)


def duration(name: str, raw: str | None, default: timedelta) -> timedelta:
    if raw is None:
        return default
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}{name}={raw!r}: {exc}") from exc


def integer(name: str, raw: str | None, default: int) -> int:
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


def boolean(name: str, raw: str | None, default: bool) -> bool:
    if raw is None:
        return default
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{PREFIX}{name}={raw!r}: expected true or false")


def store_spec(raw: str) -> StoreSpec:
    if raw == StoreKind.FIRESTORE.value:
        return StoreSpec(StoreKind.FIRESTORE)
    if raw.startswith("sqlite:") and raw[len("sqlite:") :].strip():
        return StoreSpec(StoreKind.SQLITE, Path(raw[len("sqlite:") :].strip()).expanduser())
    raise ConfigError(f"{PREFIX}STORE={raw!r}: expected 'firestore' or 'sqlite:PATH'")


def notifier_spec(raw: str) -> NotifierSpec:
    if raw in ("log", "slack", "google-chat"):
        return NotifierSpec(raw)
    if raw.startswith("file:") and raw[len("file:") :].strip():
        return NotifierSpec("file", Path(raw[len("file:") :].strip()).expanduser())
    raise ConfigError(
        f"{PREFIX}NOTIFIER={raw!r}: expected 'slack', 'google-chat', 'log' or 'file:DIR'"
    )


def secret(get: Getter, name: str) -> Secret | None:
    """``<NAME>`` (the value), ``<NAME>_SECRET_NAME`` (Secret Manager, read at start by
    settings/secrets.py) or ``<NAME>_FILE`` (a mounted Kubernetes Secret, read here): one of
    them."""
    given = [
        suffix for suffix in ("", "_SECRET_NAME", "_FILE") if get(f"{name}{suffix}") is not None
    ]
    if len(given) > 1:
        both = " and ".join(f"{PREFIX}{name}{suffix}" for suffix in given)
        raise ConfigError(f"{both} are both set: use one")
    value = get(name)
    secret_name = get(f"{name}_SECRET_NAME")
    file = get(f"{name}_FILE")
    if secret_name is not None:
        if not _SECRET_NAME.match(secret_name):
            raise ConfigError(
                f"{PREFIX}{name}_SECRET_NAME={secret_name!r}: expected "
                "projects/PROJECT/secrets/SECRET/versions/VERSION"
            )
        return Secret(name=secret_name)
    if file is not None:
        path = Path(file).expanduser()
        return Secret(value=read_secret_file(path, f"{PREFIX}{name}_FILE={file!r}"), file=path)
    return Secret(value=value) if value is not None else None


def read_secret_file(path: Path, what: str) -> str:
    """The text of a mounted secret file (the CLI's reader); ConfigError naming ``what``."""
    from loopbreaker.diagnosis.readers.flags import read_secret_file as read

    try:
        return read(path, what)
    except InvalidInput as exc:
        raise ConfigError(str(exc)) from exc


def url(get: Getter, name: str, default: str) -> str:
    raw = get(name) or default
    if not URL_RE.match(raw):
        raise ConfigError(f"{PREFIX}{name}={raw!r}: expected an http(s) URL")
    return raw


def unready_share(raw: str | None) -> float:
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


def foreign_markers(raw: str | None) -> tuple[Marker, ...]:
    """LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS: ``[SYSTEM:]KIND:KEY[=VALUE]``, comma-separated."""
    try:
        return parse_markers(raw or "")
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}FOREIGN_REMEDIATION_MARKERS: {exc}") from exc


def topic(raw: str | None, project: str | None) -> str | None:
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
