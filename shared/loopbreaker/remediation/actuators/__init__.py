"""Actuator ports of the remediation executor, and their dry-run implementations.

Three small role interfaces: :class:`Nodes` (read, cordon, drain a Kubernetes node),
:class:`Vms` (read, delete or report the host of a Compute Engine VM) and
:class:`SupportCases` (file a Cloud Support case). Real implementations live beside this
module (``kube``, ``compute``, ``support``); the ``DryRun*`` classes here wrap a real
reader, pass reads through and *record* every mutating call instead of sending it.
``loopbreaker.app.bootstrap`` chooses one or the other; the adapters hold no dry-run ``if``.
Failures raise :class:`~loopbreaker.errors.ActionFailed`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

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
        self, project: str, zone: str, name: str, request_id: str, expected_id: str
    ) -> str:
        """``instances.reportHostAsFaulty`` and wait; the operation's name."""
        ...


class SupportCases(Protocol):
    def create_case(self, parent: str, case: Mapping[str, Any]) -> str:
        """Create the case; its resource name. ActionFailed (status 403, ...) on refusal."""
        ...


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
        self, project: str, zone: str, name: str, request_id: str, expected_id: str
    ) -> str:
        self._recorder.record(
            f"POST /compute/v1/projects/{project}/zones/{zone}/instances/{name}"
            f"/reportHostAsFaulty?requestId={request_id}"
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

    def pods_on(self, node: str) -> Sequence[PodState]:
        return self._get().pods_on(node)

    def evict(self, pod: PodState) -> Eviction:
        return self._get().evict(pod)

    def delete_pod(self, pod: PodState) -> None:
        self._get().delete_pod(pod)


class Unavailable:
    """Nodes / Vms for when no cluster or Compute access is configured: every call fails."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __getattr__(self, name: str) -> Any:
        from loopbreaker.errors import ActionFailed

        def fail(*_: object, **__: object) -> Any:
            raise ActionFailed(self.reason)

        return fail
