"""A stateful fake Kubernetes API server for remediation: cordon, drain (Eviction API), delete.

On top of :class:`KubernetesServer`'s lists it serves, as the real apiserver does:

* ``GET/PATCH /api/v1/nodes/{name}`` (strategic-merge, merge and JSON patches);
* ``labelSelector`` (``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, comma-joined) and
  ``fieldSelector`` (dotted paths with ``=``, ``==``, ``!=``, e.g.
  ``spec.nodeName=n1,status.phase!=Succeeded``) on every list;
* ``GET/DELETE /api/v1/namespaces/{ns}/pods/{name}``;
* ``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` (policy/v1 Eviction), answering from
  ``eviction_script[(ns, name)]`` (one status per request: 201, 429 PDB refusal, 500, any
  other code) and otherwise 201 with the pod removed.

* ``POST /apis/events.k8s.io/v1/namespaces/{ns}/events`` (and ``GET`` to list them),
  validated as the apiserver validates a new ``events.k8s.io/v1`` Event (required
  ``eventTime``, ``reportingController`` as a qualified name, ``reportingInstance``,
  ``action`` and ``reason`` of at most 128 characters, ``note`` of at most 1 kB, ``type``
  Normal or Warning, an Event about a cluster-scoped object in ``default``); 409 for a
  name that exists. ``event_script`` answers the next writes with the given statuses.

Everything mutating is recorded: ``mutations`` (method, path), ``patches``, ``evictions``,
``deleted_pods``. Events are kept apart in ``events`` (they record, they change nothing).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from .base import Request, Response
from .kube import KubernetesServer

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."

_PATCH_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}
#: Fields the apiserver accepts in a fieldSelector (others: 400 "field label not supported").
_SELECTABLE = {
    "nodes": {"metadata.name", "spec.unschedulable"},
    "pods": {
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
}
#: Strategic-merge list merge keys the fake knows (others lists are replaced, as in merge).
_MERGE_KEYS = {"taints": "key", "conditions": "type"}


class ClusterServer(KubernetesServer):
    """Nodes and pods that change as the client cordons, evicts and deletes."""

    _NODE = re.compile(r"^/api/v1/nodes/([^/]+)$")
    _POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")
    _EVICTION = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")
    _LISTS = re.compile(r"^/api/v1/(nodes|pods|namespaces/([^/]+)/pods)$")
    _EVENTS = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events$")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes = copy.deepcopy(self.nodes)
        self.pods = copy.deepcopy(self.pods)
        #: (namespace, pod) -> statuses answered to the next evictions, one per request.
        self.eviction_script: dict[tuple[str, str], list[int]] = {}
        #: Retry-After (and details.retryAfterSeconds) of a scripted 429. The apiserver sends
        #: 10 while a PDB is still being processed and 0 (no header) when it allows no
        #: disruption; set 0 or None for the latter.
        self.eviction_retry_after: int | None = 10
        self.mutations: list[tuple[str, str]] = []
        #: (node, content type, patch body) per PATCH that was applied.
        self.patches: list[tuple[str, str, Any]] = []
        #: (namespace, pod, status answered) per eviction request for an existing pod.
        self.evictions: list[tuple[str, str, int]] = []
        #: (namespace, pod) per successful DELETE.
        self.deleted_pods: list[tuple[str, str]] = []
        #: The Events written (as stored, with uid and resourceVersion).
        self.events: list[dict[str, Any]] = []
        #: Statuses answered to the next Event writes, one per request (e.g. [403, 500]).
        self.event_script: list[int] = []
        self._state = threading.RLock()
        self._version = 12345

    # --- lookups for tests ------------------------------------------------------------

    def node(self, name: str) -> dict[str, Any] | None:
        return next((n for n in self.nodes if _name(n) == name), None)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((p for p in self.pods if _key(p) == (namespace, name)), None)

    # --- routing ----------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        if (
            self.token is not None
            and request.headers.get("authorization") != f"Bearer {self.token}"
        ):
            return self.error(401, "Unauthorized")
        with self._state:
            if match := self._EVENTS.match(request.path):
                return self._events(request, match.group(1))
            if request.method != "GET":
                self.mutations.append((request.method, request.path))
            return self._route(request)

    def _route(self, request: Request) -> Response:
        method, path = request.method, request.path
        if match := self._LISTS.match(path):
            if method != "GET":
                return self._not_allowed(request)
            return self._filtered_list(request, match.group(1), match.group(2))
        if match := self._NODE.match(path):
            handlers: dict[str, Callable[[Request, str], Response]] = {
                "GET": self._get_node,
                "PATCH": self._patch_node,
            }
            handler = handlers.get(method)
            return handler(request, match.group(1)) if handler else self._not_allowed(request)
        if match := self._EVICTION.match(path):
            if method != "POST":
                return self._not_allowed(request)
            return self._evict(request, match.group(1), match.group(2))
        if match := self._POD.match(path):
            namespace, name = match.groups()
            if method == "GET":
                return self._get_pod(namespace, name)
            if method == "DELETE":
                return self._delete_pod(namespace, name)
            return self._not_allowed(request)
        return self.error(404, "the server could not find the requested resource")

    def _not_allowed(self, request: Request) -> Response:
        return self.status(405, "MethodNotAllowed", f"{request.method} is not supported")

    # --- lists ------------------------------------------------------------------------

    def _filtered_list(self, request: Request, what: str, namespace: str | None) -> Response:
        try:
            labels = _label_selector(request.param("labelSelector") or "")
            fields = _field_selector(
                request.param("fieldSelector") or "",
                _SELECTABLE["nodes" if what == "nodes" else "pods"],
            )
        except ValueError as exc:
            return self.status(400, "BadRequest", str(exc))
        if what == "nodes":
            kind, items = "NodeList", self.nodes
        else:
            kind, items = "PodList", self.pods
            if namespace is not None:
                items = [p for p in items if p.get("metadata", {}).get("namespace") == namespace]
        selected = [i for i in items if labels(i) and fields(i)]
        return self._list(kind, copy.deepcopy(selected), request)

    # --- nodes ------------------------------------------------------------------------

    def _get_node(self, request: Request, name: str) -> Response:
        node = self.node(name)
        if node is None:
            return self._not_found("nodes", name)
        return Response.json(node)

    def _patch_node(self, request: Request, name: str) -> Response:
        node = self.node(name)
        if node is None:
            return self._not_found("nodes", name)
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        kind = _PATCH_TYPES.get(content_type)
        if kind is None:
            return self.status(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format: "
                f"accepted media types include: {', '.join(_PATCH_TYPES)}",
            )
        try:
            patch = json.loads(request.body or b"null")
            if kind == "json":
                patched = _json_patch(node, patch)
            elif isinstance(patch, dict):
                patched = _merge(node, patch, strategic=kind == "strategic")
            else:
                raise ValueError("a merge patch must be a JSON object")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return self.status(422 if kind == "json" else 400, "BadRequest", str(exc))
        if _name(patched) != name:
            return self.status(422, "Invalid", "metadata.name: Invalid value: field is immutable")
        self._version += 1
        patched.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        node.clear()
        node.update(patched)
        self.patches.append((name, content_type, patch))
        return Response.json(node)

    # --- pods -------------------------------------------------------------------------

    def _get_pod(self, namespace: str, name: str) -> Response:
        pod = self.pod(namespace, name)
        if pod is None:
            return self._not_found("pods", name)
        return Response.json(pod)

    def _delete_pod(self, namespace: str, name: str) -> Response:
        pod = self.pod(namespace, name)
        if pod is None:
            return self._not_found("pods", name)
        self.pods.remove(pod)
        self.deleted_pods.append((namespace, name))
        return Response.json(pod)

    def _evict(self, request: Request, namespace: str, name: str) -> Response:
        try:
            body = request.json()
        except ValueError:
            return self.status(400, "BadRequest", "the body of the request is not JSON")
        meta = (body or {}).get("metadata") or {}
        if meta.get("name") not in (None, name):
            return self.status(
                400, "BadRequest", "name in URL does not match name in Eviction object"
            )
        if meta.get("namespace") not in (None, namespace):
            return self.status(
                400, "BadRequest", "namespace in URL does not match namespace in Eviction object"
            )
        pod = self.pod(namespace, name)
        if pod is None:
            return self._not_found("pods", name)
        script = self.eviction_script.get((namespace, name))
        code = script.pop(0) if script else 201
        self.evictions.append((namespace, name, code))
        if code in (200, 201):
            self.pods.remove(pod)
            return Response.json(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": code,
                },
                code,
            )
        if code == 429:
            return self._pdb_refusal()
        if code == 500:
            return self.status(500, "InternalError", "Internal error occurred: eviction failed")
        return self.error(code, f"eviction of {namespace}/{name} failed")

    def _pdb_refusal(self) -> Response:
        retry_after = self.eviction_retry_after or 0
        cause = (
            "The disruption budget pdb is still being processed by the server."
            if retry_after
            else "The disruption budget pdb needs 1 healthy pods and has 1 currently"
        )
        details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
        if retry_after:
            details["retryAfterSeconds"] = retry_after
        response = self.status(429, "TooManyRequests", PDB_MESSAGE, details=details)
        if retry_after:
            response.headers["Retry-After"] = str(retry_after)
        return response

    # --- events.k8s.io/v1 -------------------------------------------------------------

    def _events(self, request: Request, namespace: str) -> Response:
        if request.method == "GET":
            items = [e for e in self.events if e["metadata"]["namespace"] == namespace]
            return Response.json(
                {
                    "kind": "EventList",
                    "apiVersion": "events.k8s.io/v1",
                    "metadata": {"resourceVersion": str(self._version)},
                    "items": items,
                }
            )
        if request.method != "POST":
            return self._not_allowed(request)
        if self.event_script:
            code = self.event_script.pop(0)
            return self.status(code, "InternalError" if code >= 500 else "Forbidden", "scripted")
        try:
            body = request.json()
        except ValueError:
            return self.status(400, "BadRequest", "the body of the request is not JSON")
        if not isinstance(body, dict):
            return self.status(400, "BadRequest", "the body is not an object")
        errors = _event_errors(body, namespace)
        if errors:
            return self.status(
                422,
                "Invalid",
                f'Event.events.k8s.io "{(body.get("metadata") or {}).get("name", "")}" is '
                f"invalid: {', '.join(errors)}",
            )
        meta = dict(body.get("metadata") or {})
        name = meta.get("name") or f"{meta.get('generateName', 'event-')}{len(self.events):05x}"
        if any(e["metadata"]["name"] == name for e in self.events):
            return self.status(
                409, "AlreadyExists", f'events.events.k8s.io "{name}" already exists'
            )
        self._version += 1
        stored = {
            **body,
            "metadata": {
                **meta,
                "name": name,
                "namespace": namespace,
                "uid": f"ev-{len(self.events):08d}",
                "resourceVersion": str(self._version),
            },
        }
        self.events.append(stored)
        return Response.json(stored, 201)

    def event_reasons(self) -> list[str]:
        return [str(e.get("reason")) for e in self.events]

    # --- Status bodies ----------------------------------------------------------------

    def status(
        self, code: int, reason: str, message: str, *, details: dict[str, Any] | None = None
    ) -> Response:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if details:
            body["details"] = details
        return Response.json(body, code)

    def _not_found(self, kind: str, name: str) -> Response:
        return self.status(
            404,
            "NotFound",
            f'{kind} "{name}" not found',
            details={"name": name, "kind": kind},
        )


# --- helpers --------------------------------------------------------------------------------

_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
_CLUSTER_SCOPED = {"Node", "Namespace", "PersistentVolume"}


def _event_errors(body: dict[str, Any], namespace: str) -> list[str]:
    """What the apiserver's ValidateEventCreate (events.k8s.io/v1) says of a new Event."""
    errors = []
    meta = body.get("metadata") or {}
    if meta.get("namespace") not in (None, namespace):
        errors.append("metadata.namespace: does not match the namespace of the request")
    if not meta.get("name") and not meta.get("generateName"):
        errors.append("metadata.name: Required value: name or generateName is required")
    if not isinstance(body.get("eventTime"), str) or not _MICRO_TIME.match(body["eventTime"]):
        errors.append("eventTime: Required value")
    controller = body.get("reportingController")
    if not isinstance(controller, str) or not _QUALIFIED.match(controller):
        errors.append("reportingController: Invalid value: must be a qualified name")
    for name in ("reportingInstance", "action", "reason"):
        value = body.get(name)
        if not isinstance(value, str) or not value:
            errors.append(f"{name}: Required value")
        elif len(value) > 128:
            errors.append(f"{name}: Too long: may not be more than 128 bytes")
    if len(str(body.get("note") or "").encode()) > 1024:
        errors.append("note: Too long: may not be more than 1024 bytes")
    if body.get("type") not in ("Normal", "Warning"):
        errors.append('type: Unsupported value: supported values: "Normal", "Warning"')
    regarding = body.get("regarding") or {}
    if not regarding.get("kind") or not regarding.get("name"):
        errors.append("regarding: Required value")
    elif regarding.get("kind") in _CLUSTER_SCOPED and namespace != "default":
        errors.append(
            "namespace: Invalid value: an Event about a cluster-scoped object is in default"
        )
    return errors


