"""Hostile input at every entry point: no 5xx, no traceback, every valid entry counted once.

Real functions-framework servers (gunicorn, as deployed) serve ``functions/main.py``:
``on_log_entry``, ``on_alertmanager_webhook``, ``on_chat_action`` and
``on_remediation_request``, each on its own SQLite store. The seven payloads of issue 22
are named regression cases; then hypothesis sends each entry point random bytes, random
JSON, and plausible payloads with one field made hostile (a wrong type, nesting past the
limit, a number too long for Python, NaN, a lone surrogate, NUL, a 1 MiB string),
interleaved with valid entries, then redelivers the lot shuffled and concurrently. The
rule checked: bad input is acknowledged (CloudEvents) or refused with a 4xx naming it;
a 5xx only ever for a transient failure whose retry succeeds; no traceback in the server
log; and each valid entry is counted exactly once. ``loopbreaker replay`` gets the same
mixtures from a file.

``make test`` runs the derandomized, bounded ``ci`` profile; ``make bench`` (or anyone)
selects the longer one with ``LOOPBREAKER_HYPOTHESIS_PROFILE=long``.
"""
