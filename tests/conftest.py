"""Shared pytest configuration for loopbreaker's tests."""

import os

# Tests talk to 127.0.0.1 only. google-auth probes the GCE metadata server (a link-local
# address) when it looks for credentials, and reads NO_GCE_CHECK once at import: set it
# before anything imports google-auth, for this process and every subprocess it starts.
os.environ["NO_GCE_CHECK"] = "true"
os.environ["GCE_METADATA_HOST"] = "127.0.0.1:9"
os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)

import uuid  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from fakes import (
    FakeStore,  # noqa: E402
    StoreFactory,  # noqa: E402
)

from loopbreaker.incidents.store.base import IncidentStore  # noqa: E402
from loopbreaker.incidents.store.sqlite import SCRATCH_MEMORY_KEYS, SqliteStore  # noqa: E402

# Real-service fixtures (prometheus_factory, alertmanager_factory, pubsub_emulator,
# firestore_emulator, function_server_factory) live in harness/fixtures.py; contracts/plugin.py
# fails a test whose fake servers saw a request or sent a response their vendor's contract
# forbids.
pytest_plugins = ["harness.fixtures", "contracts.plugin"]


@pytest.fixture(params=["fake", "sqlite", "sqlite-scratch"])
def store(request: pytest.FixtureRequest) -> Iterator[IncidentStore]:
    """Each responder test runs on the recording fake and on the embedded SQLite store,
    durable and scratch (a replay's)."""
    made: IncidentStore = (
        FakeStore()
        if request.param == "fake"
        else SqliteStore(":memory:", scratch=request.param == "sqlite-scratch")
    )
    yield made
    made.close()


@pytest.fixture(params=["sqlite", "sqlite-scratch", "sqlite-scratch-3", "firestore", "fake"])
def store_factory(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StoreFactory]:
    """A factory: every call opens another handle on the SAME store (a new connection).

    A scratch SQLite store has one handle only (its dedup keys are in its memory): every
    call returns it. ``-3`` keeps three keys in memory and the rest in its table.
    """
    opened: list[IncidentStore] = []
    if request.param.startswith("sqlite-scratch"):
        limit = 3 if request.param.endswith("-3") else SCRATCH_MEMORY_KEYS
        scratch = SqliteStore(tmp_path / "incidents.sqlite", scratch=True, memory_keys=limit)
        opened.append(scratch)

        def make() -> IncidentStore:
            return scratch

    elif request.param == "sqlite":
        path = tmp_path / "incidents.sqlite"

        def make() -> IncidentStore:
            store = SqliteStore(path)
            opened.append(store)
            return store

    elif request.param == "firestore":
        emulator = request.getfixturevalue("firestore_emulator")
        for name, value in emulator.env.items():
            monkeypatch.setenv(name, value)
        prefix = "t" + uuid.uuid4().hex[:12]
        from loopbreaker.incidents.store.firestore import FirestoreStore

        def make() -> IncidentStore:
            store = FirestoreStore.connect(
                project=emulator.project, database="(default)", prefix=prefix
            )
            opened.append(store)
            return store

    else:
        shared = FakeStore()

        def make() -> IncidentStore:
            return shared

    yield make
    for store in opened:
        store.close()
