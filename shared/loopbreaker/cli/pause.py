"""``loopbreaker pause|resume``: the remediation switch, in the configured store.

While paused, diagnosis and messages go on, approvals are refused, and the remediation
executor refuses every request before its first mutating call (the incident stays
``approved`` and runs after ``resume``). The pause names who, why and until when.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
from datetime import UTC, datetime

from loopbreaker.cli.store import open_store, store_option
from loopbreaker.errors import InvalidContext, InvalidInput
from loopbreaker.incidents import new_pause
from loopbreaker.settings.load import Runtime, load_settings, parse_duration
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pause = sub.add_parser(
        "pause",
        help="pause remediation (no redeploy): approvals and the executor refuse",
        description="Pause remediation in the configured store: diagnosis and messages go "
        "on, approvals are refused and the remediation executor refuses every step before "
        "its first mutating call, until `loopbreaker resume` or --until.",
    )
    pause.add_argument(
        "--reason", required=True, metavar="TEXT", help="why (shown in every message)"
    )
    pause.add_argument(
        "--until",
        metavar="TIME",
        help="end the pause by itself: an RFC 3339 time or a duration from now (e.g. 2h)",
    )
    pause.add_argument("--by", metavar="WHO", help="who pauses (default: user@host)")
    store_option(pause)
    pause.add_argument("--format", choices=("text", "json"), default="text")
    pause.set_defaults(handler=run_pause)
    resume = sub.add_parser(
        "resume",
        help="end the pause: approved incidents remediate again",
        description="End the pause in the configured store; approved requests that were "
        "refused meanwhile are published again by the next on_schedule.",
    )
    resume.add_argument("--by", metavar="WHO", help="who resumes (default: user@host)")
    store_option(resume)
    resume.add_argument("--format", choices=("text", "json"), default="text")
    resume.set_defaults(handler=run_resume)


def _who(raw: str | None) -> str:
    if raw:
        return raw
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def parse_until(raw: str, now: datetime) -> datetime:
    """``--until``: an RFC 3339 time, or a duration from ``now``."""
    try:
        return now + parse_duration(raw)
    except ValueError:
        pass
    try:
        return parse_rfc3339(raw, what="--until")
    except InvalidContext as exc:
        # The time parser's words (a missing zone, say), and the other form accepted.
        raise InvalidInput(f"{exc}; or give a duration from now (2h, 30m)") from exc


def run_pause(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    now = datetime.now(UTC).replace(microsecond=0)  # shown to people: whole seconds
    until = parse_until(args.until, now) if args.until else None
    record = new_pause(_who(args.by), args.reason, now, until)
    store = open_store(args.store, settings)
    try:
        held = store.pause(record)
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps({"paused": (held or record).to_dict(), "already": held is not None}))
        return 0 if held is None else 1
    if held is not None:
        print(f"already {held.describe()}; nothing changed (resume first to change it)")
        return 1
    print(f"remediation {record.describe()}")
    print(f"approvals are refused and the executor acts on nothing {_ends(record.until)}")
    return 0


def _ends(until: datetime | None) -> str:
    """When the pause ends, as the store will apply it (a timed pause lapses by itself)."""
    if until is None:
        return "until `loopbreaker resume`"
    return f"until {format_rfc3339(until)}, when the pause ends by itself, or `loopbreaker resume`"


def run_resume(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ, runtime=Runtime.LOCAL)
    now = datetime.now(UTC)
    store = open_store(args.store, settings)
    try:
        ended = store.resume(_who(args.by), now)
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps({"resumed": ended.to_dict() if ended else None}))
        return 0 if ended else 1
    if ended is None:
        print("remediation was not paused; nothing changed")
        return 1
    print(
        f"resumed by {ended.resumed_by} at {format_rfc3339(now)} (it was {ended.describe()}); "
        "refused approvals are published again by the next on_schedule"
    )
    return 0
