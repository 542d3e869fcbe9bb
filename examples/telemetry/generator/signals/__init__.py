"""Golden signal fixtures: one LogEntry per wording, and what the classifier must read from it.

Written to ``tests/data/signals/<name>.json``; recognised and deliberately unrecognised
wordings alike.
"""

from __future__ import annotations

from typing import Any

from .fixtures import fixtures
from .hosts import host_signals
from .kubernetes import image_pull_signals, scheduling_signals, stopped_pod_signals
from .training import training_signals


def build_signals() -> dict[str, dict[str, Any]]:
    f = fixtures()
    host_signals(f)
    training_signals(f)
    scheduling_signals(f)
    stopped_pod_signals(f)
    image_pull_signals(f)
    return f.out
