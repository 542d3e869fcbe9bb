"""What a new user meets at the command line: typos, ranges, time zones, pipes, errors.

Each test walks every subcommand's parser, so a flag added later is held to the same rule.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from loopbreaker.argtypes import Bounded, bounded_int
from loopbreaker.cli import console
from loopbreaker.cli.main import build_parser, main
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.timeutil import parse_rfc3339

ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every runnable (sub)command parser with its command words."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from leaves(child, (*path, name))


LEAVES = list(leaves(build_parser()))


def runnable(path: tuple[str, ...], parser: argparse.ArgumentParser) -> list[str]:
    """The command words plus a value for each required argument, so parsing gets past
    them to the flag under test."""
    argv = list(path)
    for action in parser._actions:
        if not action.option_strings and action.dest != "help":
            argv.append("x")
        elif action.required:
            argv += [action.option_strings[0], "x"]
    return argv


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusals
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("loopbreaker: error:")]


# --- a typo in a flag -----------------------------------------------------------------


def typos() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str, str]]:
    for path, parser in LEAVES:
        for flag in parser._option_string_actions:
            if flag.startswith("--") and len(flag) > 5:
                middle = 2 + (len(flag) - 2) // 2
                yield path, parser, flag, flag[:middle] + flag[middle + 1 :]


@pytest.mark.parametrize(
    ("path", "parser", "flag", "typo"),
    list(typos()),
    ids=[f"{' '.join(p)} {t}" for p, _, _, t in typos()],
)
def test_a_mistyped_flag_shows_its_commands_usage_and_the_flag_meant(
    capsys: pytest.CaptureFixture[str],
    path: tuple[str, ...],
    parser: argparse.ArgumentParser,
    flag: str,
    typo: str,
) -> None:
    code, _, err = run(capsys, [*runnable(path, parser), typo])
    assert code == 2
    assert err.startswith(f"usage: loopbreaker {' '.join(path)} "), err
    [line] = error_lines(err)
    assert line == f"loopbreaker: error: unrecognized arguments: {typo}; did you mean {flag}?"


def test_the_issue_example_and_a_global_flag_after_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, ["diagnose", "--isue-time", "2026-05-20T08:15:00Z"])
    assert code == 2 and err.startswith("usage: loopbreaker diagnose ")
    assert "did you mean --issue-time?" in err
    code, _, err = run(capsys, ["queries", "--verbose"])
    assert code == 2 and "--verbose goes before the command" in err


def test_a_mistyped_choice_or_subcommand_is_named_too(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, ["incidents", "lsit"])
    assert code == 2 and err.startswith("usage: loopbreaker incidents ")
    assert error_lines(err)[0].endswith("did you mean list?")
    code, _, err = run(capsys, ["queries", "--format", "jsno"])
    assert code == 2 and error_lines(err)[0].endswith("did you mean json?")


# --- every numeric flag is bounded and documented -------------------------------------


def numeric_actions(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    for path, leaf in leaves(parser):
        for action in leaf._actions:
            if isinstance(action, argparse._CountAction):
                continue  # -v, -vv: a repeat count, not a value
            default_is_number = isinstance(action.default, int | float) and not isinstance(
                action.default, bool
            )
            if (
                isinstance(action.type, Bounded)
                or action.type in (int, float)
                or (default_is_number and action.nargs != 0)
            ):
                yield path, action


def unbounded(parser: argparse.ArgumentParser) -> list[str]:
    return [
        f"{' '.join(path)} {action.option_strings[0]}"
        for path, action in numeric_actions(parser)
        if not isinstance(action.type, Bounded)
    ]


NUMERIC = list(numeric_actions(build_parser()))


def test_every_numeric_flag_is_bounded() -> None:
    assert {a.option_strings[0] for _, a in NUMERIC} >= {
        "--max-log-entries",
        "--source-timeout",
        "--timeout",
    }
    assert unbounded(build_parser()) == []


def test_an_unbounded_numeric_flag_would_be_caught() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    planted = sub.add_parser("planted")
    planted.add_argument("--count", type=int)
    planted.add_argument("--ratio", default=0.5)
    planted.add_argument("--fine", type=bounded_int(1, 9))
    assert unbounded(parser) == ["planted --count", "planted --ratio"]


@pytest.mark.parametrize(
    ("path", "action"), NUMERIC, ids=[f"{' '.join(p)} {a.option_strings[0]}" for p, a in NUMERIC]
)
def test_each_range_is_documented_and_enforced(
    capsys: pytest.CaptureFixture[str], path: tuple[str, ...], action: argparse.Action
) -> None:
    bounded = action.type
    assert isinstance(bounded, Bounded)
    flag = action.option_strings[0]
    rows = [line for line in CLI_DOC.splitlines() if line.startswith(f"| `{flag} ")]
    assert rows and all(bounded.range in row for row in rows), (flag, rows)
    assert bounded.low <= action.default <= bounded.high  # type: ignore[operator]
    parser = dict(LEAVES)[path]
    too_big = "99999999999999999999"
    for value in (too_big, str(bounded.low - 1), "nan", "inf", "ten"):
        code, _, err = run(capsys, [*runnable(path, parser), flag, value])
        assert code == 2, (flag, value)
        assert err.startswith(f"usage: loopbreaker {' '.join(path)} ")
        assert error_lines(err) == [
            f"loopbreaker: error: argument {flag}: must be a {bounded.what} from "
            f"{bounded.range}, got {value!r}"
        ]
    assert bounded(str(bounded.high)) == bounded.high


# --- a time without its zone ----------------------------------------------------------

TIME_FLAGS = [
    (path, action.option_strings[0])
    for path, leaf in LEAVES
    for action in leaf._actions
    if action.metavar in ("T", "TIME")
]
#: What a command needs besides the time before it reads it.
CONTEXT = {"diagnose": ["--cluster", "c", "--workload", "w"]}


def test_every_time_flag_is_covered() -> None:
    assert {(p[0], f) for p, f in TIME_FLAGS} >= {
        ("diagnose", "--issue-time"),
        ("queries", "--issue-time"),
        ("validate-queries", "--issue-time"),
        ("pause", "--until"),
    }


@pytest.mark.parametrize(("path", "flag"), TIME_FLAGS)
@pytest.mark.parametrize("value", ["2026-05-20T08:15:00", "2026-05-20 08:15:00.250"])
def test_a_time_without_a_zone_says_so(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    path: tuple[str, ...],
    flag: str,
    value: str,
) -> None:
    store = tmp_path / "incidents.sqlite"
    SqliteStore(store).close()
    argv = [*runnable(path, dict(LEAVES)[path]), *CONTEXT.get(path[0], []), flag, value]
    if "--store" in dict(LEAVES)[path]._option_string_actions:
        argv += ["--store", str(store)]
    code, out, err = run(capsys, argv)
    assert code == 2 and out == ""
    [line] = error_lines(err)
    assert f"{flag} {value!r} has no time zone" in line
    assert "Z for UTC" in line and "+00:00" in line
    # The example it gives is accepted.
    example = re.search(r"e\.g\. (\S+?)\)", line)
    assert example is not None and parse_rfc3339(example[1]).tzinfo is not None


# --- pause --until says what it does --------------------------------------------------


def test_a_timed_pause_says_when_it_ends_and_ends_then(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "incidents.sqlite"
    SqliteStore(store).close()
    before = datetime.now(UTC).replace(microsecond=0)
    code, out, _ = run(
        capsys, ["pause", "--reason", "upgrade", "--until", "2h", "--store", str(store)]
    )
    assert code == 0
    ends = re.findall(r"until (\S+Z)", out)
    assert len(ends) == 2 and ends[0] == ends[1], out  # both lines name the same end
    assert "ends by itself" in out
    until = parse_rfc3339(ends[0])
    assert timedelta(hours=2) <= until - before < timedelta(hours=2, minutes=1)
    db = SqliteStore(store)
    try:
        assert db.current_pause(until - timedelta(seconds=1)) is not None
        assert db.current_pause(until + timedelta(seconds=1)) is None  # as it said
    finally:
        db.close()


def test_an_open_pause_says_until_resume(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "incidents.sqlite"
    SqliteStore(store).close()
    code, out, _ = run(capsys, ["pause", "--reason", "upgrade", "--store", str(store)])
    assert code == 0
    assert "until resumed" in out and "until `loopbreaker resume`" in out
    assert not re.search(r"until \d", out)


# --- a closed pipe --------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["queries", "--cluster", "c", "--workload", "w", "--include-deprecated"],
        ["queries", "--cluster", "c", "--format", "json"],
        ["--help"],
    ],
)
def test_a_reader_that_closes_early_is_not_an_error(argv: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: EPIPE every time
    try:
        done = subprocess.run(
            [sys.executable, "-m", "loopbreaker.cli", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")


def test_head_reads_the_first_lines_and_the_command_exits_0() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "loopbreaker.cli", "queries", "--cluster", "c", "--workload", "w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # what `head -1` does once it has its line
        err = proc.stderr.read()
        code = proc.wait(timeout=60)
    assert first.startswith("# step ")
    assert (code, err) == (0, "")


# --- error lines ----------------------------------------------------------------------


def test_error_lines_end_and_never_share_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    saved = console.track()
    try:
        sys.stderr.write("\r120 entries read, 3 s")  # a progress line left open
        console.error("first")
        console.error("second\nwith a detail on its own line\n")
        console.line("warning: third")
    finally:
        console.untrack(saved)
    assert capsys.readouterr().err == (
        "\r120 entries read, 3 s\n"
        "loopbreaker: error: first\n"
        "loopbreaker: error: second; with a detail on its own line\n"
        "warning: third\n"
    )


def test_an_error_after_open_stdout_on_the_same_file_starts_a_line(tmp_path: Path) -> None:
    both = tmp_path / "both.txt"
    script = (
        "import sys; from loopbreaker.cli import console; console.track(); "
        "sys.stdout.write('partial output'); console.error('one'); console.error('two')"
    )
    with both.open("w") as handle:
        subprocess.run([sys.executable, "-c", script], stdout=handle, stderr=handle, check=True)
    assert both.read_text() == "partial output\nloopbreaker: error: one\nloopbreaker: error: two\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["diagnose", "--cluster", "c", "--workload", "w", "--issue-time", "2026-05-20T08:15:00"],
        ["diagnose", "--max-log-entries", "0"],
        ["diagnose", "--isue-time", "x"],
        ["pause", "--reason", "x", "--until", "soon"],
        ["incidents", "show", "inc-x", "--store", "/nonexistent/incidents.sqlite"],
    ],
)
def test_two_failing_commands_print_two_lines(tmp_path: Path, argv: list[str]) -> None:
    out = tmp_path / "err.txt"
    with out.open("w") as handle:
        for _ in range(2):
            subprocess.run(
                [sys.executable, "-m", "loopbreaker.cli", *argv],
                stdout=handle,
                stderr=handle,
                check=False,
                timeout=60,
            )
    text = out.read_text()
    assert text.endswith("\n")
    errors = [line for line in text.splitlines() if "error:" in line]
    assert len(errors) == 2 and all(e.startswith("loopbreaker: error: ") for e in errors), text
