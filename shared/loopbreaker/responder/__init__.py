"""The responder: from a delivery (log entry, alert) to a settled, diagnosed incident.

``service`` is the Responder the entry points call. ``ingest`` classifies, keys and
deduplicates deliveries into incidents; ``settle`` expires, diagnoses, notifies and verifies
them. ``ports`` holds what both share, ``outcomes`` what they return, ``assessment`` whether a
repair worked; ``kubeflow_alerts`` and ``pod_owners`` resolve the workload an input names.
"""
