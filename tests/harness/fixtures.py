"""pytest fixtures that start real services; registered as a plugin by tests/conftest.py.

Factories are function-scoped: everything a test started is stopped when the test ends.
The emulators are session-scoped because each takes seconds to boot; tests sharing them
must use unique topic/collection names or call ``firestore_emulator.reset()``.
A service that cannot start raises HarnessError, which errors the test (never skips it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import ParamSpec, TypeVar

import pytest

from .emulators import (
    FirestoreEmulator,
    PubSubEmulator,
    start_firestore_emulator,
    start_pubsub_emulator,
)
from .functions import FunctionServer, start_function
from .process import Service
from .prometheus import (
    AlertmanagerServer,
    PrometheusServer,
    start_alertmanager,
    start_prometheus,
)

P = ParamSpec("P")
S = TypeVar("S", bound=Service)

PrometheusFactory = Callable[..., PrometheusServer]
AlertmanagerFactory = Callable[..., AlertmanagerServer]
FunctionServerFactory = Callable[..., FunctionServer]


def _tracked(start: Callable[P, S], stack: ExitStack) -> Callable[P, S]:
    """Wrap a start_* function so every service it returns is stopped with ``stack``."""

    def factory(*args: P.args, **kwargs: P.kwargs) -> S:
        service = start(*args, **kwargs)
        stack.callback(service.stop)
        return service

    return factory


@pytest.fixture
def prometheus_factory() -> Iterator[PrometheusFactory]:
    """``prometheus_factory(openmetrics_files=None, route_prefix=None) -> PrometheusServer``."""
    with ExitStack() as stack:
        yield _tracked(start_prometheus, stack)


@pytest.fixture
def alertmanager_factory() -> Iterator[AlertmanagerFactory]:
    """``alertmanager_factory(config_yaml) -> AlertmanagerServer``."""
    with ExitStack() as stack:
        yield _tracked(start_alertmanager, stack)


@pytest.fixture
def function_server_factory() -> Iterator[FunctionServerFactory]:
    """``function_server_factory(target, source, signature_type, env) -> FunctionServer``."""
    with ExitStack() as stack:
        yield _tracked(start_function, stack)


@pytest.fixture(scope="session")
def pubsub_emulator() -> Iterator[PubSubEmulator]:
    with start_pubsub_emulator() as emulator:
        yield emulator


@pytest.fixture(scope="session")
def firestore_emulator() -> Iterator[FirestoreEmulator]:
    with start_firestore_emulator() as emulator:
        yield emulator
