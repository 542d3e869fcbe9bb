"""The one hardened JSON decoding path of loopbreaker (pure, stdlib only).

Whatever arrives becomes a value or an :class:`InvalidJson` that names what is wrong:

* syntax: json's own message, with line and column;
* nesting deeper than :data:`MAX_DEPTH` arrays and objects (a RecursionError never escapes);
* numbers: integers longer than Python converts (4300 digits), floats that overflow
  (``1e999``) and the non-JSON constants ``NaN`` and ``Infinity``;
* text: bytes that are not UTF-8 (never guessed as UTF-16 or UTF-32) and lone surrogates
  (``"\\ud800"``), which no UTF-8 text can hold. They are refused, so every key that is
  hashed and every string that is stored is valid UTF-8. NUL is valid Unicode and kept;
* size: more than ``max_bytes``.

:func:`check` applies the same rules to a value someone else decoded (functions-framework
parses structured CloudEvents itself); :func:`escape_surrogates` is the one consistent
escape for text that cannot be refused (log fields, defence in depth in the stores).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from loopbreaker.errors import InvalidInput

#: Arrays and objects nest at most this deep. LogEntries, Pub/Sub envelopes, alert and
#: chat payloads stay far below; the walk over a value and json.dumps stay far from
#: Python's recursion limit.
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
# A surrogate written as an escape (``\\ud800``): the decoder lets it through.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD]")
# What a surrogateescape reader makes of bytes that are not UTF-8.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


class InvalidJson(InvalidInput):
    """A JSON text, or a decoded value, that loopbreaker refuses; ``reason`` says why.

    ``syntax`` is true when the text is not JSON at all (as opposed to JSON that breaks a
    limit): a streaming reader may have cut the text short and can read on. ``pos`` is
    where in the text the syntax broke.
    """

    def __init__(self, reason: str, *, syntax: bool = False, pos: int = -1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.syntax = syntax
        self.pos = pos


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidJson(f"a number out of range ({_cut(text)})")
    return value


def _constant(name: str) -> float:
    raise InvalidJson(f"{name}, which is not JSON")


_LONG_NUMBER = f"holds a number too long to read (over {sys.get_int_max_str_digits()} digits)"
_DECODER = json.JSONDecoder(parse_float=_float, parse_constant=_constant)


def loads(
    data: bytes | bytearray | memoryview | str,
    *,
    what: str = "",
    max_depth: int = MAX_DEPTH,
    max_bytes: int | None = None,
) -> Any:
    """Decode one JSON text (bytes must be UTF-8); InvalidJson names what is wrong."""
    if max_bytes is not None and len(data) > max_bytes:
        raise InvalidJson(_say(what, f"is {len(data)} bytes, over the limit of {max_bytes}"))
    raw_surrogates = False
    if isinstance(data, str):
        text = data
        # Text handed over as str may hold surrogates already (e.g. surrogateescape).
        raw_surrogates = not text.isascii() and _SURROGATE.search(text) is not None
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidJson(
                _say(what, f"is not UTF-8 text: {exc.reason} at byte {exc.start}")
            ) from None
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError, InvalidJson) as exc:  # JSONDecodeError is a ValueError
        raise _refusal(exc, what, max_depth, _line_column) from None
    _check_text(value, text, 0, len(text), what, max_depth, raw_surrogates)
    return value


#: What a :func:`quick_decoder` returns for a text it leaves to the full decoder.
UNDECIDED: Any = object()


def quick_decoder() -> Callable[[bytes | str], Any]:
    """A decoder for reading many items (files of LogEntries): msgspec, about twice as
    fast as json. It returns the value, or :data:`UNDECIDED` for anything it refuses,
    which the full decoder (:func:`loads`, :func:`decode_at`) then decodes and answers
    for: the value, or the InvalidJson that names the problem.

    msgspec accepts a subset of what the full decoder accepts (it also refuses lone
    surrogates, numbers out of range and nesting past its own limit) and gives the same
    values, key order and types included: ``tests/signals/test_decode.py`` checks both
    claims. The depth rule is checked here. Imported here, not at the top: the
    functions decode one message at a time and never need it.
    """
    import msgspec

    decode = msgspec.json.Decoder().decode

    def quick(data: bytes | str) -> Any:
        try:
            value = decode(data)
        except Exception:  # whatever msgspec refuses, the full decoder decides and names
            return UNDECIDED
        if isinstance(data, bytes):
            deep = data.count(b"[") + data.count(b"{") > MAX_DEPTH
        else:
            deep = data.count("[") + data.count("{") > MAX_DEPTH
        if deep and _walk(value, MAX_DEPTH) is not None:
            return UNDECIDED
        return value

    return quick


def bulk_loads() -> Callable[[bytes], Any]:
    """:func:`loads` through a :func:`quick_decoder` first: the same answers, faster."""
    quick = quick_decoder()

    def bulk(data: bytes) -> Any:
        value = quick(data)
        return loads(data) if value is UNDECIDED else value

    return bulk


def decode_at(
    text: str,
    start: int,
    *,
    what: str = "",
    max_depth: int = MAX_DEPTH,
    ascii_only: bool = False,
) -> tuple[Any, int]:
    """Decode the one JSON value that starts at ``text[start]``; return it and its end.

    For streaming readers: a syntax error (maybe the text was only cut short) raises
    InvalidJson with ``syntax`` set; every other refusal means the value itself is bad.
    ``ascii_only`` says ``text`` is known to be ASCII (no surrogates to look for).
    """
    try:
        value, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError, InvalidJson) as exc:
        # Counted from the value's start: the text may be a window of a larger file.
        def where(e: json.JSONDecodeError) -> str:
            return f"character {e.pos - start + 1} of the item"

        raise _refusal(exc, what, max_depth, where) from None
    raw_surrogates = not ascii_only and _SURROGATE.search(text, start, end) is not None
    if raw_surrogates and _ESCAPED_BYTE.search(text, start, end):
        raise InvalidJson(_say(what, "is not UTF-8 text"))
    _check_text(value, text, start, end, what, max_depth, raw_surrogates)
    return value, end


def check(value: object, *, what: str = "", max_depth: int = MAX_DEPTH) -> None:
    """Apply the depth and text rules to an already decoded value (dicts, lists, scalars)."""
    problem = _walk(value, max_depth)
    if problem is not None:
        raise InvalidJson(_say(what, problem))


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as ``\\udXXX``: always valid UTF-8, and
    the same text always gives the same result (so keys made of it still match)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def type_name(value: object) -> str:
    """How an error message names a JSON value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


