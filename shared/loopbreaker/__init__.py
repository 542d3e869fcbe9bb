"""loopbreaker: diagnose and break restart loops of training jobs on GKE."""

__version__ = "0.1.0"
