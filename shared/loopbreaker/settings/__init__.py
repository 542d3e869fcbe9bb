"""Every ``LOOPBREAKER_*`` setting: read once from the environment, parsed, validated, documented.

``load`` reads the environment (:func:`~loopbreaker.settings.load.load_settings`); ``parse``
parses one kind of value each; ``model`` holds the types and named defaults; ``table`` is the
documented table docs/configuration.md shows; ``secrets`` fills in values kept in Secret Manager.
"""
