"""How an incident and a pause are written as rows of the SQLite store, and a pause
read back (the store's transactions and reads are in the package's module)."""

from __future__ import annotations

import json
import sqlite3

from loopbreaker.incidents import Incident, PauseRecord
from loopbreaker.incidents.store.sqlite.schema import _t
from loopbreaker.timeutil import epoch_us


def write_incident(db: sqlite3.Connection, incident: Incident) -> None:
    """Insert or replace the incident's row: its indexed columns and its document."""
    db.execute(
        "INSERT INTO incidents "
        "(id, key, state, final, first_event, last_event, opened_at, settle_at, expires_at, "
        "data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET key = excluded.key, state = excluded.state, "
        "final = excluded.final, first_event = excluded.first_event, "
        "last_event = excluded.last_event, settle_at = excluded.settle_at, "
        "expires_at = excluded.expires_at, data = excluded.data",
        (
            _t(incident.id),
            _t(str(incident.key)),
            incident.state.value,
            1 if incident.final else 0,
            epoch_us(incident.first_event),
            epoch_us(incident.last_event),
            epoch_us(incident.opened_at),
            epoch_us(incident.settle_at) if incident.settle_at else None,
            epoch_us(incident.expires_at) if incident.expires_at else None,
            json.dumps(incident.to_dict(), separators=(",", ":")),
        ),
    )


def latest_pause(db: sqlite3.Connection) -> PauseRecord | None:
    """The latest pause not resumed, if any."""
    row = db.execute(
        "SELECT data FROM pauses WHERE resumed = 0 ORDER BY at DESC, id DESC LIMIT 1"
    ).fetchone()
    return PauseRecord.from_dict(json.loads(row[0])) if row else None


def put_pause(db: sqlite3.Connection, record: PauseRecord) -> None:
    """Insert or replace a pause's row."""
    db.execute(
        "INSERT OR REPLACE INTO pauses (id, at, resumed, data) VALUES (?, ?, ?, ?)",
        (
            _t(record.id),
            epoch_us(record.at),
            0 if record.resumed_at is None else 1,
            json.dumps(record.to_dict(), separators=(",", ":")),
        ),
    )
