"""Stream the items of delivery and LogEntry files, one at a time (pure, stdlib only).

A path is a file or a directory. A file holds a JSON array, JSON Lines, or one JSON
document (which may span lines). A directory is read as the Cloud Storage sink layout:
JSON Lines files ``LOG_ID/YYYY/MM/DD/HH:MM:SS_HH:MM:SS_S<n>.json``, in time order across
logs (other files in it follow, by path).

Each item carries its position (``file[index]`` in an array, ``file:line`` in JSON Lines,
``file`` for a file of one document) and either its value, decoded by
:mod:`loopbreaker.signals.decode`, or why it was refused: not JSON, nested too deep, a
number too long, not valid Unicode, or over :data:`MAX_ITEM_SIZE`. Memory is bounded by
one item, never by the file: an oversized item is skipped without being kept. When a
file's structure breaks (an array cut short) the last item from it says so and is
``fatal``: nothing after it in that file can be read; the next file is read all the same.

Arrays, and the scanner and text window behind them, are in
:mod:`loopbreaker.signals.files.arrays`.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from loopbreaker.errors import InvalidInput
from loopbreaker.signals import decode
from loopbreaker.signals.files.arrays import (
    _BOM,
    _BYTES_WHITESPACE,
    _WHITESPACE,
    Row,
    Scanner,
    Window,
    read_array,
    read_value,
)
from loopbreaker.signals.files.arrays import ArrayLines as _ArrayLines  # noqa: F401 (tests read it here)

#: The largest item read, in bytes of a line or characters of an array element: a Pub/Sub
#: message holds at most 10 MB of data, 13.4 MB once base64 in an envelope.
MAX_ITEM_SIZE = 32 * 1024 * 1024
#: Characters read at a time from arrays and documents, and bytes from files (a default
#: 8 kB buffer would cost a system call every few lines).
CHUNK = 1 << 20

# The Cloud Storage sink's object names below the log id.
_SINK_FILE = re.compile(
    r"(?P<day>\d{4}/\d{2}/\d{2})/(?P<start>\d{2}:\d{2}:\d{2})_(?P<end>\d{2}:\d{2}:\d{2})"
    r"_S(?P<shard>\d+)\.json$"
)


@dataclass(slots=True)
class Item:
    """One item of a file: its decoded value, or why it could not be read. (Not frozen:
    a frozen dataclass costs a microsecond more an item, a tenth of reading one.)"""

    #: Position over all the paths read, from 0.
    index: int
    #: The file it is in.
    path: Path
    #: ``":"`` with a line number, ``"["`` with an element index, ``""`` for the file.
    mark: str
    position: int
    value: Any = None
    error: str | None = None
    #: The file could not be read past this item.
    fatal: bool = False

    @property
    def source(self) -> str:
        """``file[index]``, ``file:line`` or ``file``."""
        return self.location(str(self.path))

    def location(self, name: str) -> str:
        """Where the item is, with the file called ``name``."""
        if self.mark == ":":
            return f"{name}:{self.position}"
        if self.mark == "[":
            return f"{name}[{self.position}]"
        return name


def expand(paths: Iterable[Path]) -> list[Path]:
    """The files to read, in order; InvalidInput for a path that is not there.

    Checked before anything is read, so a typo in the last path stops the run at once.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = [
                p
                for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.parts[-1:])
            ]
            files.extend(sorted(found, key=lambda p: _sink_order(p, path)))
        elif path.is_file():
            files.append(path)
        else:
            raise InvalidInput(f"cannot read {path}: no such file or directory")
    return files


def read(
    paths: Sequence[Path], *, max_item_size: int = MAX_ITEM_SIZE, chunk: int = CHUNK
) -> Iterator[Item]:
    """Every item of every path, in order (directories as the sink layout)."""
    return read_files(expand(paths), max_item_size=max_item_size, chunk=chunk)


def read_files(
    paths: Sequence[Path], *, max_item_size: int = MAX_ITEM_SIZE, chunk: int = CHUNK
) -> Iterator[Item]:
    """Every item of files already :func:`expand`-ed, in order."""
    index = 0
    for path in paths:
        for mark, position, value, error, fatal in _read_file(path, max_item_size, chunk):
            yield Item(index, path, mark, position, value, error, fatal)
            index += 1


def _sink_order(path: Path, root: Path) -> tuple[Any, ...]:
    relative = path.relative_to(root).as_posix()
    match = _SINK_FILE.search(relative)
    if match is None:
        return (1, relative)
    log_id = relative[: match.start()]
    return (0, match["day"], match["start"], match["end"], int(match["shard"]), log_id)


def _read_file(path: Path, max_item_size: int, chunk: int) -> Iterator[Row]:
    try:
        with open(path, "rb", buffering=max(chunk, io.DEFAULT_BUFFER_SIZE)) as raw:
            first = _first_byte(raw)
            if first is None:
                return
            raw.seek(0)
            if first == b"[" and not _lines_of_arrays(raw, max_item_size, chunk):
                raw.seek(0)
                yield from read_array(raw, max_item_size, chunk)
            else:
                raw.seek(0)
                yield from _lines_or_document(raw, max_item_size, chunk)
    except OSError as exc:
        yield "", 0, None, f"cannot read {path}: {exc}", True