def _name(obj: dict[str, Any]) -> str | None:
    return obj.get("metadata", {}).get("name")


def _key(obj: dict[str, Any]) -> tuple[str | None, str | None]:
    meta = obj.get("metadata", {})
    return meta.get("namespace"), meta.get("name")


def _label_selector(text: str) -> Callable[[dict[str, Any]], bool]:
    """Equality-based selectors; ``k!=v`` also matches objects without ``k``, as upstream."""
    tests: list[tuple[str, str, str | None]] = []  # (op, key, value)
    for raw in filter(None, (part.strip() for part in text.split(","))):
        if " in " in raw or " notin " in raw or "(" in raw:
            raise ValueError(f"unable to parse requirement: set-based selector {raw!r}")
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            tests.append(("!=", key.strip(), value.strip()))
        elif "=" in raw:
            key, value = raw.replace("==", "=").split("=", 1)
            tests.append(("=", key.strip(), value.strip()))
        elif raw.startswith("!"):
            tests.append(("!", raw[1:].strip(), None))
        else:
            tests.append(("exists", raw, None))

    def test(labels: dict[str, str], op: str, key: str, value: str | None) -> bool:
        if op == "=":
            return labels.get(key) == value
        if op == "!=":
            return labels.get(key) != value
        return (key in labels) == (op == "exists")

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(test(labels, *t) for t in tests)

    return matches


