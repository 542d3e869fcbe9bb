"""The reading half of a replay: files to screened records, in order.

A replay spends most of its time reading, decoding and screening entries, and the rest
in the responder and its store. For a large input the reading half runs in a child
process (``python -m loopbreaker.replay.reader PATH...``) that streams blocks of
records to the replay through a pipe, so the two halves use two cores; a small input is
read in-process. Either way the replay gets the same records in the same order.

A record is a tuple (cheap to pickle), its first member the kind:

* ``(QUIET, index, message_id, entry_key, event_us, identity, insert_id)``: a LogEntry
  that matches no rule (:func:`loopbreaker.signals.classify.screen`), with what makes its
  dedup id (:func:`entry_id`), its event time in microseconds since the epoch (an int
  pickles in a fraction of a datetime's time; :func:`moment` reads it) and its
  :class:`~loopbreaker.signals.classify.Identity`: the responder needs nothing else of
  it. Equal identities (and log names) are one object, pickled once a block;
* ``(DELIVERY, index, source, delivery)``: anything else that decoded;
* ``(ERROR, index, source, reason, message_id, unreadable)``: an item that could not be
  decoded; ``unreadable`` is set when its file could not be read past it.

:class:`EventOrder` stages the records in a SQLite table and reads them back by event
time: exports (``gcloud logging read``) are newest first, and the live responder saw the
entries oldest first.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from loopbreaker import incidents
from loopbreaker.errors import InvalidContext, InvalidLogEntry
from loopbreaker.signals import files
from loopbreaker.signals.classify import screen
from loopbreaker.signals.envelope import Delivery, UndecodableMessage, decode, is_bare_entry
from loopbreaker.timeutil import epoch_us, from_epoch_us, parse_rfc3339

QUIET, DELIVERY, ERROR = "quiet", "delivery", "error"
Record = tuple[Any, ...]
#: A QUIET record's entry id, or the (logName, timestamp) it is hashed from with the
#: insertId.
EntryKey = str | tuple[Any, Any]

#: Records a child process sends at a time: large enough that a block costs one pipe
#: write, small enough that the replay starts at once and memory stays a few MB.
BLOCK = 1024
#: Inputs at least this large are read by a child process (when two cores are free):
#: below it, starting the child costs more than it saves.
CHILD_MIN_BYTES = 32 * 1024 * 1024
#: Identities and log names remembered to share one object among equal ones (a job's
#: logs name a few hundred pods and nodes); past it the memory starts over.
MAX_SHARED = 4096
#: The pipe's buffer (Linux): both processes keep working while a block is in transit.
PIPE_BYTES = 4 * 1024 * 1024


def event_time(delivery: Delivery) -> datetime | None:
    """When the delivery's entry happened: its timestamp, else the receive, sink or
    publish time (the first one that reads as RFC 3339)."""
    entry = delivery.entry
    candidates = []
    if isinstance(entry, dict):
        candidates += [entry.get("timestamp"), entry.get("receiveTimestamp")]
    candidates += [delivery.sink_timestamp, delivery.publish_time]
    for value in candidates:
        if isinstance(value, str):
            try:
                return parse_rfc3339(value)
            except InvalidContext:
                continue
    return None


def records(paths: Sequence[Path]) -> Iterator[Record]:
    """Every item of ``paths`` (files, already expanded) as a record, in order (in this
    process)."""
    # Equal identities and log names as one object each (pickled once a block).
    shared: dict[Any, Any] = {}
    for item in files.read_files(paths):
        if item.error is not None:
            unreadable = f"{item.path}: {item.error} (at {item.source})" if item.fatal else None
            yield ERROR, item.index, item.source, item.error, None, unreadable
            continue
        value = item.value
        delivery: Delivery | None = None
        if type(value) is dict and is_bare_entry(value):
            entry = value  # a bare LogEntry, as decode() would find: no Delivery needed yet
        else:
            try:
                delivery = decode(value)
            except UndecodableMessage as exc:
                yield ERROR, item.index, item.source, exc.reason, exc.message_id, None
                continue
            entry = delivery.entry
        try:
            quiet = screen(entry)
        except InvalidLogEntry:
            quiet = None  # the responder refuses it, and says why
        if quiet is None:
            yield DELIVERY, item.index, item.source, delivery or decode(value)
        else:
            insert_id = quiet.insert_id
            entry_key: EntryKey
            if insert_id:
                # The id is hashed by the replay: the two processes share the work.
                log_name = entry.get("logName")
                entry_key = (shared.setdefault(log_name, log_name), entry.get("timestamp"))
            else:
                entry_key = incidents.entry_id(entry)
            # The entry's own time, else the sink's or Pub/Sub's: what event_time() reads.
            moment = quiet.timestamp or event_time(delivery or decode(value))
            event_us = None if moment is None else epoch_us(moment)
            identity = shared.setdefault(quiet.identity, quiet.identity)
            if len(shared) > MAX_SHARED:
                shared.clear()
            yield (
                QUIET,
                item.index,
                delivery.message_id if delivery else None,
                entry_key,
                event_us,
                identity,
                insert_id,
            )


def moment(event_us: int | None) -> datetime | None:
    """The event time of a QUIET record (UTC)."""
    return None if event_us is None else from_epoch_us(event_us)


def entry_id(entry_key: EntryKey, insert_id: str | None) -> str:
    """The dedup id of a QUIET record's entry (:func:`loopbreaker.incidents.entry_id`)."""
    if isinstance(entry_key, str):
        return entry_key
    assert insert_id  # a key of two fields comes with the insertId
    return incidents.keyed_entry_id(entry_key[0], entry_key[1], insert_id)


