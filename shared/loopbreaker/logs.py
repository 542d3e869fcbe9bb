"""Cloud Logging-compatible structured logs: one JSON object per line on stderr.

Each line carries ``severity``, ``message``, ``time``, correlation labels under
``logging.googleapis.com/labels`` (incident_id, cluster, node, ...) and any other fields at
the top level, which Cloud Logging turns into ``jsonPayload`` fields. Set up once with
:func:`configure`; emit with :func:`event`.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

LABELS_KEY = "logging.googleapis.com/labels"
ROOT_LOGGER = "loopbreaker"

_SEVERITY = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}
_RESERVED = frozenset({"severity", "message", "time", "logger", LABELS_KEY})


class JsonFormatter(logging.Formatter):
    """Format a record as one Cloud Logging structured-log line."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "severity": _SEVERITY.get(record.levelno, "DEFAULT"),
            "message": record.getMessage(),
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "logger": record.name,
        }
        labels = getattr(record, "labels", None)
        if isinstance(labels, Mapping):
            # Cloud Logging labels are string-valued; None means "not known" and is dropped.
            clean = {str(k): str(v) for k, v in labels.items() if v is not None}
            if clean:
                payload[LABELS_KEY] = clean
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                if key not in _RESERVED and value is not None:
                    payload[key] = value
        if record.exc_info:
            # Error Reporting picks up stack traces from this field.
            payload["stack_trace"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, ensure_ascii=False, separators=(",", ":"))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at emit time (pytest's capsys replaces it)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self._fixed = stream

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = self._fixed if self._fixed is not None else sys.stderr
        super().emit(record)


class HumanFormatter(logging.Formatter):
    """One quiet line for a person at a terminal: ``loopbreaker: warning: message (k=v)``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {**getattr(record, "labels", {}), **getattr(record, "fields", {})}
        detail = ", ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, "", [], {}))
        line = f"loopbreaker: {record.levelname.lower()}: {record.getMessage()}"
        if detail:
            line += f" ({detail})"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(
    level: str = "INFO", stream: TextIO | None = None, *, human: bool = False
) -> logging.Logger:
    """Install the JSON (functions) or human (CLI) handler on the ``loopbreaker`` logger
    (idempotent)."""
    logger = logging.getLogger(ROOT_LOGGER)
    for handler in list(logger.handlers):
        if isinstance(handler, _StderrHandler):
            logger.removeHandler(handler)
    handler = _StderrHandler(stream)
    handler.setFormatter(HumanFormatter() if human else JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    # Our lines are complete on their own; the root logger would print them a second time.
    logger.propagate = False
    return logger


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"{ROOT_LOGGER}.{name}")


def event(
    logger: logging.Logger,
    level: int,
    message: str,
    *,
    labels: Mapping[str, object] | None = None,
    exc_info: bool = False,
    **fields: Any,
) -> None:
    """Log ``message`` with correlation ``labels`` and top-level ``fields``."""
    logger.log(level, message, extra={"labels": labels or {}, "fields": fields}, exc_info=exc_info)
