"""The decision core stays pure: stdlib and loopbreaker's own modules only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "shared" / "loopbreaker"
PURE = [
    "model",
    "errors",
    "timeutil",
    "classify",
    "queries",
    "engine",
    "ticket",
    "render",
    "kube_objects",
    "telemetry",
    "lql",
    "approvals",
    "chat_render",
]


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", PURE)
def test_core_module_imports_only_stdlib(module: str) -> None:
    roots = imported_roots(PACKAGE / f"{module}.py")
    foreign = {r for r in roots if r not in sys.stdlib_module_names and r != "loopbreaker"}
    assert not foreign, f"{module} imports {foreign}"


def test_importing_the_cli_loads_no_cloud_client() -> None:
    code = (
        "import sys, loopbreaker.cli, loopbreaker.engine;"
        # google and google.cloud are namespace packages that site .pth files pre-load.
        "heavy=[m for m in sys.modules if m.startswith(('google.cloud.','google.auth',"
        "'google.api_core','kubernetes','grpc'))];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
