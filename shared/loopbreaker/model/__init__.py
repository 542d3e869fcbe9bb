"""The shared vocabulary: typed values the core, the readers and the renderers use (stdlib only).

Each module imports only the ones above it: ``kinds`` (what a log entry can say, which controller
restarts a job), ``signal`` (one classified entry and the workload context), ``evidence`` (what
the diagnosis reads) and ``diagnosis`` (what it says). Everything is named from here.
"""

from __future__ import annotations

from loopbreaker.model.diagnosis import (
    Diagnosis,
    FailureEpisode,
    Finding,
    Query,
    QueryLanguage,
    Remediation,
    RemediationPath,
    Risk,
    RootCause,
    StepReport,
    StepStatus,
    SuspectHost,
    TicketDraft,
)
from loopbreaker.model.evidence import (
    TOPOLOGY_BLOCK_LABEL,
    TOPOLOGY_HOST_LABEL,
    TOPOLOGY_SUBBLOCK_LABEL,
    ContainerInfo,
    Evidence,
    EvidenceKind,
    HostFailureRecord,
    HostPlace,
    NodeCondition,
    NodeInfo,
    PodInfo,
    Sample,
    Series,
    SourceStatus,
    Termination,
)
from loopbreaker.model.kinds import (
    ACCELERATOR_MEMORY_KINDS,
    DEFAULT_WINDOW,
    EVIDENCE_ONLY_KINDS,
    HOST_FAULT_KINDS,
    INTERRUPTION_KINDS,
    KUBEFLOW_CHIEF_TYPES,
    POD_FAULT_KINDS,
    WORKLOAD_FAULT_KINDS,
    SignalKind,
    WorkloadKind,
)
from loopbreaker.model.signal import Context, Signal

__all__ = [
    "ACCELERATOR_MEMORY_KINDS",
    "ContainerInfo",
    "Context",
    "DEFAULT_WINDOW",
    "Diagnosis",
    "EVIDENCE_ONLY_KINDS",
    "Evidence",
    "EvidenceKind",
    "FailureEpisode",
    "Finding",
    "HOST_FAULT_KINDS",
    "HostFailureRecord",
    "HostPlace",
    "INTERRUPTION_KINDS",
    "KUBEFLOW_CHIEF_TYPES",
    "NodeCondition",
    "NodeInfo",
    "POD_FAULT_KINDS",
    "PodInfo",
    "Query",
    "QueryLanguage",
    "Remediation",
    "RemediationPath",
    "Risk",
    "RootCause",
    "Sample",
    "Series",
    "Signal",
    "SignalKind",
    "SourceStatus",
    "StepReport",
    "StepStatus",
    "SuspectHost",
    "TOPOLOGY_BLOCK_LABEL",
    "TOPOLOGY_HOST_LABEL",
    "TOPOLOGY_SUBBLOCK_LABEL",
    "Termination",
    "TicketDraft",
    "WORKLOAD_FAULT_KINDS",
    "WorkloadKind",
]
