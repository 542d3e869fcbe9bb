"""``make mutate``: mutation testing of the safety modules, then the summary.

mutmut 3 names a mutant by the module path of its file and only mutates what is under
its working directory, so it runs in ``build/mutation``, where ``loopbreaker`` (a link to
``shared/loopbreaker``) is at the top: the names then match the imported modules. Its
configuration is ``[tool.mutmut]`` in pyproject.toml (which modules, which tests).

Not part of ``make test``: a full run takes a while (see docs in the Makefile target).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "mutation"
#: What mutmut's working directory links to: the package, the tests and their data.
LINKS = {
    "loopbreaker": ROOT / "shared" / "loopbreaker",
    "tests": ROOT / "tests",
    "pyproject.toml": ROOT / "pyproject.toml",
}
#: Test data the tests read beside them (tests/chatkit.py: ROOT / "examples").
DATA = {"examples": ROOT / "examples"}


def stage(fresh: bool) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    if fresh:
        shutil.rmtree(WORK / "mutants", ignore_errors=True)
    for name, target in LINKS.items():
        _link(WORK / name, target)
    (WORK / "mutants").mkdir(exist_ok=True)
    for name, target in DATA.items():
        _link(WORK / "mutants" / name, target)


def _link(path: Path, target: Path) -> None:
    if path.is_symlink() and path.resolve() == target.resolve():
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.symlink_to(target)


def surviving() -> list[str]:
    """The mutants the last run left alive (survived, or reached by no test)."""
    names = []
    for meta in sorted((WORK / "mutants").rglob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        names += [name for name, code in codes.items() if code in (0, 5, 33)]
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep earlier results (mutmut re-tests only changed functions and named mutants)",
    )
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="keep earlier results and re-test only the mutants that survived them",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("mutants", nargs="*", help="mutmut mutant names or globs to (re-)test")
    args = parser.parse_args(argv)
    names = list(args.mutants)
    if args.survivors:
        names += surviving()
    stage(fresh=not (args.keep or args.survivors or names))
    sys.path.insert(0, str(Path(__file__).parent))
    import constants
    import summary

    if names or not args.survivors:
        command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs)]
        ran = subprocess.run([*command, *names], cwd=WORK, check=False)
        if ran.returncode != 0:
            print(f"mutmut run failed with exit code {ran.returncode}", file=sys.stderr)
            return ran.returncode
    if args.survivors:
        constants.main(["--jobs", str(args.jobs), "--survivors"])
    elif not names:
        constants.main(["--jobs", str(args.jobs)])
    return summary.main([])


if __name__ == "__main__":
    sys.exit(main())
