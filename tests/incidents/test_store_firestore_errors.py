"""FirestoreStore's mapping of API errors: no emulator, a stub client raises what the
Firestore API would (google.api_core exceptions)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loopbreaker.errors import TransientError
from loopbreaker.incidents.store.base import IncidentStore

T0 = datetime(2026, 5, 20, 8, 0, tzinfo=UTC)


class _StubClient:
    """Just enough of firestore.Client for FirestoreStore to raise ``error`` on a call."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def collection(self, name: str) -> _StubClient:
        return self

    def document(self, name: str) -> _StubClient:
        return self

    def get(self) -> None:
        raise self.error

    def batch(self) -> _StubClient:
        return self

    def create(self, ref: object, data: object) -> None:
        pass

    def commit(self) -> None:
        raise self.error


def _firestore(error: Exception) -> IncidentStore:
    from loopbreaker.incidents.store.firestore import FirestoreStore

    return FirestoreStore(_StubClient(error))


@pytest.mark.parametrize("name", ["PermissionDenied", "NotFound", "InvalidArgument"])
def test_firestore_wraps_permanent_api_errors_in_store_error(name: str) -> None:
    from google.api_core import exceptions as gexc

    from loopbreaker.errors import LoopbreakerError, StoreError

    error = getattr(gexc, name)("nope")
    with pytest.raises(StoreError, match="nope") as caught:
        _firestore(error).get("inc-1")
    assert caught.value.__cause__ is error and isinstance(caught.value, LoopbreakerError)
    assert not isinstance(caught.value, TransientError)


def test_firestore_maps_transient_errors_and_keeps_conflicts_for_the_retry_loop() -> None:
    from google.api_core import exceptions as gexc

    from loopbreaker.errors import StoreError

    with pytest.raises(TransientError):
        _firestore(gexc.ServiceUnavailable("down")).get("inc-1")
    # A lost create-if-absent race is a duplicate, not an error ...
    assert _firestore(gexc.AlreadyExists("taken")).remember(["e-1"], T0) is True
    # ... but outside a conditioned commit a failed precondition is a StoreError.
    with pytest.raises(StoreError):
        _firestore(gexc.FailedPrecondition("needs an index")).get("inc-1")
