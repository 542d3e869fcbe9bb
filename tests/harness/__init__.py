"""Integration-test harness: starts real local services on 127.0.0.1 for loopbreaker's tests.

Services: Prometheus (+ promtool back-fill), Alertmanager, the Pub/Sub and Firestore
emulators, and functions-framework servers. Each ``start_*`` returns a Service with ``url``,
``log()`` and ``stop()`` and works as a context manager; pytest fixtures are in ``fixtures``.
"""

from .emulators import (
    FirestoreEmulator,
    PubSubEmulator,
    start_firestore_emulator,
    start_pubsub_emulator,
)
from .functions import FunctionServer, start_function
from .process import HarnessError, Service, free_port, stop_all
from .prometheus import (
    AlertmanagerServer,
    PrometheusServer,
    backfill,
    start_alertmanager,
    start_prometheus,
)

__all__ = [
    "AlertmanagerServer",
    "FirestoreEmulator",
    "FunctionServer",
    "HarnessError",
    "PrometheusServer",
    "PubSubEmulator",
    "Service",
    "backfill",
    "free_port",
    "start_alertmanager",
    "start_firestore_emulator",
    "start_function",
    "start_prometheus",
    "start_pubsub_emulator",
    "stop_all",
]
