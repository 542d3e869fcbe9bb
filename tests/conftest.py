"""Shared pytest configuration for loopbreaker's tests."""

# Real-service fixtures (prometheus_factory, alertmanager_factory, pubsub_emulator,
# firestore_emulator, function_server_factory) live in harness/fixtures.py.
import os

pytest_plugins = ["harness.fixtures"]

# Tests talk to 127.0.0.1 only. google-auth probes the GCE metadata server (a link-local
# address) when it looks for credentials; point it at a closed loopback port instead, for
# this process and every subprocess it starts.
os.environ["NO_GCE_CHECK"] = "true"
os.environ["GCE_METADATA_HOST"] = "127.0.0.1:9"
os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
