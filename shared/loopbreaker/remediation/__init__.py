"""Remediation: the safety rules (pure), the actuators, the request queue, and the executor.

``executor`` runs an approved repair step by step (``steps``), recording each step on the
incident (``recorder``, ``changes``).
"""
