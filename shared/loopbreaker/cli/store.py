"""The ``--store`` option of the CLI's commands, and opening the incident store it names."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from loopbreaker.errors import InvalidInput
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.settings.load import PREFIX, Settings, StoreKind, StoreSpec

#: Where local stores live (the default one, the demo's, a replay's --store ...).
LOCAL_STORES = Path(".loopbreaker")
#: Stores a missing-store message names at most.
HINTS = 5


def store_option(parser: argparse.ArgumentParser) -> None:
    """The ``--store`` option of every subcommand that reads the store."""
    parser.add_argument(
        "--store",
        metavar="S",
        help=f"sqlite:PATH, a SQLite file, or firestore (default: {PREFIX}STORE, else the "
        "local store .loopbreaker/incidents.sqlite)",
    )


def store_hint(missing: Path, again: str | None) -> str:
    """The SQLite stores under .loopbreaker/ (newest first), and how to use the newest."""
    try:
        found = [p for p in LOCAL_STORES.rglob("*.sqlite") if p.is_file() and p != missing]
    except OSError:
        return ""
    if not found:
        return ""
    found.sort(key=lambda p: (-p.stat().st_mtime, str(p)))
    shown = ", ".join(str(p) for p in found[:HINTS])
    more = f" and {len(found) - HINTS} more" if len(found) > HINTS else ""
    use = f"{again} --store {found[0]}" if again else f"--store {found[0]}"
    return f"; stores under {LOCAL_STORES}/: {shown}{more}; use one: {use}"


def open_store(raw: str | None, settings: Settings, *, again: str | None = None) -> IncidentStore:
    """The store ``--store`` names; a SQLite file must exist (no typo creates a new one).

    ``again`` is the command line to repeat with ``--store``, named when the file is missing.
    """
    spec = settings.store
    if raw:
        if raw == StoreKind.FIRESTORE.value:
            spec = StoreSpec(StoreKind.FIRESTORE)
        else:
            path = raw[len("sqlite:") :] if raw.startswith("sqlite:") else raw
            if not path.strip():
                raise InvalidInput("--store: expected sqlite:PATH, a file, or firestore")
            spec = StoreSpec(StoreKind.SQLITE, Path(path).expanduser())
    if spec.kind is StoreKind.SQLITE:
        assert spec.path is not None
        if not spec.path.is_file():
            hint = store_hint(spec.path, again)
            raise InvalidInput(f"no incident store at {spec.path}{hint}")
    from loopbreaker.app.bootstrap import build_store  # the clients of one store only

    return build_store(replace(settings, store=spec))
