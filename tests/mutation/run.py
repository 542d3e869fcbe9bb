"""``make mutate``: mutation testing of the safety modules, then the summary.

mutmut 3 names a mutant by the module path of its file and only mutates what is under
its working directory, so it runs in ``build/mutation``, where ``loopbreaker`` (a link to
``shared/loopbreaker``) is at the top: the names then match the imported modules. Its
configuration is ``[tool.mutmut]`` in pyproject.toml (which modules, which tests).

Not part of ``make test``: a full run takes a while (see docs in the Makefile target).
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep earlier results (mutmut re-tests only changed functions and named mutants)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("mutants", nargs="*", help="mutmut mutant names or globs to (re-)test")
    args = parser.parse_args(argv)
    stage(fresh=not args.keep and not args.mutants)
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs)]
    ran = subprocess.run([*command, *args.mutants], cwd=WORK, check=False)
    if ran.returncode != 0:
        print(f"mutmut run failed with exit code {ran.returncode}", file=sys.stderr)
        return ran.returncode
    sys.path.insert(0, str(Path(__file__).parent))
    import constants
    import summary

    if not args.mutants:
        constants.main(["--jobs", str(args.jobs)])
    return summary.main([])


if __name__ == "__main__":
    sys.exit(main())
