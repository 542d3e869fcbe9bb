"""The metric names and raw series selectors the live readers run (PromQL), one place."""

from __future__ import annotations

from collections.abc import Mapping

from loopbreaker.diagnosis.metric_vocabulary import (
    KUBEFLOW_RESTARTS_METRIC,
    LAST_TERMINATED_METRIC,
    LIMITS_METRIC,
    MEMORY_METRICS,
    POD_INFO_METRIC,
    POD_REASON_METRIC,
    POD_REASON_METRICS,
    TERMINATED_METRIC,
    WAITING_METRIC,
    WORKING_SET_METRIC,
    default_selector,
)
from loopbreaker.model import EvidenceKind

__all__ = [
    "IMAGE_WAITING_REASONS",
    "KUBEFLOW_RESTARTS_METRIC",
    "KUBEFLOW_RESTARTS_SELECTOR",
    "LAST_TERMINATED_METRIC",
    "LIMITS_METRIC",
    "MEMORY_METRICS",
    "POD_INFO_METRIC",
    "POD_REASON_METRIC",
    "POD_REASON_METRICS",
    "RAW_SELECTORS",
    "TERMINATED_METRIC",
    "WAITING_METRIC",
    "WORKING_SET_METRIC",
]

#: Container waiting reasons that mean the image could not be pulled.
IMAGE_WAITING_REASONS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
)

#: Raw range-vector selectors the readers run on Managed Prometheus (the other vocabulary
#: is chosen per server: metric_vocabulary); the engine computes deltas from raw samples,
#: so a live Prometheus and a metrics.om file give the same answer.
RAW_SELECTORS: Mapping[EvidenceKind, str] = {
    kind: default_selector(kind)
    for kind in (
        EvidenceKind.RESTARTS,
        EvidenceKind.INTERRUPTIONS,
        EvidenceKind.NODE_CONDITIONS,
        EvidenceKind.POD_PHASES,
        EvidenceKind.UNSCHEDULABLE,
        EvidenceKind.POD_REASONS,
        EvidenceKind.MEMORY,
        EvidenceKind.POD_INFO,
    )
}

#: Kubeflow's operator counts restarts per namespace and framework; it has no job label.
KUBEFLOW_RESTARTS_SELECTOR = default_selector(EvidenceKind.RESTARTS, kubeflow=True)
