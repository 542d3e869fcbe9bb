"""The end of ``make mutate``: killed, survived and equivalent mutants, per module.

Reads mutmut's results (``build/mutation/mutants/**/*.py.meta``), the constant mutants'
(``build/mutation/constants.json``, from constants.py) and ``equivalents.toml`` beside
this file. An equivalent is matched by its function (or constant) and its exact change,
not by mutmut's number, so an entry goes stale, and says so, when the code it names
changes. Exits non-zero when fewer than :data:`TARGET` of the mutants that are not
equivalent are killed, or when a mutant was never checked.

Counted as killed: a failing test run (mutmut's exit codes 1 and 3) or a timeout. Counted
as survived: a passing run, and a mutant no selected test reaches ("no tests").
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "mutation"
EQUIVALENTS = Path(__file__).with_name("equivalents.toml")
TARGET = 0.90

KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout"}
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests"}


@dataclass(frozen=True)
class Mutant:
    id: str
    module: str
    #: The function (mutmut) or the constant's name (constants.py).
    where: str
    status: str
    removed: tuple[str, ...]
    added: tuple[str, ...]

    @property
    def key(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        return self.where, self.removed, self.added


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _diff_lines(diff: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    lines = [line for line in diff.splitlines() if not line.startswith(("---", "+++"))]
    removed = tuple(line[1:].strip() for line in lines if line.startswith("-"))
    added = tuple(line[1:].strip() for line in lines if line.startswith("+"))
    return removed, added


def _status(code: int | None) -> str:
    if code is None:
        return "not checked"
    return KILLED.get(code) or SURVIVED.get(code) or f"suspicious ({code})"


def mutmut_mutants() -> list[Mutant]:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    found = []
    with _cwd(WORK):
        for meta in sorted(Path("mutants").rglob("*.py.meta")):
            path = str(meta.relative_to("mutants"))[: -len(".meta")]
            codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
            for name, code in sorted(codes.items()):
                status = _status(code)
                where = name.partition("__mutmut_")[0].rpartition(".")[2]
                removed: tuple[str, ...] = ()
                added: tuple[str, ...] = ()
                if status not in ("killed", "timeout"):
                    removed, added = _diff_lines(get_diff_for_mutant(name, path=path))
                found.append(Mutant(name, path, where, status, removed, added))
    return found


def constant_mutants() -> list[Mutant]:
    results = WORK / "constants.json"
    if not results.exists():
        return []
    return [
        Mutant(
            o["id"],
            o["path"],
            o["name"],
            o["status"] if o["status"] in ("killed", "survived", "timeout") else "suspicious",
            (o["was"].strip(),),
            (o["now"].strip(),),
        )
        for o in json.loads(results.read_text(encoding="utf-8"))
    ]


@dataclass(frozen=True)
class Equivalent:
    mutant: str
    where: str
    removed: tuple[str, ...]
    added: tuple[str, ...]
    why: str

    @property
    def key(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        return self.where, self.removed, self.added


def equivalents(path: Path = EQUIVALENTS) -> list[Equivalent]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    found = []
    for entry in data.get("equivalent", []):
        mutant = entry["mutant"]
        if mutant.startswith("const:"):
            where = mutant.split(":")[3]
        else:
            where = mutant.partition("__mutmut_")[0].rpartition(".")[2]
        removed = tuple(line.strip() for line in entry["was"].strip("\n").splitlines())
        added = tuple(line.strip() for line in entry["now"].strip("\n").splitlines())
        found.append(Equivalent(mutant, where, removed, added, " ".join(entry["why"].split())))
    return found


def _share(killed: int, counted: int) -> str:
    return f"{killed / counted:6.1%}" if counted else "     -"


def report(mutants: list[Mutant], known: list[Equivalent], out: list[str]) -> int:
    by_key = {e.key: e for e in known}
    used: set[tuple[str, tuple[str, ...], tuple[str, ...]]] = set()
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    survivors: list[Mutant] = []
    unchecked: list[Mutant] = []
    matched: list[tuple[Mutant, Equivalent]] = []
    for m in mutants:
        row = table[m.module + (" (constants)" if m.id.startswith("const:") else "")]
        row["mutants"] += 1
        if m.status in ("killed", "timeout"):
            row["killed"] += 1
        elif m.status == "not checked":
            unchecked.append(m)
            row["survived"] += 1
        elif m.key in by_key:
            row["equivalent"] += 1
            used.add(m.key)
            matched.append((m, by_key[m.key]))
        else:
            row["survived"] += 1
            survivors.append(m)
    out.append(f"{'module':48} {'mutants':>7} {'killed':>7} {'survived':>8} {'equiv.':>6}  killed")
    total: dict[str, int] = defaultdict(int)
    for module, row in sorted(table.items()):
        counted = row["mutants"] - row["equivalent"]
        out.append(
            f"{module:48} {row['mutants']:7} {row['killed']:7} {row['survived']:8} "
            f"{row['equivalent']:6}  {_share(row['killed'], counted)}"
        )
        for k, v in row.items():
            total[k] += v
    counted = total["mutants"] - total["equivalent"]
    out.append(
        f"{'all':48} {total['mutants']:7} {total['killed']:7} {total['survived']:8} "
        f"{total['equivalent']:6}  {_share(total['killed'], counted)}"
    )
    if matched:
        out.append(f"\nEquivalent ({len(matched)}), from {EQUIVALENTS.relative_to(ROOT)}:")
        for m, e in matched:
            out.append(f"  {m.id}\n      {' / '.join(m.added)}\n      why: {e.why}")
    if survivors:
        out.append(f"\nSurvived ({len(survivors)}):")
        for m in survivors:
            out.append(f"  {m.id} [{m.status}]")
            out += [f"      - {line}" for line in m.removed]
            out += [f"      + {line}" for line in m.added]
    stale = [e for e in known if e.key not in used]
    if stale:
        out.append(f"\nEquivalents that match no surviving mutant ({len(stale)}): killed now, or")
        out.append("the code changed; update equivalents.toml:")
        out += [f"  {e.mutant}" for e in stale]
    share = total["killed"] / counted if counted else 0.0
    out.append(
        f"\nKilled {total['killed']} of {counted} mutants that are not equivalent: {share:.1%} "
        f"(target {TARGET:.0%}); {total['equivalent']} equivalent, {total['survived']} survived."
    )
    if unchecked:
        out.append(f"{len(unchecked)} mutants were never checked: the run did not finish.")
        return 1
    if share < TARGET:
        out.append("FAILED: below the target.")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    del argv
    mutants = mutmut_mutants() + constant_mutants()
    if not mutants:
        print("no mutation results: run `make mutate` first", file=sys.stderr)
        return 1
    out: list[str] = ["", "Mutation testing of the safety modules", ""]
    status = report(mutants, equivalents(), out)
    print("\n".join(out))
    return status


if __name__ == "__main__":
    sys.exit(main())
