"""Cordon and drain through the official ``kubernetes`` client (CoreV1Api, policy/v1).

Built from a kubeconfig or from the GKE API endpoint like the reader
(:mod:`loopbreaker.diagnosis.readers.kube`). Cordon is a strategic-merge patch of
``spec.unschedulable`` with loopbreaker's annotations, after a re-read (an already
cordoned node counts as done). Eviction is ``POST .../pods/{pod}/eviction``: 201/200
evicted, 429 blocked by a PodDisruptionBudget, 404 gone; anything else is ActionFailed.
:class:`KubernetesEvents` writes ``events.k8s.io/v1`` Events about a node (in namespace
``default``, where Events about cluster-scoped objects live).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from loopbreaker.diagnosis.kube_objects import INSTANCE_ID_ANNOTATION
from loopbreaker.errors import ActionFailed, ConfigError, SourceUnavailable
from loopbreaker.remediation.actuators import EVENT_CONTROLLER, Eviction, NodeEvent
from loopbreaker.remediation.owners import Taint
from loopbreaker.remediation.rules import POOL_LABEL, NodeState, PodState

DEFAULT_TIMEOUT = 30.0
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


class KubernetesNodes:
    """:class:`loopbreaker.remediation.actuators.Nodes` on a ``kubernetes.client.ApiClient``."""

    def __init__(self, api_client: Any, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._api_client = api_client
        self._timeout = timeout

    @classmethod
    def from_kubeconfig(cls, path: str | Path, **kwargs: Any) -> KubernetesNodes:
        from loopbreaker.diagnosis.readers.kube import KubernetesReader

        return cls(KubernetesReader.from_kubeconfig(path).api_client, **kwargs)

    @classmethod
    def from_gke(
        cls, project: str, location: str, cluster: str, *, token_provider: Any, **kwargs: Any
    ) -> KubernetesNodes:
        from loopbreaker.diagnosis.readers.kube import KubernetesReader

        try:
            reader = KubernetesReader.from_gke(
                project, location, cluster, token_provider=token_provider
            )
        except SourceUnavailable as exc:  # SourceUnreachable is one too
            raise ActionFailed(
                f"cannot reach cluster {cluster} through the GKE API: {exc}"
            ) from exc
        return cls(reader.api_client, **kwargs)

    def events(self) -> KubernetesEvents:
        """Events about nodes, through the same API client."""
        return KubernetesEvents(self._api_client, timeout=self._timeout)

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self._api_client)

    def _call(self, what: str, call: Callable[[], Any], *, missing_ok: bool = False) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        try:
            return call()
        except ApiException as exc:
            status = int(exc.status or 0)
            if missing_ok and status == 404:
                return None
            raise ActionFailed(
                f"cannot {what}: HTTP {status} {_message(exc)}", status=status
            ) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise ActionFailed(f"cannot {what}: {type(exc).__name__}: {exc}") from exc

    def _json(self, response: Any) -> Any:
        return json.loads(response.data) if response is not None else None

    def get_node(self, name: str) -> NodeState | None:
        api = self._core()
        raw = self._call(
            f"read node {name}",
            lambda: api.read_node(name, _preload_content=False, _request_timeout=self._timeout),
            missing_ok=True,
        )
        return node_state(self._json(raw)) if raw is not None else None

    def pool_nodes(self, pool: str) -> Sequence[NodeState]:
        api = self._core()
        raw = self._call(
            f"list nodes of pool {pool}",
            lambda: api.list_node(
                label_selector=f"{POOL_LABEL}={pool}",
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
        )
        items = (self._json(raw) or {}).get("items") or []
        return [node_state(i) for i in items if isinstance(i, Mapping)]

    def cordon(self, name: str, annotations: Mapping[str, str]) -> str:
        node = self.get_node(name)
        if node is None:
            raise ActionFailed(f"cannot cordon node {name}: it does not exist", status=404)
        if node.unschedulable:
            return "already cordoned"
        api = self._core()
        body = {"metadata": {"annotations": dict(annotations)}, "spec": {"unschedulable": True}}
        self._call(
            f"cordon node {name}",
            lambda: api.patch_node(name, body, _request_timeout=self._timeout),
        )
        return "cordoned"

    def label(
        self, name: str, labels: Mapping[str, str | None], annotations: Mapping[str, str]
    ) -> str:
        """Set (None: remove) node labels and add annotations, in one merge patch."""
        api = self._core()
        body = {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}}
        shown = ", ".join(f"{k}={v}" if v is not None else f"{k}-" for k, v in labels.items())
        self._call(
            f"label node {name}",
            lambda: api.patch_node(name, body, _request_timeout=self._timeout),
        )
        return f"labelled {shown}"

    def pods_on(self, node: str) -> Sequence[PodState]:
        api = self._core()
        raw = self._call(
            f"list pods on node {node}",
            lambda: api.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={node}",
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
        )
        items = (self._json(raw) or {}).get("items") or []
        return [pod_state(i) for i in items if isinstance(i, Mapping)]

    def evict(self, pod: PodState) -> Eviction:
        import urllib3
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=pod.name, namespace=pod.namespace),
        )
        api = self._core()
        try:
            api.create_namespaced_pod_eviction(
                pod.name, pod.namespace, body, _request_timeout=self._timeout
            )
        except ApiException as exc:
            status = int(exc.status or 0)
            if status == 429:
                return Eviction.BLOCKED
            if status == 404:
                return Eviction.GONE
            raise ActionFailed(
                f"cannot evict pod {pod.namespace}/{pod.name}: HTTP {status} {_message(exc)}",
                status=status,
            ) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise ActionFailed(f"cannot evict pod {pod.namespace}/{pod.name}: {exc}") from exc
        return Eviction.EVICTED

    def delete_pod(self, pod: PodState) -> None:
        api = self._core()
        self._call(
            f"delete pod {pod.namespace}/{pod.name}",
            lambda: api.delete_namespaced_pod(
                pod.name, pod.namespace, _request_timeout=self._timeout
            ),
            missing_ok=True,
        )


#: Events about cluster-scoped objects (nodes) are written to this namespace.
EVENT_NAMESPACE = "default"


class KubernetesEvents:
    """:class:`loopbreaker.remediation.actuators.NodeEvents` through ``EventsV1Api``.

    Each Event has a name derived from its content, so a retried write of the same Event
    is answered 409 and counts as written, instead of showing twice.
    """

    def __init__(
        self, api_client: Any, *, instance: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self._api_client = api_client
        self._timeout = timeout
        # ``reportingInstance``: which copy of the controller wrote it (<= 128 chars).
        default = os.environ.get("K_REVISION") or os.environ.get("HOSTNAME") or "loopbreaker"
        self.instance = (instance or default)[:128]

    def node_event(self, event: NodeEvent) -> None:
        import urllib3
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        body = event_body(event, self.instance)
        api = client.EventsV1Api(self._api_client)
        try:
            api.create_namespaced_event(EVENT_NAMESPACE, body, _request_timeout=self._timeout)
        except ApiException as exc:
            status = int(exc.status or 0)
            if status == 409:
                return  # this very Event was written by an earlier attempt
            raise ActionFailed(
                f"cannot write Event {event.reason} on node {event.node}: HTTP {status} "
                f"{_message(exc)}",
                status=status,
            ) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise ActionFailed(f"cannot write Event {event.reason}: {exc}") from exc


def event_body(event: NodeEvent, instance: str) -> dict[str, Any]:
    """The ``events.k8s.io/v1`` Event about ``event.node``, as the API takes it."""
    at = event.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # MicroTime
    key = f"{event.node}/{event.reason}/{at}/{event.note}"
    name = f"{event.node}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": EVENT_NAMESPACE},
        "eventTime": at,
        "reportingController": EVENT_CONTROLLER,
        "reportingInstance": instance,
        "action": event.action[:128],
        "reason": event.reason[:128],
        "note": event.clipped_note(),
        "type": event.type,
        "regarding": {"apiVersion": "v1", "kind": "Node", "name": event.node},
    }


def node_state(obj: Any) -> NodeState:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    ready = None
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    instance_id = annotations.get(INSTANCE_ID_ANNOTATION)
    return NodeState(
        name=str(meta.get("name", "")),
        labels=labels,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        provider_id=spec.get("providerID"),
        instance_id=str(instance_id) if instance_id else None,
        annotations=annotations,
        taints=node_taints(spec.get("taints")),
        kubelet_version=_text(
            ((obj.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
        ),
    )


def node_taints(raw: Any) -> tuple[Taint, ...]:
    """``spec.taints`` of a core/v1 Node: ``key`` (required), ``value``, ``effect``."""
    taints = []
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, Mapping) and item.get("key"):
            value, effect = item.get("value"), item.get("effect")
            taints.append(Taint(str(item["key"]), _text(value), _text(effect)))
    return tuple(taints)


def pod_state(obj: Any) -> PodState:
    meta = obj.get("metadata") or {}
    owners = tuple(
        str(o.get("kind")) for o in meta.get("ownerReferences") or () if isinstance(o, Mapping)
    )
    annotations = meta.get("annotations") or {}
    return PodState(
        namespace=str(meta.get("namespace", "default")),
        name=str(meta.get("name", "")),
        owner_kinds=owners,
        mirror=MIRROR_ANNOTATION in annotations,
        phase=(obj.get("status") or {}).get("phase"),
        terminating=bool(meta.get("deletionTimestamp")),
    )


def _text(value: Any) -> str | None:
    return str(value) if value else None


def _message(exc: Any) -> str:
    try:
        body = json.loads(exc.body or "")
    except (ValueError, TypeError):
        return str(exc.reason or "")[:300]
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])[:300]
    return str(exc.reason or "")[:300]


def check_kubeconfig(path: str) -> Path:
    found = Path(path).expanduser()
    if not found.is_file():
        raise ConfigError(f"kubeconfig {found} does not exist")
    return found
