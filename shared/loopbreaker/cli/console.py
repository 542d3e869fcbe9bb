"""What the CLI writes around a command's output: error lines and a closed pipe."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO, cast


class _Tracked:
    """A stream that remembers whether its last write ended a line, so an error never
    continues a progress line or an unterminated output line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.ended = True

    def write(self, text: str) -> int:
        if text:
            self.ended = text.endswith("\n")
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def track() -> tuple[TextIO, TextIO]:
    """Wrap stdout and stderr; returns the originals, for :func:`untrack`."""
    saved = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, _Tracked(sys.stdout))
    sys.stderr = cast(TextIO, _Tracked(sys.stderr))
    return saved


def untrack(saved: tuple[TextIO, TextIO]) -> None:
    sys.stdout, sys.stderr = saved


def error(message: str) -> None:
    """``loopbreaker: error: MESSAGE``, one whole line of its own."""
    line("loopbreaker: error: " + message)


def line(message: str) -> None:
    """Write one diagnostic line to stderr: internal line breaks folded, a newline at the
    end, and a fresh line first when the terminal's last line was left open."""
    text = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    out, err = sys.stdout, sys.stderr
    with contextlib.suppress(OSError, ValueError):
        out.flush()  # stdout first, as it was written
    shared = not getattr(out, "ended", True) and _same_place(out, err)
    open_line = shared or not getattr(err, "ended", True)
    err.write(("\n" if open_line else "") + text + "\n")
    err.flush()
    if shared and isinstance(out, _Tracked):
        out.ended = True  # that line is closed now


def _same_place(out: TextIO, err: TextIO) -> bool:
    """Whether stdout and stderr end up on one screen or file (``2>&1``)."""
    try:
        if out.isatty() and err.isatty():
            return True
        a, b = os.fstat(out.fileno()), os.fstat(err.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def silence_stdout() -> None:
    """After a closed pipe (``| head``): point stdout at devnull so the flush at exit does
    not fail again. The recipe of https://docs.python.org/3/library/signal.html#note-on-sigpipe
    (which also says not to restore SIGPIPE's default: sockets would kill the process)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout has no file descriptor (captured): nothing to flush at exit