def _field_selector(text: str, selectable: set[str]) -> Callable[[dict[str, Any]], bool]:
    tests: list[tuple[list[str], str, bool]] = []
    for raw in filter(None, (part.strip() for part in text.split(","))):
        negate = "!=" in raw
        key, sep, value = raw.partition("!=" if negate else "=")
        if not sep:
            raise ValueError(f"invalid field selector: {raw!r}")
        value = value[1:] if not negate and value.startswith("=") else value
        if key.strip() not in selectable:
            raise ValueError(f'field label not supported: "{key.strip()}"')
        tests.append((key.strip().split("."), value.strip(), negate))

    def field(obj: Any, path: list[str]) -> str:
        for part in path:
            obj = obj.get(part) if isinstance(obj, dict) else None
        if isinstance(obj, bool):
            return str(obj).lower()
        return "" if obj is None else str(obj)

    def matches(obj: dict[str, Any]) -> bool:
        return all((field(obj, path) == value) != negate for path, value, negate in tests)

    return matches


def _merge(target: Any, patch: Any, *, strategic: bool, key: str | None = None) -> Any:
    """RFC 7386 merge; with ``strategic``, lists named in ``_MERGE_KEYS`` merge by key."""
    if isinstance(patch, dict) and isinstance(target, dict):
        merged = copy.deepcopy(target)
        for name, value in patch.items():
            if name.startswith("$"):
                continue  # strategic directives ($patch, $retainKeys): not modelled
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = _merge(merged.get(name), value, strategic=strategic, key=name)
        return merged
    if strategic and isinstance(patch, list) and key in _MERGE_KEYS:
        merge_key = _MERGE_KEYS[key]
        merged_list = copy.deepcopy(target) if isinstance(target, list) else []
        for item in patch:
            index = next(
                (i for i, old in enumerate(merged_list) if old.get(merge_key) == item[merge_key]),
                None,
            )
            if isinstance(item, dict) and item.get("$patch") == "delete":
                if index is not None:
                    merged_list.pop(index)
            elif index is None:
                merged_list.append(copy.deepcopy(item))
            else:
                merged_list[index] = _merge(merged_list[index], item, strategic=True)
        return merged_list
    if isinstance(patch, dict):
        return _merge({}, patch, strategic=strategic)
    return copy.deepcopy(patch)


def _json_patch(target: dict[str, Any], ops: Any) -> dict[str, Any]:
    """RFC 6902 ``add``/``replace``/``remove``/``test`` on JSON pointers."""
    if not isinstance(ops, list):
        raise ValueError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
        if not parts:
            raise ValueError("the root cannot be patched")
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        verb = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if verb == "add":
                parent.insert(index, op["value"])
            elif verb == "replace":
                parent[index] = op["value"]
            elif verb == "remove":
                parent.pop(index)
            elif verb == "test":
                if parent[index] != op["value"]:
                    raise ValueError(f"test failed at {op['path']}")
            else:
                raise ValueError(f"unsupported JSON patch op {verb!r}")
        elif verb == "add":
            parent[last] = op["value"]
        elif verb == "replace":
            if last not in parent:
                raise ValueError(f"replace of missing path {op['path']}")
            parent[last] = op["value"]
        elif verb == "remove":
            del parent[last]
        elif verb == "test":
            if parent.get(last) != op["value"]:
                raise ValueError(f"test failed at {op['path']}")
        else:
            raise ValueError(f"unsupported JSON patch op {verb!r}")
    return doc
