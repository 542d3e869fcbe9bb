"""What the entry points call: responder, chat actions, executor, alert webhook, replay.

``bootstrap`` is the one place where settings become real, dry-run or given ports.
"""
