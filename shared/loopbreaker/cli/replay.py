"""``loopbreaker replay``: run recorded log-sink deliveries through the responder locally."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from loopbreaker import logs
from loopbreaker.model import WorkloadKind
from loopbreaker.settings.load import Runtime, load_settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "replay",
        help="replay log-sink deliveries through the event-driven responder",
        description=(
            "Feed files of LogEntries (JSON array or JSON Lines; a directory is read as the "
            "Cloud Storage sink layout, its .json and .jsonl files), Pub/Sub push envelopes "
            "or Eventarc CloudEvents through the same service as the on_log_entry function, "
            "with the SQLite store and the console notifier, in event-time order, settling "
            "and diagnosing the incidents each minute of event time as on_schedule would; "
            "then print a summary. Files are streamed; an item that cannot be decoded is "
            "reported as rejected with its position and the rest is replayed. Logs go to "
            "stderr, the "
            "summary to stdout. Exit 2 when a file could be read only up to a break."
        ),
    )
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="files (or sink directories) to replay"
    )
    parser.add_argument(
        "--telemetry",
        metavar="DIR",
        type=Path,
        help="offline telemetry directory used as evidence by the diagnoses",
    )
    parser.add_argument(
        "--store",
        metavar="PATH",
        type=Path,
        help="SQLite file to keep the incidents in (default: a temporary store, so runs are "
        "independent; reuse a file to see redeliveries counted as duplicates)",
    )
    parser.add_argument(
        "--workload-kind",
        dest="workload_kind",
        choices=[k.value for k in WorkloadKind],
        help="kind of a workload whose signals do not say (default: "
        "LOOPBREAKER_WORKLOAD_KIND, else jobset)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(handler=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    # Imported here: every command's start pays for what the modules import at the top.
    from loopbreaker.replay import run as replay

    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    if args.workload_kind:
        settings = dataclasses.replace(settings, workload_kind=WorkloadKind(args.workload_kind))
    if not logging.getLogger(logs.ROOT_LOGGER).handlers:
        # Only when the command line has not set logging up already.
        logs.configure(settings.log_level)
    progress = _progress() if sys.stderr.isatty() else None
    summary = replay.run(
        args.paths,
        settings=settings,
        telemetry=args.telemetry,
        store_path=args.store,
        progress=progress,
    )
    if progress is not None:
        print(file=sys.stderr)  # end the progress line
    if args.format == "json":
        print(json.dumps(summary.to_dict(), indent=2))
    else:
        print(replay.to_text(summary))
    for problem in summary.unreadable:
        print(f"loopbreaker: error: {problem}", file=sys.stderr)
    return 2 if summary.unreadable else 0


def _progress() -> Callable[[int], None]:
    """Entries read and time spent, rewritten in place on a terminal."""
    started = time.monotonic()

    def show(count: int) -> None:
        elapsed = time.monotonic() - started
        print(f"\r{count} entries read, {elapsed:.0f} s", end="", file=sys.stderr, flush=True)

    return show
