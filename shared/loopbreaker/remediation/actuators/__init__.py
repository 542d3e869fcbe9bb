"""Actuator ports of the remediation executor, and their dry-run implementations.

Four small role interfaces: :class:`Nodes` (read, cordon, drain a Kubernetes node),
:class:`Vms` (read, delete or report the host of a Compute Engine VM),
:class:`SupportCases` (file a Cloud Support case) and :class:`NodeEvents` (write an
``events.k8s.io/v1`` Event on the node for each step taken or refused; best effort).
Real implementations live beside this module (``kube``, ``compute``, ``support``); the
``DryRun*`` classes here wrap a real reader, pass reads through and *record* every
mutating call instead of sending it.
``loopbreaker.app.bootstrap`` chooses one or the other; the adapters hold no dry-run ``if``.
Failures raise :class:`~loopbreaker.errors.ActionFailed`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from loopbreaker.approval.repair import DisruptionSchedule, FaultReason
from loopbreaker.remediation.rules import InstanceState, NodeState, PodState


class Eviction(StrEnum):
    EVICTED = "evicted"
    #: 429: a PodDisruptionBudget (or API throttling) refused it for now.
    BLOCKED = "blocked"
    #: 404: the pod is gone already.
    GONE = "gone"


class Nodes(Protocol):
    def get_node(self, name: str) -> NodeState | None: ...

    def pool_nodes(self, pool: str) -> Sequence[NodeState]: ...

    def cordon(self, name: str, annotations: Mapping[str, str]) -> str:
        """Mark unschedulable (re-reads first: already cordoned is done); what happened."""
        ...

    def label(
        self, name: str, labels: Mapping[str, str | None], annotations: Mapping[str, str]
    ) -> str:
        """Set (None: remove) labels and add annotations in one patch; what happened."""
        ...

    def pods_on(self, node: str) -> Sequence[PodState]: ...

    def evict(self, pod: PodState) -> Eviction: ...

    def delete_pod(self, pod: PodState) -> None: ...


class Vms(Protocol):
    def get_instance(self, project: str, zone: str, name: str) -> InstanceState | None: ...

    def delete_instance(
        self, project: str, zone: str, name: str, request_id: str, expected_id: str
    ) -> str:
        """Delete and wait for the zone operation; its name. ActionFailed on its error,
        and when the operation acted on another VM id than ``expected_id``."""
        ...

    def report_host_faulty(
        self,
        project: str,
        zone: str,
        name: str,
        request_id: str,
        expected_id: str,
        report: HostReport,
    ) -> str:
        """``instances.reportHostAsFaulty`` and wait; the operation's name."""
        ...


@dataclass(frozen=True)
class HostReport:
    """The body of ``instances.reportHostAsFaulty``: one fault reason and the schedule."""

    behavior: FaultReason
    description: str
    schedule: DisruptionSchedule = DisruptionSchedule.IMMEDIATE

    def summary(self) -> str:
        return (
            f"disruptionSchedule={self.schedule.value} faultReasons[0].behavior="
            f"{self.behavior.value}"
        )


class SupportCases(Protocol):
    def create_case(self, parent: str, case: Mapping[str, Any]) -> str:
        """Create the case; its resource name. ActionFailed (status 403, ...) on refusal."""
        ...


#: ``reportingController`` of loopbreaker's Events (a qualified name, as the API requires).
EVENT_CONTROLLER = "loopbreaker.dev/remediation"
#: Reasons are CamelCase and prefixed, so ``kubectl get events --field-selector
#: reason=LoopbreakerCordoned`` (or a prefix match in a log query) finds them.
EVENT_REASON_PREFIX = "Loopbreaker"
#: The API refuses a note over 1 kB.
EVENT_NOTE_LIMIT = 1024


@dataclass(frozen=True)
class NodeEvent:
    """One Event about a node: what was done (``action``), why (``reason``), and a note."""

    node: str
    reason: str
    action: str
    note: str
    at: datetime
    warning: bool = False

    def __post_init__(self) -> None:
        if not self.reason.startswith(EVENT_REASON_PREFIX) or not self.reason.isalnum():
            raise ValueError(f"Event reason {self.reason!r} is not CamelCase Loopbreaker…")

    @property
    def type(self) -> str:
        return "Warning" if self.warning else "Normal"

    def clipped_note(self) -> str:
        data = self.note.encode()
        if len(data) <= EVENT_NOTE_LIMIT:
            return self.note
        return data[: EVENT_NOTE_LIMIT - 3].decode(errors="ignore") + "..."


class NodeEvents(Protocol):
    def node_event(self, event: NodeEvent) -> None:
        """Write the Event; ActionFailed when the API refuses it (the caller goes on)."""
        ...


class MemoryEvents:
    """Keeps Events instead of writing them: the dry-run choice, and a fake for tests."""

    def __init__(self, fail: Sequence[Exception] = ()) -> None:
        self.events: list[NodeEvent] = []
        self._fail = list(fail)

    def node_event(self, event: NodeEvent) -> None:
        if self._fail:
            raise self._fail.pop(0)
        self.events.append(event)


