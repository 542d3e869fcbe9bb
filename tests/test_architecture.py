"""The layout is the architecture: imports point down the pipeline, and the core stays pure.

Both rules come from the two tables below, and a third holds without a table: no module
imports, even lazily, a module that imports it. A unit is a stage package under
``shared/loopbreaker`` (``signals``, ``diagnosis`` ...); the top-level modules (``errors``,
``timeutil``, ``logs``) and the ``model`` package are the shared vocabulary every unit may use.
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
#: Packages that are part of the shared vocabulary rather than a stage.
VOCABULARY_PACKAGES = frozenset({"model"})

#: Which units each unit may import besides itself. Nothing may import ``app``, ``replay`` or
#: ``cli`` except the ones above them; nothing below ``incidents`` knows incidents exist.
_CORE = frozenset({VOCABULARY, "approval", "signals", "incidents", "diagnosis"})
MAY_IMPORT: dict[str, frozenset[str]] = {
    VOCABULARY: frozenset(),
    "approval": frozenset({VOCABULARY}),
    "signals": frozenset({VOCABULARY}),
    "incidents": frozenset({VOCABULARY, "approval", "signals"}),
    "diagnosis": frozenset({VOCABULARY, "signals"}),
    "chat": frozenset({VOCABULARY, "approval", "incidents", "diagnosis"}),
    "remediation": frozenset({VOCABULARY, "approval", "incidents", "diagnosis", "chat"}),
    "settings": frozenset({VOCABULARY, "approval", "incidents", "diagnosis", "remediation"}),
    "responder": _CORE | {"remediation", "chat", "settings"},
    "app": _CORE | {"remediation", "chat", "settings", "responder"},
    "replay": _CORE | {"remediation", "chat", "settings", "responder", "app"},
    "cli": _CORE | {"remediation", "chat", "settings", "responder", "app", "replay"},
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
    "settings.secrets": Sdk.LAZY,
    # PyYAML, only when LOOPBREAKER_ROUTES is set.
    "settings.routes": Sdk.LAZY,
    "responder": Sdk.LAZY,
    "app": Sdk.LAZY,
    "replay": Sdk.LAZY,
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
    if not module or head in VOCABULARY_PACKAGES or not (root / head).is_dir():
        return VOCABULARY
    return head


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
    assert (units - VOCABULARY_PACKAGES) | {VOCABULARY} == set(MAY_IMPORT)


def test_imports_point_down_and_the_core_is_pure() -> None:
    assert violations(PACKAGE) == []


@pytest.mark.parametrize(
    ("module", "planted", "expected"),
    [
        ("diagnosis/engine.py", "from loopbreaker.app import settings", "may not import app"),
        ("signals/classify.py", "from loopbreaker.incidents import keys", "signals may not import"),
        ("model/signal.py", "import loopbreaker.chat.render", "vocabulary may not import chat"),
        ("incidents/records.py", "import requests", "may not import requests at all"),
        ("diagnosis/steps/hosts.py", "import kubernetes", "may not import kubernetes at all"),
        ("responder/service.py", "from google.cloud import firestore", "at module level"),
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


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the loopbreaker modules it imports, lazily or not, TYPE_CHECKING included.

    ``from loopbreaker.x import y`` is an edge to the module ``x.y`` when there is one, else to
    ``x`` (a name the package defines or re-exports)."""
    modules = {dotted(p, root) for p in root.rglob("*.py")}

    def resolve(target: str) -> str:
        name = target.removeprefix("loopbreaker").lstrip(".")
        while name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path in root.rglob("*.py"):
        module = dotted(path, root)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "loopbreaker":
                    graph[module].add(resolve(name))
        graph[module].discard(module)
    return graph


def cycles(root: Path) -> list[list[str]]:
    """Every set of modules that import each other in a circle (Tarjan's components)."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_its_importer() -> None:
    assert cycles(PACKAGE) == []


@pytest.mark.parametrize(
    ("module", "planted", "expected"),
    [
        # A lazy import and a TYPE_CHECKING one close a circle just as well.
        ("model/kinds.py", "def f():\n    from loopbreaker.model import Signal", "model"),
        (
            "diagnosis/readers/flags.py",
            "if 1:\n    import loopbreaker.diagnosis.readers.sources",
            "flags",
        ),
        ("cli/incidents/cost.py", "from loopbreaker.cli.incidents import report", "report"),
    ],
)
def test_a_planted_cycle_is_caught(
    tmp_path: Path, module: str, planted: str, expected: str
) -> None:
    copy = tmp_path / "loopbreaker"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{planted}\n")
    found = cycles(copy)
    assert len(found) == 1 and any(expected in m for m in found[0]), found
