"""The layout is the architecture: imports point down the pipeline, and the core stays pure.

Both rules come from the two tables below. A unit is a stage package under
``shared/loopbreaker`` (``signals``, ``diagnosis`` ...); the top-level modules (``model``,
``errors``, ``timeutil``, ``logs``) are the shared vocabulary every unit may use.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "shared" / "loopbreaker"
VOCABULARY = "vocabulary"

#: Which units each unit may import besides itself. Nothing may import ``app`` or ``cli``
#: except ``cli``; nothing below ``incidents`` knows incidents exist.
MAY_IMPORT: dict[str, frozenset[str]] = {
    VOCABULARY: frozenset(),
    "approval": frozenset({VOCABULARY}),
    "signals": frozenset({VOCABULARY}),
    "incidents": frozenset({VOCABULARY, "approval", "signals"}),
    "diagnosis": frozenset({VOCABULARY, "signals"}),
    "remediation": frozenset({VOCABULARY, "approval", "incidents", "diagnosis"}),
    "chat": frozenset({VOCABULARY, "approval", "incidents", "diagnosis"}),
    "app": frozenset(
        {VOCABULARY, "approval", "signals", "incidents", "diagnosis", "remediation", "chat"}
    ),
    "cli": frozenset(
        {VOCABULARY, "approval", "signals", "incidents", "diagnosis", "remediation", "chat", "app"}
    ),
}


class Sdk(Enum):
    #: stdlib and loopbreaker only, anywhere in the module
    NONE = "none"
    #: third-party imports only inside functions, so a cold start does not pay for them
    LAZY = "lazy"
    #: anything (small HTTP helpers that every call of the module needs)
    ANY = "any"


#: Who may import a cloud SDK, ``kubernetes``, ``slack_sdk``, ``requests`` (or any other
#: third-party package), by the longest matching module prefix. Everything else is pure.
MAY_USE_SDK: dict[str, Sdk] = {
    "": Sdk.NONE,
    "diagnosis.readers": Sdk.ANY,
    # msgspec, a JSON decoder (no SDK), for reading big files; never for one message.
    "signals.decode": Sdk.LAZY,
    "incidents.store": Sdk.LAZY,
    "approval.verify": Sdk.LAZY,
    "chat.clients": Sdk.LAZY,
    "remediation.actuators": Sdk.LAZY,
    "remediation.queue": Sdk.LAZY,
    "app": Sdk.LAZY,
    "cli": Sdk.LAZY,
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted below loopbreaker ("diagnosis.engine")
    target: str  # what it imports, dotted ("incidents.records", "requests")
    lazy: bool
    line: int


def dotted(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str, root: Path) -> str:
    head = module.split(".")[0]
    return head if module and (root / head).is_dir() else VOCABULARY


def imports_of(path: Path, root: Path) -> Iterator[Import]:
    module = dotted(path, root)
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        lazy = id(node) not in top
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, lazy, node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "loopbreaker":  # from loopbreaker import logs, app
                for alias in node.names:
                    yield Import(module, f"loopbreaker.{alias.name}", lazy, node.lineno)
            else:
                yield Import(module, node.module, lazy, node.lineno)


def sdk_rule(module: str) -> Sdk:
    best = ""
    for prefix in MAY_USE_SDK:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return MAY_USE_SDK[best]


def violations(root: Path) -> list[str]:
    """Every import that breaks one of the two tables, as ``file:line: why``."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        module = dotted(path, root)
        unit = unit_of(module, root)
        where = f"{path.relative_to(root)}"
        for imp in imports_of(path, root):
            top = imp.target.split(".")[0]
            if top == "loopbreaker":
                target = imp.target.removeprefix("loopbreaker").lstrip(".")
                other = unit_of(target, root)
                if other != unit and other not in MAY_IMPORT[unit]:
                    found.append(f"{where}:{imp.line}: {unit} may not import {other} ({target})")
            elif top not in sys.stdlib_module_names and top != "__future__":
                rule = sdk_rule(module)
                if rule is Sdk.NONE or (rule is Sdk.LAZY and not imp.lazy):
                    how = "at all" if rule is Sdk.NONE else "at module level"
                    found.append(f"{where}:{imp.line}: {module} may not import {top} {how}")
    return found


def test_every_unit_is_in_the_table() -> None:
    units = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert units | {VOCABULARY} == set(MAY_IMPORT)


def test_imports_point_down_and_the_core_is_pure() -> None:
    assert violations(PACKAGE) == []


@pytest.mark.parametrize(
    ("module", "planted", "expected"),
    [
        ("diagnosis/engine.py", "from loopbreaker.app import settings", "may not import app"),
        ("signals/classify.py", "from loopbreaker.incidents import keys", "signals may not import"),
        ("model.py", "import loopbreaker.chat.render", "vocabulary may not import chat"),
        ("incidents/records.py", "import requests", "may not import requests at all"),
        ("diagnosis/steps/hosts.py", "import kubernetes", "may not import kubernetes at all"),
        ("app/responder.py", "from google.cloud import firestore", "at module level"),
        ("remediation/rules.py", "from slack_sdk import WebClient", "at all"),
    ],
)
def test_a_planted_violation_is_caught(
    tmp_path: Path, module: str, planted: str, expected: str
) -> None:
    copy = tmp_path / "loopbreaker"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{planted}\n")
    found = violations(copy)
    assert len(found) == 1 and expected in found[0], found


def pure_modules() -> list[str]:
    return sorted(
        "loopbreaker." + m if m else "loopbreaker"
        for m in (dotted(p, PACKAGE) for p in PACKAGE.rglob("*.py"))
        if sdk_rule(m) is Sdk.NONE and not m.endswith("__main__")
    )


def test_importing_the_pure_core_and_the_cli_loads_no_client_library() -> None:
    modules = [*pure_modules(), "loopbreaker.cli.main", "loopbreaker.app.bootstrap"]
    code = (
        f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
        # google and google.cloud are namespace packages that site .pth files pre-load.
        "heavy=[m for m in sys.modules if m.startswith(('google.cloud.','google.auth',"
        "'google.api_core','kubernetes','grpc','slack_sdk','requests','urllib3'))];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert len(modules) > 30  # the pure core is most of the package
