"""The ``loopbreaker`` command line."""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from loopbreaker import __version__, logs
from loopbreaker.cli import console
from loopbreaker.errors import InvalidInput, StoreError, TransientError

# Each module registers one or more subcommands; argparse calls ``args.handler(args)``.
_COMMAND_MODULES = (
    "loopbreaker.cli.diagnose",
    "loopbreaker.cli.validate",
    "loopbreaker.cli.replay",
    "loopbreaker.cli.incidents.commands",
    "loopbreaker.cli.remediate",
    "loopbreaker.cli.pause",
)


_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)")


class _Parser(argparse.ArgumentParser):
    """Every (sub)command's parser: errors name the subcommand's usage and suggest."""

    def error(self, message: str) -> NoReturn:
        choice = _CHOICE.search(message)
        if choice:
            options = re.findall(r"'([^']*)'", choice["choices"])
            message += _did_you_mean(choice["word"], options)
        self.print_usage(sys.stderr)
        console.error(message)
        self.exit(2)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        # Subparsers hand unknown words up to the top parser, which would print its own
        # usage: find the subcommand they belong to and let its parser complain.
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            leaf = _chosen(self, parsed)
            leaf.error(_unrecognized(leaf, self, extras))
        return parsed


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost subcommand parser that ``parsed`` went through."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(parsed, subs[0].dest, None) if subs else None
        if not subs or name not in subs[0].choices:
            return parser
        parser = subs[0].choices[name]


def _unrecognized(
    leaf: argparse.ArgumentParser, top: argparse.ArgumentParser, extras: list[str]
) -> str:
    message = f"unrecognized arguments: {' '.join(extras)}"
    for word in extras:
        flag = word.split("=", 1)[0]
        if not flag.startswith("-"):
            continue
        if leaf is not top and flag in top._option_string_actions:
            return f"{message} ({flag} goes before the command: loopbreaker {flag} COMMAND ...)"
        return message + _did_you_mean(flag, list(leaf._option_string_actions))
    return message


def _did_you_mean(word: str, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="loopbreaker",
        description="Diagnose and break restart loops of training jobs on GKE.",
    )
    parser.add_argument("--version", action="version", version=f"loopbreaker {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log more: -v for progress (INFO), -vv for DEBUG (default: warnings only)",
    )
    parser.add_argument(
        "--log-format",
        choices=("human", "json"),
        default="human",
        help="human lines (default) or the JSON lines the Cloud Functions write",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an unexpected error"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


_LEVELS = ("WARNING", "INFO", "DEBUG")
#: Flags and positionals that name what a command read, for the one-line error.
_INPUTS = ("telemetry", "paths", "store", "id", "prometheus_url", "kubeconfig")


def main(argv: Sequence[str] | None = None) -> int:
    saved = console.track()
    try:
        code = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here when the output was buffered
    except BrokenPipeError:
        # The reader (`| head`) went away: not an error, as in other Unix tools.
        console.silence_stdout()
        return 0
    finally:
        console.untrack(saved)
    return code


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = _LEVELS[min(args.verbose, len(_LEVELS) - 1)]
    logs.configure(level, human=args.log_format == "human")
    try:
        code: int = args.handler(args)
    except InvalidInput as exc:
        console.error(str(exc))
        return 2
    except (TransientError, StoreError) as exc:
        console.error(f"{exc} (try again later)")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise
    except Exception as exc:  # the last line of defence: one line, never a traceback
        if args.debug:
            raise
        console.error(_unexpected(args, exc))
        return 1
    return code


def _unexpected(args: argparse.Namespace, exc: Exception) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "DefaultCredentialsError" in names:
        return (
            f"{args.command}: no Google Cloud credentials: run 'gcloud auth application-default "
            "login' or set GOOGLE_APPLICATION_CREDENTIALS"
        )
    inputs = []
    for name in _INPUTS:
        value = getattr(args, name, None)
        if value:
            shown = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            inputs.append(f"--{name.replace('_', '-')} {shown}" if name != "paths" else shown)
    on = f" on {', '.join(inputs)}" if inputs else ""
    return (
        f"{args.command} failed{on}: {type(exc).__name__}: {exc} "
        "(run with --debug for the traceback)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
