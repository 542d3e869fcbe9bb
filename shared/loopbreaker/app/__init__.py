"""The HTTP entry points' handlers and the one wiring place.

``bootstrap`` turns settings into real, dry-run or given ports; ``alert_webhook`` takes
Alertmanager's and Cloud Monitoring's alerts; ``chat_actions`` turns a verified Approve / Reject
click into one recorded decision; ``replies`` is the shape of an HTTP reply. The log-entry path is
:mod:`loopbreaker.responder`, the remediation path :mod:`loopbreaker.remediation.executor`.
"""
