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
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from loopbreaker.errors import InvalidInput
from loopbreaker.signals import decode

#: The largest item read, in bytes of a line or characters of an array element: a Pub/Sub
#: message holds at most 10 MB of data, 13.4 MB once base64 in an envelope.
MAX_ITEM_SIZE = 32 * 1024 * 1024
#: Characters read at a time from arrays and documents, and bytes from files (a default
#: 8 kB buffer would cost a system call every few lines).
CHUNK = 1 << 20

_WHITESPACE = " \t\r\n"
_BYTES_WHITESPACE = b" \t\r\n"
_NON_WHITESPACE = re.compile(r"[^ \t\r\n]")
_NUMBER_RUN = re.compile(r"[-+.eE0-9]*")
_BOM = b"\xef\xbb\xbf"
# Tokens the resynchronising scanner cares about, outside and inside strings.
_OUTSIDE = re.compile(r'[\[\]{}",]')
_INSIDE = re.compile(r'["\\]')
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


# (mark, position, value, error, fatal): Item without its index and path.
_Row = tuple[str, int, Any, "str | None", bool]


def _read_file(path: Path, max_item_size: int, chunk: int) -> Iterator[_Row]:
    try:
        with open(path, "rb", buffering=max(chunk, io.DEFAULT_BUFFER_SIZE)) as raw:
            first = _first_byte(raw)
            if first is None:
                return
            raw.seek(0)
            if first == b"[" and not _lines_of_arrays(raw, max_item_size, chunk):
                raw.seek(0)
                yield from _array(raw, max_item_size, chunk)
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


def _lines_or_document(raw: IO[bytes], max_item_size: int, chunk: int) -> Iterator[_Row]:
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
            if _cut_at_line_end(data, exc.pos) if exc.syntax else not _complete(data):
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
    scanner = _Scanner()
    scanner.run(line.decode("utf-8", "replace"), 0)
    return scanner.depth == 0 and not scanner.in_string


def _cut_at_line_end(line: bytes, pos: int) -> bool:
    """Whether a line failed only because it ended, as the first line of a pretty-printed
    document does (``{``); a broken line fails before its end."""
    text = line.decode("utf-8", "replace")
    body = text.rstrip(_WHITESPACE)
    return text.lstrip(_WHITESPACE).startswith("{") and pos >= len(body)


def _document(raw: IO[bytes], max_item_size: int, chunk: int) -> Iterator[_Row]:
    window = _Window(raw, chunk)
    window.skip_whitespace()
    outcome = _value(window, max_item_size)
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


# --- arrays --------------------------------------------------------------------------------

# Where an array reader stands between items: before the "[", before an item (after "["
# or ","), after an item (before "," or "]"), after the "]".
_OPEN, _VALUE, _AFTER, _END = "open", "value", "after", "end"


def _array(raw: IO[bytes], max_item_size: int, chunk: int) -> Iterator[_Row]:
    # Arrays written one item a line are read line by line, as JSON Lines are; the
    # first line that is laid out otherwise hands the rest to the general reader below.
    lines = _ArrayLines(raw, min(max_item_size, chunk))
    yield from lines.rows()
    if lines.expect == _END and lines.offset < 0:
        return
    raw.seek(lines.offset)
    window = _Window(raw, chunk, lines_before=lines.lines_before)
    index, expect = lines.index, lines.expect
    window.skip_whitespace()
    if expect == _OPEN:
        window.pos += 1  # "["
        window.skip_whitespace()
        expect = _VALUE
    if expect == _VALUE and index == 0 and window.peek() == "]":
        window.pos += 1
        expect = _END
    line_items = _LineItems()
    while expect != _END:
        if expect == _VALUE:
            outcome = line_items.take(window) or _value(window, max_item_size)
            if outcome.fatal:
                yield "[", index, None, f"not valid JSON or JSON Lines: {outcome.error}", True
                return
            yield "[", index, outcome.value, outcome.error, False
            index += 1
            window.skip_whitespace()
        separator = window.peek()
        window.pos += 1
        if separator == ",":
            window.skip_whitespace()
            expect = _VALUE
        elif separator == "]":
            expect = _END
        else:
            found = "the end of the file" if separator == "" else repr(separator)
            why = f"expected ',' or ']' after item {index - 1}, found {found}"
            yield "[", index, None, f"not valid JSON or JSON Lines: {why}", True
            return
    window.skip_whitespace()
    if not window.at_end():
        why = f"more text after the array at line {window.line()}"
        yield ":", window.line(), None, f"not valid JSON or JSON Lines: {why}", True


