"""The offline telemetry generator: every scenario folder and the golden signal fixtures.

Standard library only and fully deterministic: every "random" value (suffixes, ids,
sub-second offsets, loss values) is derived from a SHA-256 of fixed keys, so running it twice
writes byte-identical files.

- ``builders/``: what every scenario shares (cluster model, log entries, Events, metrics
  series, node and pod objects, training and accelerator log lines);
- ``scenarios/``: one module per scenario family;
- ``signals/``: the golden signal fixtures.

Run it with ``python examples/telemetry/generator`` (``__main__``).
"""
