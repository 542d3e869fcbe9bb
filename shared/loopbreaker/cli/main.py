"""The ``loopbreaker`` command line."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from loopbreaker import __version__, logs
from loopbreaker.errors import InvalidInput, StoreError, TransientError

# Each module registers one or more subcommands; argparse calls ``args.handler(args)``.
_COMMAND_MODULES = (
    "loopbreaker.cli.diagnose",
    "loopbreaker.cli.validate",
    "loopbreaker.cli.replay",
    "loopbreaker.cli.incidents",
    "loopbreaker.cli.remediate",
    "loopbreaker.cli.pause",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"loopbreaker: error: {message}\n")


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
    parser = build_parser()
    args = parser.parse_args(argv)
    level = _LEVELS[min(args.verbose, len(_LEVELS) - 1)]
    logs.configure(level, human=args.log_format == "human")
    try:
        code: int = args.handler(args)
    except InvalidInput as exc:
        print(f"loopbreaker: error: {exc}", file=sys.stderr)
        return 2
    except (TransientError, StoreError) as exc:
        print(f"loopbreaker: error: {exc} (try again later)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as other CLI tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as exc:  # the last line of defence: one line, never a traceback
        if args.debug:
            raise
        print(f"loopbreaker: error: {_unexpected(args, exc)}", file=sys.stderr)
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
