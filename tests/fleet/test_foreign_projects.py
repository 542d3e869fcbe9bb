"""LOOPBREAKER_PROJECTS: an entry of a project the responder does not serve (a folder or
organization sink catches more than intended) opens no incident and takes no action; it is
counted apart in the replay summary and named in a log line."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import chatkit as K
from fakes import FakeEvidence, FakeNotifier

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.responder.outcomes import Status

CLI = Path(sys.executable).with_name("loopbreaker")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "telemetry"
FAULTY = EXAMPLES / "faulty-host"  # customer-ai-project-123
OOM = EXAMPLES / "jobset-oom-killed"  # helios-ml-prod


def replay(*paths: Path, projects: str, tmp: Path) -> dict[str, object]:
    done = subprocess.run(
        [str(CLI), "replay", *map(str, paths), "--format", "json"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), "LOOPBREAKER_PROJECTS": projects},
        cwd=tmp,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary: dict[str, object] = json.loads(done.stdout)
    return summary


def test_a_folder_sinks_mixture_opens_incidents_only_for_the_served_project(tmp_path: Path) -> None:
    # Both scenarios' entries arrive, as a folder sink delivers them; one project is served.
    served = replay(
        FAULTY / "logs.json", OOM / "logs.json", projects="helios-ml-prod", tmp=tmp_path
    )
    alone = replay(OOM / "logs.json", projects="helios-ml-prod", tmp=tmp_path)
    incidents = served["incidents"]
    assert isinstance(incidents, list) and incidents
    assert {i["project"] for i in incidents} == {"helios-ml-prod"}
    # The same incidents as replaying the served project's entries alone.
    assert sorted(i["key"] for i in incidents) == sorted(i["key"] for i in alone["incidents"])  # type: ignore[union-attr]
    foreign = served["foreign_projects"]
    assert isinstance(foreign, dict) and set(foreign) == {"customer-ai-project-123"}
    # Counted apart: neither an incident's signal nor "ignored" (no signature).
    assert foreign["customer-ai-project-123"] > 0
    assert served["ignored"] == alone["ignored"]
    assert alone["foreign_projects"] == {}


def test_unset_every_project_is_served(tmp_path: Path) -> None:
    summary = replay(FAULTY / "logs.json", OOM / "logs.json", projects="", tmp=tmp_path)
    projects = {i["project"] for i in summary["incidents"]}  # type: ignore[union-attr]
    assert projects == {"helios-ml-prod", "customer-ai-project-123"}
    assert summary["foreign_projects"] == {}


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_on_log_entry_names_the_project_and_acts_on_nothing(tmp_path: Path) -> None:
    settings = K.chat_settings(LOOPBREAKER_PROJECTS="helios-ml-prod", LOOPBREAKER_SETTLE_TIME="0s")
    store = SqliteStore(tmp_path / "incidents.sqlite")
    notifier = FakeNotifier()
    responder = build_responder(settings, store=store, evidence=FakeEvidence(), notifier=notifier)
    entries = json.loads((FAULTY / "logs.json").read_text())
    # On the package's logger itself: whatever earlier tests configured (JSON handlers that
    # do not propagate), its records pass here.
    logger, kept = logging.getLogger("loopbreaker"), Records()
    level = logger.level
    logger.addHandler(kept)
    logger.setLevel(logging.INFO)
    try:
        outcomes = [responder.handle_entry(f"m-{n}", e) for n, e in enumerate(entries)]
    finally:
        logger.removeHandler(kept)
        logger.setLevel(level)
    foreign = [o for o in outcomes if o.status is Status.FOREIGN]
    assert foreign and all(o.project == "customer-ai-project-123" for o in foreign)
    assert not [o for o in outcomes if o.status is Status.ACCEPTED]
    assert responder.settle().diagnosed == [] and store.list_incidents() == []
    assert notifier.posted == []
    lines = [
        r for r in kept.records if getattr(r, "fields", {}).get("event") == "entry_foreign_project"
    ]
    assert len(lines) == len(foreign)
    assert all("customer-ai-project-123" in r.getMessage() for r in lines)
    store.close()
