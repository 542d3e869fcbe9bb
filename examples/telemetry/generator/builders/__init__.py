"""The builders every scenario family shares.

The cluster model, log entries, Events, metrics series, node and pod objects, and the log
lines of training processes and accelerators.
"""