def record_us(record: Record) -> int | None:
    """A QUIET or DELIVERY record's event time in microseconds, if it has one."""
    if record[0] == QUIET:
        return record[4]  # type: ignore[no-any-return]
    if record[0] == DELIVERY:
        moment = event_time(record[3])
        return None if moment is None else epoch_us(moment)
    return None


class EventOrder:
    """Records staged in a SQLite file and read back in event-time order (stable: equal
    times keep their reading order). Memory holds one block, not the input. A record
    without an event time takes the time of the one read before it; the ones before
    any timed record come first."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        # A scratch file: nothing to survive a crash.
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE staged (seq INTEGER PRIMARY KEY, at INTEGER, record BLOB)")
        self._block: list[tuple[int | None, bytes]] = []
        self._last: int | None = None
        self.count = 0

    def add(self, records: Iterable[Record]) -> None:
        for record in records:
            at = record_us(record)
            if at is None:
                at = self._last
            self._last = at
            self._block.append((at, pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)))
            self.count += 1
            if len(self._block) >= BLOCK:
                self._flush()

    def _flush(self) -> None:
        if self._block:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT INTO staged (at, record) VALUES (?, ?)", self._block)
            self._block = []

    def first_us(self) -> int | None:
        """The earliest event time staged."""
        self._flush()
        row = self._db.execute("SELECT MIN(at) FROM staged").fetchone()
        return None if row is None else row[0]

    def __iter__(self) -> Iterator[Record]:
        self._flush()
        # Indexed once loaded: cheaper than keeping an index up to date while inserting,
        # and the ordered read then sorts keys, not whole records. NULLs sort first.
        self._db.execute("CREATE INDEX IF NOT EXISTS staged_at ON staged (at, seq)")
        for (blob,) in self._db.execute("SELECT record FROM staged ORDER BY at, seq"):
            yield pickle.loads(blob)

    def close(self) -> None:
        self._db.close()


@contextmanager
def read(paths: Sequence[Path], *, child: bool | None = None) -> Iterator[Iterator[Record]]:
    """The records of ``paths`` (already expanded to files): read by a child process when
    ``child`` says so, or by default when the input is large and two cores are free."""
    if child is None:
        child = _cores() >= 2 and sum(_size(p) for p in paths) >= CHILD_MIN_BYTES
    if not child:
        yield records(paths)
        return
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, *map(str, paths)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        assert process.stdout is not None
        _widen(process.stdout)
        try:
            yield _received(process, process.stdout, errors)
        finally:
            # Done, or the replay stopped early (an error, ^C): the child goes too.
            process.kill()
            process.wait()
            process.stdout.close()


def _received(
    process: subprocess.Popen[bytes], stream: IO[bytes], errors: IO[bytes]
) -> Iterator[Record]:
    while True:
        try:
            block = pickle.load(stream)
        except EOFError:
            break
        except (pickle.UnpicklingError, ValueError) as exc:
            raise _child_failed(process, errors, f"its output broke off ({exc})") from None
        yield from block
    if process.wait() != 0:
        raise _child_failed(process, errors, f"it exited with status {process.returncode}")


def _child_failed(process: subprocess.Popen[bytes], errors: IO[bytes], what: str) -> RuntimeError:
    process.wait()
    errors.seek(0)
    said = errors.read().decode(errors="replace").strip().splitlines()
    last = said[-1] if said else "it said nothing"
    return RuntimeError(f"the replay's reader process failed: {what}: {last}")


def _widen(pipe: IO[bytes]) -> None:
    """A larger pipe buffer where the system allows one (it is only faster)."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # reported when it is read


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def main(argv: Sequence[str]) -> int:
    """The child: records of the files named in ``argv``, pickled in blocks to stdout."""
    out = sys.stdout.buffer
    block: list[Record] = []
    for record in records([Path(a) for a in argv]):
        block.append(record)
        if len(block) >= BLOCK:
            pickle.dump(block, out, protocol=pickle.HIGHEST_PROTOCOL)
            block = []
    if block:
        pickle.dump(block, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
