"""The one wiring place: settings in, a Responder with real, dry-run or given ports out.

Entry points call :func:`build_responder` once and cache the result. Anything passed in
(tests pass fakes) is used as is; anything else is built from the settings, lazily, so
client libraries are imported only by the code path that needs them.
"""

from __future__ import annotations

import logging

from loopbreaker import logs
from loopbreaker.evidence import EvidenceProvider, NoEvidence, TelemetryDirEvidence
from loopbreaker.notify import FileNotifier, LogNotifier, Notifier
from loopbreaker.service import Clock, Responder, system_clock
from loopbreaker.settings import Settings, StoreKind
from loopbreaker.store.base import IncidentStore


def build_store(settings: Settings) -> IncidentStore:
    if settings.store.kind is StoreKind.FIRESTORE:
        from loopbreaker.store.firestore import FirestoreStore

        return FirestoreStore.connect(
            project=settings.project,
            database=settings.firestore_database,
            prefix=settings.collection_prefix,
            dedup_retention=settings.dedup_retention,
        )
    from loopbreaker.store.sqlite import SqliteStore

    assert settings.store.path is not None  # load_settings guarantees a path for sqlite
    return SqliteStore(settings.store.path)


def build_notifier(settings: Settings) -> Notifier:
    if settings.notifier.kind == "file" and settings.notifier.path is not None:
        return FileNotifier(settings.notifier.path)
    return LogNotifier()


def build_evidence(settings: Settings) -> EvidenceProvider:
    if settings.live_sources:
        # Live readers fill in what the telemetry directory (if any) lacks; a source that
        # answers 401/403 or not at all marks its evidence unavailable, nothing raises.
        from loopbreaker.sources import LiveEvidence, SourceOptions

        return LiveEvidence(SourceOptions(telemetry_dir=settings.telemetry_dir))
    if settings.telemetry_dir is not None:
        return TelemetryDirEvidence(settings.telemetry_dir)
    return NoEvidence("live sources are off and no LOOPBREAKER_TELEMETRY_DIR is set")


def build_responder(
    settings: Settings,
    *,
    store: IncidentStore | None = None,
    notifier: Notifier | None = None,
    evidence: EvidenceProvider | None = None,
    clock: Clock | None = None,
) -> Responder:
    """Wire a Responder; every port not given is built from ``settings``."""
    log = logs.get_logger("bootstrap")
    if settings.unknown:
        logs.event(
            log,
            logging.WARNING,
            f"unknown settings ignored: {', '.join(settings.unknown)}",
            event="unknown_settings",
        )
    return Responder(
        settings=settings,
        store=store if store is not None else build_store(settings),
        notifier=notifier if notifier is not None else build_notifier(settings),
        evidence=evidence if evidence is not None else build_evidence(settings),
        clock=clock if clock is not None else system_clock,
    )
