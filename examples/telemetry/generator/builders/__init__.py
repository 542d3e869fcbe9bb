"""The builders every scenario shares: the cluster model, log entries, Events, metrics series,
node and pod objects, and the log lines of training processes and accelerators."""
