"""Shared pytest configuration for loopbreaker's tests."""

# Real-service fixtures (prometheus_factory, alertmanager_factory, pubsub_emulator,
# firestore_emulator, function_server_factory) live in harness/fixtures.py.
pytest_plugins = ["harness.fixtures"]