class _ArrayLines:
    """The items of an array written one a line (``[``, then ``{...},`` or ``,{...}`` a
    line, then ``]``), read as bytes lines like JSON Lines: no text window, no scanning
    for separators, which is most of what reading an array costs otherwise.

    :meth:`rows` stops at the first line laid out otherwise (an item over lines, two on
    one line, a line longer than ``max_line``, a broken structure) and leaves where it
    stopped: ``offset`` (bytes; -1 when the file was read to its end), ``lines_before``,
    ``index`` and ``expect``, for the general reader to go on from. Items it refuses get
    the general reader's reasons: the full decoder reads them as that reader would.
    ``max_line`` bounds what it holds: an array on one line is left to the window.
    """

    def __init__(self, raw: IO[bytes], max_line: int) -> None:
        self._raw = raw
        self._max = max_line
        self.offset = 0
        self.lines_before = 0
        self.index = 0
        self.expect = _OPEN

    def rows(self) -> Iterator[_Row]:
        quick = decode.quick_decoder()
        undecided = decode.UNDECIDED
        readline = self._raw.readline
        limit = self._max + 1
        # Where the reader stands at the start of the line being read.
        expect, index, offset, number = _OPEN, 0, 0, 0
        while True:
            line = readline(limit)
            if not line or len(line) > self._max:
                break  # the end, or a line too long to hold: the general reader reads on
            body = line.strip(_BYTES_WHITESPACE)
            if number == 0:
                body = body.removeprefix(_BOM).lstrip(_BYTES_WHITESPACE)
            if body:
                row, follows = self._line(body, expect, index, quick, undecided)
                if follows is None:
                    break
                if row is not None:
                    yield row
                    index += 1
                expect = follows
            offset += len(line)
            number += 1
        self.index, self.expect, self.lines_before = index, expect, number
        self.offset = -1 if expect == _END and offset == self._raw.tell() else offset

    @staticmethod
    def _line(
        body: bytes, expect: str, index: int, quick: Callable[[bytes], Any], undecided: Any
    ) -> tuple[_Row | None, str | None]:
        """What one line holds: (its item's row, if any; where the reader stands after
        it), or (None, None) when the general reader must read it."""
        if expect == _AFTER:
            if body[0] == 44:  # ","
                body = body[1:].lstrip(_BYTES_WHITESPACE)
                if not body:
                    return None, _VALUE
            elif body[0] == 93 and not body[1:].strip(_BYTES_WHITESPACE):  # "]"
                return None, _END
            else:
                return None, None
        elif expect == _OPEN:
            # The first byte that is not white space is "[": the caller made sure.
            body = body[1:].lstrip(_BYTES_WHITESPACE)
            if not body:
                return None, _VALUE
        elif expect == _END:
            return None, None
        if index == 0 and body[0] == 93:  # "[ ]": empty
            return None, (None if body[1:].strip(_BYTES_WHITESPACE) else _END)
        last = body[-1]
        if last == 44:  # ",": the value ends before it (no JSON value ends in ",")
            value, follows = quick(body[:-1]), _VALUE
        elif last == 93:  # "]": the array's end, or the end of a value that is one
            value, follows = quick(body[:-1]), _END
            if value is undecided:
                value, follows = quick(body), _AFTER
        else:
            value, follows = quick(body), _AFTER
        if value is not undecided:
            return ("[", index, value, None, False), follows
        refused = _refused_line(body)
        if refused is None:
            return None, None
        (value, error), follows = refused
        return ("[", index, value, error, False), follows


def _refused_line(body: bytes) -> tuple[tuple[Any, str | None], str] | None:
    """An item line the quick decoder refused, read as the general reader reads it:
    ((value, error), what follows it), or None when the line is not one whole item
    (an item that goes on over lines, a second item)."""
    text = body.decode("utf-8", "surrogateescape")
    scanner = _Scanner()
    reached, ended = scanner.run(text, 0)
    if ended:
        if text[reached] not in ",]" or text[reached + 1 :].strip(_WHITESPACE):
            return None
        follows = _VALUE if text[reached] == "," else _END
    elif scanner.depth == 0 and not scanner.in_string:
        follows = _AFTER
    else:
        return None
    item = text[:reached].rstrip(_WHITESPACE)
    try:
        value, end = decode.decode_at(item, 0, ascii_only=item.isascii())
    except decode.InvalidJson as exc:
        if exc.syntax and exc.pos >= len(item):
            return None  # it failed where the line ended: the item may go on
        return (None, exc.reason), follows
    if end != len(item):
        return None
    return (value, None), follows


class _Outcome(NamedTuple):
    value: Any = None
    error: str | None = None
    fatal: bool = False


class _LineItems:
    """Array items that end their line (one item a line, as most writers put them),
    decoded by the quick decoder. None leaves the item to _value(): one that spans lines
    or shares its line, and whatever the quick decoder refuses.

    A text that decodes whole as one value is the item, whatever follows it: the value
    that starts at the item's position ends where _value() would end it.
    """

    #: Items in a row it could not take before it stops trying in this file (in a
    #: pretty-printed array every item spans lines).
    MAX_MISSES = 16

    def __init__(self) -> None:
        self._quick = decode.quick_decoder()
        self._misses = 0
        # The next newline in _buf (len(_buf): none), cached: a window with no newline
        # (an array on one line) is searched once, not once an item.
        self._buf = ""
        self._newline = -1

    def take(self, window: _Window) -> _Outcome | None:
        if self._misses >= self.MAX_MISSES:
            return None
        buf, pos = window.buf, window.pos
        if buf is not self._buf or self._newline < pos:
            self._buf = buf
            found = buf.find("\n", pos)
            self._newline = len(buf) if found == -1 else found
        if self._newline == len(buf):
            return None
        body = buf[pos : self._newline].rstrip(_WHITESPACE)
        end = pos + len(body)
        if body.endswith(","):
            # The separator stays for the caller to read.
            body, end = body[:-1], end - 1
        value = self._quick(body)
        if value is decode.UNDECIDED:
            self._misses += 1
            return None
        self._misses = 0
        window.pos = end
        return _Outcome(value)


