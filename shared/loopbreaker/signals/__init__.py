"""Inputs become Signals: LogEntries, Pub/Sub envelopes and alerts; the sink filters (pure)."""