# --- internals ---------------------------------------------------------------------------


def _line_column(exc: json.JSONDecodeError) -> str:
    return f"line {exc.lineno} column {exc.colno}"


def _refusal(
    exc: Exception, what: str, max_depth: int, where: Callable[[json.JSONDecodeError], str]
) -> InvalidJson:
    """What the scanner raised, as one InvalidJson naming the problem (a function, not a
    context manager: the decode path is hot and must cost nothing when nothing fails)."""
    if isinstance(exc, json.JSONDecodeError):
        return InvalidJson(
            _say(what, f"is not JSON: {exc.msg} ({where(exc)})"), syntax=True, pos=exc.pos
        )
    if isinstance(exc, RecursionError):
        return InvalidJson(_say(what, f"nests too deeply (more than {max_depth} levels)"))
    if isinstance(exc, InvalidJson):
        return InvalidJson(_say(what, f"holds {exc.reason}"))
    # The only other ValueError of the scanner: int()'s limit on digits.
    return InvalidJson(_say(what, _LONG_NUMBER))


def _check_text(
    value: object,
    text: str,
    start: int,
    end: int,
    what: str,
    max_depth: int,
    raw_surrogates: bool,
) -> None:
    """Walk ``value`` only when its text could break a rule: cheap counts decide."""
    deep = text.count("[", start, end) + text.count("{", start, end) > max_depth
    # One search with a literal prefix: a fraction of two str.find calls.
    escaped = _ESCAPED_SURROGATE.search(text, start, end) is not None
    if deep or escaped or raw_surrogates:
        check(value, what=what, max_depth=max_depth)


def _walk(value: object, max_depth: int) -> str | None:
    """The first rule ``value`` breaks, named with its path, or None."""
    stack: list[tuple[object, int, str]] = [(value, 0, "$")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and (found := _SURROGATE.search(item)) is not None:
                return f"holds a lone surrogate {_escaped(found.group())} at {path}"
            continue
        if isinstance(item, Mapping):
            if depth >= max_depth:
                return f"nests too deeply (more than {max_depth} levels)"
            for key, member in item.items():
                name = key if isinstance(key, str) else str(key)
                if not name.isascii() and (found := _SURROGATE.search(name)) is not None:
                    return f"holds a lone surrogate {_escaped(found.group())} in a key at {path}"
                stack.append((member, depth + 1, f"{path}.{_cut(escape_surrogates(name), 40)}"))
        elif isinstance(item, list | tuple):
            if depth >= max_depth:
                return f"nests too deeply (more than {max_depth} levels)"
            stack.extend((member, depth + 1, f"{path}[{i}]") for i, member in enumerate(item))
    return None


def _say(what: str, text: str) -> str:
    return f"{what} {text}" if what else text.removeprefix("is ").removeprefix("holds ")


def _escaped(char: str) -> str:
    return char.encode("utf-8", "backslashreplace").decode("ascii")


def _cut(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
