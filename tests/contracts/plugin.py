"""pytest plugin: a contract violation seen by any fake server fails the test that caused it.

Registered by tests/conftest.py (``pytest_plugins``). After each test (its fixtures torn
down: this fixture is set up first, so it is torn down last) every fake server started in
the process hands over the violations it recorded since the last test; any makes the test
fail at teardown, listing them. Violations recorded after the last test (a module fixture's
teardown) fail the session.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakeservers.base import take_violations


def _report(found: list) -> str:  # type: ignore[type-arg]
    lines = [f"{type(server).__name__}: {violation}" for server, violation in found]
    return "the fake servers saw requests or sent responses their contract forbids:\n" + (
        "\n".join(f"  - {line}" for line in lines)
    )


@pytest.fixture(autouse=True)
def _contracts_hold() -> Iterator[None]:
    found = take_violations()  # a module fixture's setup, or the previous test's teardown
    if found:
        pytest.fail(_report(found), pytrace=False)
    yield
    found = take_violations()
    if found:
        pytest.fail(_report(found), pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    found = take_violations()
    if found:
        print("\n" + _report(found))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
