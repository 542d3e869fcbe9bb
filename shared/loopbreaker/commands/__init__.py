"""Subcommands of the ``loopbreaker`` CLI; each module exposes ``register(subparsers)``."""
