"""Cordon and drain through the official ``kubernetes`` client (CoreV1Api, policy/v1).

Built from a kubeconfig or from the GKE API endpoint like the reader
(:mod:`loopbreaker.diagnosis.readers.kube`). Cordon is a strategic-merge patch of
``spec.unschedulable`` with loopbreaker's annotations, after a re-read (an already
cordoned node counts as done). Eviction is ``POST .../pods/{pod}/eviction``: 201/200
evicted, 429 blocked by a PodDisruptionBudget, 404 gone; anything else is ActionFailed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from loopbreaker.diagnosis.kube_objects import INSTANCE_ID_ANNOTATION
from loopbreaker.errors import ActionFailed, ConfigError, SourceUnavailable
from loopbreaker.remediation.actuators import Eviction
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


def node_state(obj: Any) -> NodeState:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = meta.get("annotations") or {}
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
    )


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