def _first_byte(raw: IO[bytes]) -> bytes | None:
    """The first byte that is not white space (or a BOM), or None for an empty file."""
    start = True
    while block := raw.read(65536):
        if start:
            block = block.removeprefix(_BOM)
            start = False
        stripped = block.lstrip(b" \t\r\n")
        if stripped:
            return stripped[:1]
    return None


def _lines_of_arrays(raw: IO[bytes], max_item_size: int, chunk: int) -> bool:
    """Whether a file that starts with "[" is JSON Lines (its first line a whole value,
    more lines after it) rather than one array. The first line is decoded only when
    another follows it: an array on one line is often the whole file."""
    if not _more_lines(raw, chunk):
        return False
    raw.seek(0)
    lines = _numbered_lines(raw, max_item_size)
    first = next(lines, None)
    if first is None or first[1] is None:
        return False
    try:
        decode.loads(first[1])
    except decode.InvalidJson as exc:
        if exc.syntax or not _complete(first[1]):
            return False
    return next(lines, None) is not None


def _more_lines(raw: IO[bytes], chunk: int) -> bool:
    """Whether anything but white space follows the first line (read a chunk at a time,
    nothing kept)."""
    newline = False
    while block := raw.read(chunk):
        if not newline:
            end = block.find(b"\n")
            if end == -1:
                continue
            newline, block = True, block[end + 1 :]
        if block.strip(_BYTES_WHITESPACE):
            return True
    return False


# --- JSON Lines, or one document ----------------------------------------------------------

_Line = tuple[int, "bytes | None", "str | None"]


def _lines_or_document(raw: IO[bytes], max_item_size: int, chunk: int) -> Iterator[Row]:
    lines = _numbered_lines(raw, max_item_size)
    first = next(lines, None)
    if first is None:
        return
    number, data, why = first
    value: Any = None
    if data is not None:
        try:
            value = decode.loads(data)
        except decode.InvalidJson as exc:
            if _cut_at_line_end(data, exc.pos) if exc.syntax else _opened(data):
                # Not one JSON value per line: one document spread over lines.
                raw.seek(0)
                yield from _document(raw, max_item_size, chunk)
                return
            why = exc.reason
    second = next(lines, None)
    if second is None:
        # A file of one line is a file of one document.
        yield "", 0, value, why, False
        return
    yield ":", number, value, why, False
    loads = decode.bulk_loads()
    InvalidJson = decode.InvalidJson
    for number, data, why in itertools.chain((second,), lines):
        if data is None:
            yield ":", number, None, why, False
            continue
        try:
            yield ":", number, loads(data), None, False
        except InvalidJson as exc:
            yield ":", number, None, exc.reason, False


def _numbered_lines(raw: IO[bytes], max_item_size: int) -> Iterator[_Line]:
    """(line number, bytes, None) per non-blank line, or (number, None, why) for a line
    over the size limit (skipped without being kept)."""
    readline = raw.readline
    limit = max_item_size + 1
    line = readline(limit).removeprefix(_BOM)
    number = 1
    while line:
        if len(line) > max_item_size and not line.endswith(b"\n"):
            size = len(line)
            while line and not line.endswith(b"\n"):
                line = readline(CHUNK)
                size += len(line)
            yield number, None, f"line of {size} bytes is over the limit of {max_item_size}"
        elif not line.isspace():
            yield number, line, None
        line = readline(limit)
        number += 1


def _complete(line: bytes) -> bool:
    """Whether a line's brackets close (strings aside): a whole value, even if refused."""
    scanner = Scanner()
    scanner.run(line.decode("utf-8", "replace"), 0)
    return scanner.depth == 0 and not scanner.in_string


def _opened(line: bytes) -> bool:
    """Whether a line refused for its content (not its syntax: not UTF-8, too deep)
    opens a value it does not close, as a document's first line does. Only a line that
    starts a value can: ``#{`` followed by bytes that are not UTF-8 is a bad line of
    JSON Lines, not a document."""
    return line.lstrip(_BYTES_WHITESPACE)[:1] in (b"{", b"[") and not _complete(line)


def _cut_at_line_end(line: bytes, pos: int) -> bool:
    """Whether a line failed only because it ended, as the first line of a pretty-printed
    document does (``{``); a broken line fails before its end."""
    text = line.decode("utf-8", "replace")
    body = text.rstrip(_WHITESPACE)
    return text.lstrip(_WHITESPACE).startswith("{") and pos >= len(body)


def _document(raw: IO[bytes], max_item_size: int, chunk: int) -> Iterator[Row]:
    window = Window(raw, chunk)
    window.skip_whitespace()
    outcome = read_value(window, max_item_size)
    if outcome.fatal:
        yield "", 0, None, f"not valid JSON or JSON Lines: {outcome.error}", True
        return
    yield "", 0, outcome.value, outcome.error, False
    window.skip_whitespace()
    if not window.at_end():
        line = window.line()
        yield (
            ":",
            line,
            None,
            f"not valid JSON or JSON Lines: more text after the document at line {line}",
            True,
        )
