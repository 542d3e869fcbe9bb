"""When a telemetry file counts as unreadable, the same for every name (pure, stdlib only).

The files are what the tools write (docs/diagnosis.md, "Offline telemetry"):

- ``gcloud logging read --format=json`` writes one JSON array, ``[]`` when nothing
  matched (an empty file is a failed command, not an empty result);
- ``kubectl get ... -o json`` writes one JSON document, a ``List`` (``items``);
- ``jq -c '.[]'`` and the Cloud Storage sink write JSON Lines, one LogEntry a line; zero
  lines is a valid, empty JSON Lines file.

A file that cannot be read at all is an :class:`InvalidTelemetry` naming it and what is
wrong (exit 2 from the CLI): not a regular file, not readable, not UTF-8, empty where a
document is expected, not JSON anywhere in it, or, for a log file of one document, not a
LogEntry. A single refused entry of an array or of JSON Lines that holds others is not
the file's fault: it is a rejected entry, counted and reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopbreaker.errors import InvalidTelemetry
from loopbreaker.signals.files import Item

_BLANK = b" \t\r\n\xef\xbb\xbf"
#: Bytes read to tell an empty (or white-space-only) file from ``[]``.
_PROBE = 65536


def require_file(path: Path, name: str) -> bool:
    """Whether a telemetry file of that name is there; one that is there but is not a
    regular file (a directory called ``pods.json``) cannot be read."""
    if path.is_file():
        return True
    if path.exists():
        raise InvalidTelemetry(f"{name}: not a regular file")
    return False


def read_json_document(path: Path, name: str | None = None) -> Any:
    """The one JSON document of a kubectl file (nodes.json, pods.json, jobs.json,
    jobsets.json...), or one line naming the file and what is wrong."""
    name = name or path.name
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidTelemetry(f"{name}: cannot be read: {exc.strerror or exc}") from exc
    if not data.strip(_BLANK):
        raise InvalidTelemetry(f"{name}: empty file; 'kubectl get ... -o json' writes a List")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidTelemetry(
            f"{name}: not UTF-8 text (byte {exc.start}); save the output of kubectl as UTF-8"
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidTelemetry(
            f"{name}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    except RecursionError as exc:
        raise InvalidTelemetry(f"{name}: invalid JSON: nested too deep") from exc
    except ValueError as exc:  # an integer over Python's digit limit
        raise InvalidTelemetry(f"{name}: invalid JSON: a number too long to read") from exc


@dataclass
class LogFileCheck:
    """Counts what one log file held while it is streamed; :meth:`finish` refuses a file
    nothing of which could be read. ``document``: the file is documented as one JSON
    document (``logs.json``), so an empty one is a failed export."""

    path: Path
    name: str
    document: bool = False
    items: int = 0
    decoded: int = 0
    first_refused: str | None = None

    def refused(self, item: Item) -> None:
        """An item the reader could not decode as JSON."""
        self.items += 1
        if self.first_refused is None:
            self.first_refused = f"{item.location(self.name)}: {item.error}"

    def read(self) -> None:
        """An item decoded as JSON (a LogEntry or not)."""
        self.items += 1
        self.decoded += 1

    def not_an_entry(self, item: Item, why: str) -> None:
        """A JSON item that is not a LogEntry: the file's fault when it is the whole file."""
        if item.mark == "":
            raise InvalidTelemetry(
                f"{self.name}: {why}; expected a LogEntry, a JSON array of them or JSON Lines"
            )

    def finish(self) -> None:
        if self.items and not self.decoded:
            many = f"; none of its {self.items} entries is JSON" if self.items > 1 else ""
            raise InvalidTelemetry(f"{self.first_refused}{many}")
        if not self.items and self.document and _blank(self.path):
            raise InvalidTelemetry(
                f"{self.name}: empty file; 'gcloud logging read --format=json' writes [] "
                "when nothing matched"
            )


def _blank(path: Path) -> bool:
    try:
        with path.open("rb") as raw:
            return not raw.read(_PROBE).strip(_BLANK)
    except OSError:
        return False
