"""Golden signal fixtures: one LogEntry per recognised (or deliberately unrecognised) wording,
with what the classifier must read from it, written to ``tests/data/signals/<name>.json``."""

from __future__ import annotations

from typing import Any

from .fixtures import fixtures
from .hosts import host_signals
from .kubernetes import kubernetes_signals
from .training import training_signals, unrecognized_signals


def build_signals() -> dict[str, dict[str, Any]]:
    f = fixtures()
    host_signals(f)
    training_signals(f)
    kubernetes_signals(f)
    unrecognized_signals(f)
    return f.out
