"""Offline replay: files of deliveries fed through the same responder as ``on_log_entry``.

``run`` stages and feeds them in event-time order; ``reader`` reads, decodes and screens the
files; ``evidence`` cuts an offline telemetry directory to what was known at the replay clock.
"""
