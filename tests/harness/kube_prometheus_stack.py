"""The kube-prometheus-stack rewrite of examples/telemetry, importable by the tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "examples" / "telemetry" / "kube_prometheus_stack.py"
_SPEC = importlib.util.spec_from_file_location("kube_prometheus_stack_examples", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)

rewrite = _MODULE.rewrite
write_scenario = _MODULE.write_scenario
