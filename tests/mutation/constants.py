"""Mutants of the safety modules' constants, which mutmut leaves alone.

mutmut 3 mutates function and method bodies only. The limits that matter most here are
module constants and dataclass defaults (``REMEDIATION_LEASE``, ``MAX_TOKEN_LENGTH``,
``SLACK_MAX_AGE_SECONDS``, ``RemediationPolicy.dry_run`` ...), so this script mutates
those: every literal in a module-level or class-level assignment, one at a time, the way
mutmut mutates literals in functions (a number one up and one down, a bool flipped, a
string wrapped in ``XX``). Patterns given to ``re.compile`` are left alone: any change
to them breaks every test at once and says nothing.

Each mutant is the module's source with that one literal changed, in a copy of the
package; the tests run with ``-x`` against the copy and a failure kills it. Results go
to ``build/mutation/constants.json`` for the summary.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "loopbreaker"
RESULTS = ROOT / "build" / "mutation" / "constants.json"
#: Killed in well under this; a mutant that runs longer is counted a timeout (killed).
TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class ConstantMutant:
    #: ``const:<module path>:<line>:<name>:<n>``; stable while the line does not move.
    id: str
    path: str
    line: int
    name: str
    was: str
    now: str


@dataclass
class Outcome:
    mutant: ConstantMutant
    status: str
    seconds: float


def config() -> dict[str, object]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(data["tool"]["mutmut"])


def modules() -> list[str]:
    """The modules ``[tool.mutmut] only_mutate`` names, relative to the package's parent."""
    patterns = [str(p) for p in config()["only_mutate"]]  # type: ignore[union-attr]
    found = sorted(str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py"))
    return [m for m in found if any(fnmatch.fnmatch(m, p) for p in patterns)]


def tests() -> list[str]:
    """mutmut's test selection, the focused boundary tests first (``-x`` stops early)."""
    selection = [str(t) for t in config()["pytest_add_cli_args_test_selection"]]  # type: ignore[union-attr]
    first = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*boundar*.py"))
    return first + [t for t in selection if t not in first]


def _mutations(node: ast.Constant) -> list[object]:
    value = node.value
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int | float):
        return [value + 1, value - 1]
    if isinstance(value, str):
        return [f"XX{value}XX"]
    return []


def _is_regex(call: ast.AST) -> bool:
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "compile"
    )


def _literals(value: ast.AST) -> list[ast.Constant]:
    """The literals of an assigned value, outside ``re.compile(...)`` patterns."""
    if _is_regex(value):
        return []
    if isinstance(value, ast.Constant):
        return [value]
    found: list[ast.Constant] = []
    for child in ast.iter_child_nodes(value):
        found += _literals(child)
    return found


def _assignments(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(name, value) of every module-level and class-level assignment, docstrings aside."""
    found: list[tuple[str, ast.AST]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                visit(stmt.body, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                found.append((prefix + stmt.targets[0].id, stmt.value))
            elif (
                isinstance(stmt, ast.AnnAssign)
                and stmt.value is not None
                and isinstance(stmt.target, ast.Name)
            ):
                found.append((prefix + stmt.target.id, stmt.value))

    visit(tree.body, "")
    return found


def mutants_of(path: str, source: str) -> list[ConstantMutant]:
    lines = source.splitlines()
    made = []
    for name, value in _assignments(ast.parse(source)):
        for node in _literals(value):
            if node.end_lineno != node.lineno or node.end_col_offset is None:
                continue  # a literal over several lines (implicit concatenation): skip
            line = lines[node.lineno - 1]
            for n, replacement in enumerate(_mutations(node)):
                now = line[: node.col_offset] + repr(replacement) + line[node.end_col_offset :]
                ident = f"const:{path}:{node.lineno}:{name}:{node.col_offset}.{n}"
                made.append(ConstantMutant(ident, path, node.lineno, name, line, now))
    return made


def all_mutants() -> list[ConstantMutant]:
    made = []
    for path in modules():
        made += mutants_of(path, (PACKAGE.parent / path).read_text(encoding="utf-8"))
    return made


def _pytest(tree: Path, selection: list[str]) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [
        *(sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"),
        *("-p", "no:unraisableexception", "--no-header"),
        *selection,
    ]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, timeout=TIMEOUT_SECONDS, check=False
    )


#: pytest's exit codes: 1 a test failed, 2 collection failed (the mutant broke an import),
#: 3 an internal error. The clean run before the mutants makes sure none of them is the
#: tests' own doing.
_KILLED = {1, 2, 3}


def _run(mutant: ConstantMutant, tree: Path, selection: list[str]) -> Outcome:
    target = tree / mutant.path
    original = target.read_text(encoding="utf-8")
    lines = original.splitlines(keepends=True)
    ending = "\n" if lines[mutant.line - 1].endswith("\n") else ""
    lines[mutant.line - 1] = mutant.now + ending
    target.write_text("".join(lines), encoding="utf-8")
    start = time.monotonic()
    try:
        code = _pytest(tree, selection).returncode
        status = "survived" if code == 0 else "killed" if code in _KILLED else f"error {code}"
    except subprocess.TimeoutExpired:
        status = "timeout"
    finally:
        target.write_text(original, encoding="utf-8")
    return Outcome(mutant, status, round(time.monotonic() - start, 1))


def run(patterns: list[str], jobs: int) -> list[Outcome]:
    chosen = [m for m in all_mutants() if not patterns or any(p in m.id for p in patterns)]
    if not chosen:
        return []
    selection = tests()
    with tempfile.TemporaryDirectory(prefix="lb-constants-") as scratch:
        trees = []
        for n in range(jobs):
            tree = Path(scratch) / str(n)
            skip = shutil.ignore_patterns("__pycache__")
            shutil.copytree(PACKAGE, tree / "loopbreaker", ignore=skip)
            trees.append(tree)
        clean = _pytest(trees[0], selection)
        if clean.returncode != 0:
            sys.stdout.write(clean.stdout.decode(errors="replace")[-3000:])
            raise SystemExit(f"the tests fail without any mutant (exit {clean.returncode})")
        free = list(trees)

        def one(mutant: ConstantMutant) -> Outcome:
            tree = free.pop()
            try:
                outcome = _run(mutant, tree, selection)
            finally:
                free.append(tree)
            print(f"  {outcome.status:9} {outcome.seconds:6.1f}s {mutant.id}", flush=True)
            return outcome

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(one, chosen))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument(
        "--survivors", action="store_true", help="re-run only those the last run left alive"
    )
    parser.add_argument("patterns", nargs="*", help="run only mutants whose id contains one")
    args = parser.parse_args(argv)
    if args.survivors:
        if not RESULTS.exists():
            return 0
        stored = json.loads(RESULTS.read_text(encoding="utf-8"))
        args.patterns = [o["id"] for o in stored if o["status"] not in ("killed", "timeout")]
        if not args.patterns:
            return 0
    if args.list:
        for mutant in all_mutants():
            print(f"{mutant.id}\n    - {mutant.was.strip()}\n    + {mutant.now.strip()}")
        return 0
    print(f"Constant mutants of {', '.join(modules())}")
    outcomes = run(args.patterns, args.jobs)
    kept: dict[str, dict[str, object]] = {}
    if args.patterns and RESULTS.exists():
        kept = {o["id"]: o for o in json.loads(RESULTS.read_text(encoding="utf-8"))}
    for outcome in outcomes:
        kept[outcome.mutant.id] = {**asdict(outcome.mutant), "status": outcome.status}
    current = {m.id for m in all_mutants()}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps([o for i, o in sorted(kept.items()) if i in current], indent=1),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
