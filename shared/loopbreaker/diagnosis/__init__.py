"""The four-step diagnosis: engine, query templates, offline telemetry, rendering (pure).

``readers/`` holds the live sources (Prometheus, Cloud Logging, Kubernetes, Compute) and
the per-kind choice between them; it is the only part that talks to a network.
"""