def _value(window: _Window, max_item_size: int) -> _Outcome:
    """Decode the value at the window's position and move past it.

    A refused value is skipped (its end found by a scanner that keeps nothing); a value
    whose end cannot be found (cut short, an unterminated string) is fatal.
    """
    while True:
        buf = window.buf
        try:
            value, end = decode.decode_at(buf, window.pos, ascii_only=buf.isascii())
        except decode.InvalidJson as exc:
            if exc.syntax and not window.eof and len(buf) - window.pos < max_item_size:
                _, ended = _Scanner().run(buf, window.pos)
                if not ended:
                    # The value may go on past the window: read more and decode again.
                    window.fill(grow=True)
                    continue
            return _skip(window, exc.reason, max_item_size)
        if not window.eof and _NUMBER_RUN.match(buf, window.pos).end() == len(buf):  # type: ignore[union-attr]
            # A number that reaches the end of the window may go on in the next chunk.
            window.fill(grow=True)
            continue
        window.pos = end
        return _Outcome(value)


def _skip(window: _Window, reason: str, max_item_size: int) -> _Outcome:
    """Move past the refused value at the window's position, keeping none of it."""
    scanner = _Scanner()
    size = 0
    while True:
        reached, ended = scanner.run(window.buf, window.pos)
        size += reached - window.pos
        window.pos = reached
        if size > max_item_size:
            reason = f"item of over {max_item_size} characters is over the limit"
        if ended:
            return _Outcome(error=reason)
        if window.eof:
            # A value that ends with the file is refused as itself; what should follow
            # it (an array's "," or "]") is for the caller to find missing.
            complete = size > 0 and scanner.depth == 0 and not scanner.in_string
            return _Outcome(error=reason, fatal=not complete)
        window.fill()


class _Scanner:
    """Finds where a JSON value ends without decoding it: at the ``,`` or ``]`` of the
    enclosing array (depth 0). Resumable across chunks."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False

    def run(self, buf: str, pos: int) -> tuple[int, bool]:
        """(where it stopped, whether that is the value's end)."""
        end = len(buf)
        while pos < end:
            if self.in_string:
                match = _INSIDE.search(buf, pos)
                if match is None:
                    return end, False
                if match.group() == "\\":
                    if match.end() >= end:
                        # The escaped character is in the next chunk: resume at "\".
                        return match.start(), False
                    pos = match.end() + 1
                else:
                    self.in_string = False
                    pos = match.end()
                continue
            match = _OUTSIDE.search(buf, pos)
            if match is None:
                return end, False
            token = match.group()
            if token == '"':
                self.in_string = True
            elif token in "[{":
                self.depth += 1
            elif self.depth == 0:
                # "," or "]" (or a stray "}") of the enclosing array: the value ends here.
                return match.start(), True
            elif token != ",":
                self.depth -= 1
            pos = match.end()
        return end, False


class _Window:
    """A window over a text stream: what is before ``pos`` is dropped on fill."""

    def __init__(self, raw: IO[bytes], chunk: int, *, lines_before: int = 0) -> None:
        self._text = io.TextIOWrapper(
            raw, encoding="utf-8-sig", errors="surrogateescape", newline=""
        )
        self._chunk = chunk
        self.buf = ""
        self.pos = 0
        self.eof = False
        #: Lines dropped from the window so far (for positions in messages).
        self._lines_before = lines_before
        self.fill()

    def fill(self, *, grow: bool = False) -> None:
        """Read on; ``grow`` reads at least as much as the window holds, so decoding a
        large value again and again costs linear, not quadratic, time."""
        if self.eof:
            return
        size = max(self._chunk, len(self.buf) - self.pos) if grow else self._chunk
        block = self._text.read(size)
        self._lines_before += self.buf.count("\n", 0, self.pos)
        self.buf = self.buf[self.pos :] + block
        self.pos = 0
        if not block:
            self.eof = True

    def skip_whitespace(self) -> None:
        while True:
            match = _NON_WHITESPACE.search(self.buf, self.pos)
            if match is not None:
                self.pos = match.start()
                return
            self.pos = len(self.buf)
            if self.eof:
                return
            self.fill()

    def peek(self) -> str:
        if self.pos >= len(self.buf):
            self.fill()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def at_end(self) -> bool:
        return self.peek() == ""

    def line(self) -> int:
        return self._lines_before + self.buf.count("\n", 0, self.pos) + 1
