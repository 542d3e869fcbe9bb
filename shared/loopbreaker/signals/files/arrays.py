"""Arrays, and the resumable JSON scanner and text window, of :mod:`loopbreaker.signals.files`
(pure, stdlib only).

:func:`array` yields the rows of a file that is one JSON array; :class:`Window`,
:func:`value` and :class:`Scanner` are the general reader that one-document files use too.
Split from ``files.py`` along this seam: everything here reads characters or bytes past a
position, nothing here knows about paths or the sink layout.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from typing import IO, Any, NamedTuple

from loopbreaker.signals import decode

_WHITESPACE = " \t\r\n"
_BYTES_WHITESPACE = b" \t\r\n"
_NON_WHITESPACE = re.compile(r"[^ \t\r\n]")
_NUMBER_RUN = re.compile(r"[-+.eE0-9]*")
_BOM = b"\xef\xbb\xbf"
# Tokens the resynchronising scanner cares about, outside and inside strings.
_OUTSIDE = re.compile(r'[\[\]{}",]')
_INSIDE = re.compile(r'["\\]')

# (mark, position, value, error, fatal): an Item without its index and path.
Row = tuple[str, int, Any, "str | None", bool]

# --- arrays --------------------------------------------------------------------------------

# Where an array reader stands between items: before the "[", before an item (after "["
# or ","), after an item (before "," or "]"), after the "]".
_OPEN, _VALUE, _AFTER, _END = "open", "value", "after", "end"


def read_array(raw: IO[bytes], max_item_size: int, chunk: int) -> Iterator[Row]:
    # Arrays written one item a line are read line by line, as JSON Lines are; the
    # first line that is laid out otherwise hands the rest to the general reader below.
    lines = ArrayLines(raw, min(max_item_size, chunk))
    yield from lines.rows()
    if lines.expect == _END and lines.offset < 0:
        return
    raw.seek(lines.offset)
    window = Window(raw, chunk, lines_before=lines.lines_before)
    index, expect = lines.index, lines.expect
    window.skip_whitespace()
    if expect == _OPEN:
        window.pos += 1  # "["
        window.skip_whitespace()
        expect = _VALUE
    if expect == _VALUE and index == 0 and window.peek() == "]":
        window.pos += 1
        expect = _END
    line_items = LineItems()
    while expect != _END:
        if expect == _VALUE:
            outcome = line_items.take(window) or read_value(window, max_item_size)
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


class ArrayLines:
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

    def rows(self) -> Iterator[Row]:
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
    ) -> tuple[Row | None, str | None]:
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
    scanner = Scanner()
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


class Outcome(NamedTuple):
    value: Any = None
    error: str | None = None
    fatal: bool = False


class LineItems:
    """Array items that end their line (one item a line, as most writers put them),
    decoded by the quick decoder. None leaves the item to read_value(): one that spans lines
    or shares its line, and whatever the quick decoder refuses.

    A text that decodes whole as one value is the item, whatever follows it: the value
    that starts at the item's position ends where read_value() would end it.
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

    def take(self, window: Window) -> Outcome | None:
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
        return Outcome(value)


def read_value(window: Window, max_item_size: int) -> Outcome:
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
                _, ended = Scanner().run(buf, window.pos)
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
        return Outcome(value)


def _skip(window: Window, reason: str, max_item_size: int) -> Outcome:
    """Move past the refused value at the window's position, keeping none of it."""
    scanner = Scanner()
    size = 0
    while True:
        reached, ended = scanner.run(window.buf, window.pos)
        size += reached - window.pos
        window.pos = reached
        if size > max_item_size:
            reason = f"item of over {max_item_size} characters is over the limit"
        if ended:
            return Outcome(error=reason)
        if window.eof:
            # A value that ends with the file is refused as itself; what should follow
            # it (an array's "," or "]") is for the caller to find missing.
            complete = size > 0 and scanner.depth == 0 and not scanner.in_string
            return Outcome(error=reason, fatal=not complete)
        window.fill()


class Scanner:
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


class Window:
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