class Recorder:
    """The calls a dry run would have made, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def record(self, call: str) -> None:
        self.calls.append(call)


class DryRunNodes:
    """Reads through ``reads``; records cordon, eviction and pod deletion calls."""

    def __init__(self, reads: Nodes, recorder: Recorder) -> None:
        self._reads = reads
        self._recorder = recorder

    def get_node(self, name: str) -> NodeState | None:
        return self._reads.get_node(name)

    def pool_nodes(self, pool: str) -> Sequence[NodeState]:
        return self._reads.pool_nodes(pool)

    def cordon(self, name: str, annotations: Mapping[str, str]) -> str:
        node = self._reads.get_node(name)
        if node is not None and node.unschedulable:
            return "already cordoned"
        keys = ", ".join(sorted(annotations))
        self._recorder.record(
            f"PATCH /api/v1/nodes/{name} spec.unschedulable=true annotations {keys}"
        )
        return "would cordon"

    def label(
        self, name: str, labels: Mapping[str, str | None], annotations: Mapping[str, str]
    ) -> str:
        shown = ", ".join(f"{k}={v}" if v is not None else f"{k}-" for k, v in labels.items())
        self._recorder.record(
            f"PATCH /api/v1/nodes/{name} labels {shown} annotations "
            + ", ".join(sorted(annotations))
        )
        return f"would label {shown}"

    def pods_on(self, node: str) -> Sequence[PodState]:
        return self._reads.pods_on(node)

    def evict(self, pod: PodState) -> Eviction:
        self._recorder.record(
            f"POST /api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction (policy/v1)"
        )
        return Eviction.EVICTED

    def delete_pod(self, pod: PodState) -> None:
        self._recorder.record(f"DELETE /api/v1/namespaces/{pod.namespace}/pods/{pod.name}")


class DryRunVms:
    """Reads through ``reads``; records deletions and host reports."""

    def __init__(self, reads: Vms, recorder: Recorder) -> None:
        self._reads = reads
        self._recorder = recorder

    def get_instance(self, project: str, zone: str, name: str) -> InstanceState | None:
        return self._reads.get_instance(project, zone, name)

    def delete_instance(
        self, project: str, zone: str, name: str, request_id: str, expected_id: str
    ) -> str:
        self._recorder.record(
            f"DELETE /compute/v1/projects/{project}/zones/{zone}/instances/{name}"
            f"?requestId={request_id}"
        )
        return "(dry run)"

    def report_host_faulty(
        self,
        project: str,
        zone: str,
        name: str,
        request_id: str,
        expected_id: str,
        report: HostReport,
    ) -> str:
        self._recorder.record(
            f"POST /compute/v1/projects/{project}/zones/{zone}/instances/{name}"
            f"/reportHostAsFaulty?requestId={request_id} {report.summary()}"
        )
        return "(dry run)"


class DryRunSupport:
    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def create_case(self, parent: str, case: Mapping[str, Any]) -> str:
        self._recorder.record(f"POST /v2/{parent}/cases ({case.get('displayName', '')})")
        return "(dry run)"


class LazyNodes:
    """Builds the real :class:`Nodes` on first use, so a cluster that cannot be reached
    fails the step that needed it (recorded, shown) instead of the whole delivery."""

    def __init__(self, build: Callable[[], Nodes]) -> None:
        self._build = build
        self._nodes: Nodes | None = None

    def _get(self) -> Nodes:
        if self._nodes is None:
            self._nodes = self._build()
        return self._nodes

    def get_node(self, name: str) -> NodeState | None:
        return self._get().get_node(name)

    def pool_nodes(self, pool: str) -> Sequence[NodeState]:
        return self._get().pool_nodes(pool)

    def cordon(self, name: str, annotations: Mapping[str, str]) -> str:
        return self._get().cordon(name, annotations)

    def label(
        self, name: str, labels: Mapping[str, str | None], annotations: Mapping[str, str]
    ) -> str:
        return self._get().label(name, labels, annotations)

    def pods_on(self, node: str) -> Sequence[PodState]:
        return self._get().pods_on(node)

    def evict(self, pod: PodState) -> Eviction:
        return self._get().evict(pod)

    def delete_pod(self, pod: PodState) -> None:
        self._get().delete_pod(pod)

    def unwrap(self) -> Nodes:
        """The real Nodes (built now if need be)."""
        return self._get()


class LazyEvents:
    """Builds the real :class:`NodeEvents` on first use (a failure fails that write only)."""

    def __init__(self, build: Callable[[], NodeEvents]) -> None:
        self._build = build
        self._events: NodeEvents | None = None

    def node_event(self, event: NodeEvent) -> None:
        if self._events is None:
            self._events = self._build()
        self._events.node_event(event)


class Unavailable:
    """Nodes / Vms for when no cluster or Compute access is configured: every call fails."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __getattr__(self, name: str) -> Any:
        from loopbreaker.errors import ActionFailed

        def fail(*_: object, **__: object) -> Any:
            raise ActionFailed(self.reason)

        return fail
