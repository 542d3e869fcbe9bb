"""The ``loopbreaker`` command line."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from loopbreaker import __version__
from loopbreaker.errors import InvalidInput, StoreError, TransientError

# Each module registers one or more subcommands; argparse calls ``args.handler(args)``.
_COMMAND_MODULES = (
    "loopbreaker.cli.diagnose",
    "loopbreaker.cli.validate",
    "loopbreaker.cli.replay",
    "loopbreaker.cli.incidents",
    "loopbreaker.cli.remediate",
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
    return code


if __name__ == "__main__":
    raise SystemExit(main())
