"""The SQLite store's tables, and its guards for bound text and busy-database errors."""

from __future__ import annotations

import sqlite3
from typing import NoReturn

from loopbreaker.errors import TransientError
from loopbreaker.signals.decode import escape_surrogates

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS incidents (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    state TEXT NOT NULL,
    final INTEGER NOT NULL,
    first_event INTEGER NOT NULL,
    last_event INTEGER NOT NULL,
    opened_at INTEGER NOT NULL,
    settle_at INTEGER,
    expires_at INTEGER,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS incidents_key ON incidents (key, final);
CREATE INDEX IF NOT EXISTS incidents_settle ON incidents (settle_at) WHERE settle_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS incidents_expires ON incidents (expires_at)
    WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS signals (
    incident_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (incident_id, seq)
);
CREATE TABLE IF NOT EXISTS dedup (
    id TEXT PRIMARY KEY,
    incident_id TEXT,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dedup_at ON dedup (at);
CREATE TABLE IF NOT EXISTS host_failures (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    node TEXT,
    at TEXT NOT NULL,
    incident_id TEXT
);
CREATE INDEX IF NOT EXISTS host_failures_host ON host_failures (host);
CREATE INDEX IF NOT EXISTS host_failures_node ON host_failures (node);
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    incident_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pauses (
    id TEXT PRIMARY KEY,
    at INTEGER NOT NULL,
    resumed INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS deletions (
    cluster TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (cluster, incident_id)
);
"""

_TRANSIENT_MARKERS = ("locked", "busy")


def _reraise(exc: sqlite3.OperationalError) -> NoReturn:
    """A busy or locked database is worth a retry; anything else is a real fault."""
    text = str(exc).lower()
    if any(marker in text for marker in _TRANSIENT_MARKERS):
        raise TransientError(f"SQLite store busy: {exc}") from exc
    raise exc


def _t(text: str) -> str:
    """A bound string as valid UTF-8 (sqlite3 cannot encode a lone surrogate; the
    decoders refuse them, this is the store's own guard, consistent for reads and writes)."""
    return escape_surrogates(text)


def _opt(text: str | None) -> str | None:
    return None if text is None else escape_surrogates(text)
