"""Remediation: safety rules (pure), the actuators' ports and clients, the request queue."""
