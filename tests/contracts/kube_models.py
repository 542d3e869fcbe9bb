"""Requests and responses of the Kubernetes API against the official ``kubernetes`` client.

Source: the ``kubernetes`` Python client installed with loopbreaker (35.0.0 when written),
read once per process:

* its API classes (``kubernetes/client/api/*_api.py``): every ``*_with_http_info`` method
  names the path template and verb it calls (``call_api('/api/v1/nodes/{name}', 'PATCH'``),
  its query parameters (``query_params.append(('labelSelector', ...))`` with the type its
  docstring gives, ``:param str label_selector:``), the body type (``:param V1Eviction
  body:``; ``object`` for a patch), the patch content types it offers and the
  ``response_type``;
* its models (``kubernetes/client/models``): ``attribute_map`` (the JSON field names),
  ``openapi_types`` (``str``, ``int``, ``bool``, ``float``, ``datetime``, ``object``,
  ``list[T]``, ``dict(str, T)``, another model), the fields whose setter raises for
  ``None`` under client-side validation (``V1Taint.key``, ``CoreV1Event.involved_object``,
  ``EventsV1Event.event_time`` ...), and what a field's docstring says it needs: "cannot
  be empty for new Events", "at most 128 characters" (``EventsV1Event``).

A request body is a whole object (create) or a patch of the endpoint's response type:
RFC 7386 merge and strategic-merge patches are partial objects where ``null`` deletes a key
(strategic ``$patch``/``$retainKeys``/``$setElementOrder/...`` directives are kept for the
strategic type only: kubernetes.io/docs/tasks/manage-kubernetes-objects/
update-api-object-kubectl-patch/); an RFC 6902 JSON patch is a list of operations whose
``path`` must lead through fields of the model. A response is the ``response_type``, or a
``Status`` (any status >= 400, and an eviction's 201: the apiserver answers
``metav1.Status{Status: Success}``, kubernetes pkg/registry/core/pod/storage/eviction.go).
Unknown fields are errors, in requests and responses alike. Custom resources (the
custom-objects paths, type ``object``) are not checked: the client has no model for them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts import Violation, json_body

if TYPE_CHECKING:
    from fakeservers.base import Request, Response

_BLOCK = re.compile(r"\n    def (\w+)_with_http_info\(")
_CALL = re.compile(r"call_api\(\s*'([^']+)', '(\w+)'")
_RESPONSE = re.compile(r"response_type=(?:'([^']+)'|None)")
_PARAM = re.compile(r":param (\S+) (\w+):")
_QUERY = re.compile(r"query_params\.append\(\('(\w+)', local_var_params\['(\w+)'\]\)\)")
_CONTENT = re.compile(r"select_header_content_type\(\s*(?:#[^\n]*)?\s*\[([^\]]*)\]")
_VAR = re.compile(r"\{(\w+)\}")
_VERSION_PREFIX = re.compile(r"^(?:[A-Z][a-z]+)*V\d+(?:alpha\d+|beta\d+)?(?=[A-Z])")
_NOT_EMPTY = re.compile(r"cannot be empty for new (\w+?)s\b")
_AT_MOST = re.compile(r"at most (\d+) characters")
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)$")
#: Go's strconv.ParseBool, which the apiserver's query decoding uses.
_GO_BOOLS = {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}
_PATCH_KINDS = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}
_JSON_PATCH_OPS = {"add", "remove", "replace", "move", "copy", "test"}
#: Event kinds whose reason and type must be set: issue 37 ("an Event that says why and how
#: bad"); EventsV1Event's docstrings say as much ("cannot be empty for new Events").
_EVENT_MODELS = {"CoreV1Event", "EventsV1Event"}


def client_version() -> str:
    return importlib.metadata.version("kubernetes")


@dataclass(frozen=True)
class Endpoint:
    operation: str
    verb: str
    template: str
    pattern: re.Pattern[str]
    literal_segments: int
    #: Query parameter (wire name) -> its docstring type (str, int, bool).
    query: dict[str, str]
    body: str | None
    response: str | None
    content_types: tuple[str, ...]


@functools.cache
def endpoints() -> dict[str, list[Endpoint]]:
    """Every REST call the client's API classes make, by verb."""
    import kubernetes.client.api as api

    found: dict[str, list[Endpoint]] = {}
    for path in sorted(Path(api.__file__).parent.glob("*_api.py")):
        text = path.read_text(encoding="utf-8")
        for head in _BLOCK.finditer(text):
            end = text.find("\n    def ", head.end())
            block = text[head.start() : end if end >= 0 else len(text)]
            call = _CALL.search(block)
            if call is None:
                continue
            template, verb = call.groups()
            types = {name: kind for kind, name in _PARAM.findall(block)}
            query = {wire: types.get(py, "str") for wire, py in _QUERY.findall(block)}
            response = _RESPONSE.search(block)
            content = _CONTENT.search(block)
            regex = _VAR.sub(r"[^/]+", re.escape(template).replace(r"\{", "{").replace(r"\}", "}"))
            literals = len([s for s in _VAR.sub("", template).split("/") if s])
            found.setdefault(verb, []).append(
                Endpoint(
                    _BLOCK.search(block).group(1),  # type: ignore[union-attr]
                    verb,
                    template,
                    re.compile(f"^{regex}$"),
                    literals,
                    query,
                    types.get("body"),
                    response.group(1) if response else None,
                    tuple(re.findall(r"'([^']+)'", content.group(1))) if content else (),
                )
            )
    return found


def endpoint_for(verb: str, path: str) -> Endpoint | None:
    best = None
    for endpoint in endpoints().get(verb, ()):
        if endpoint.pattern.match(path) and (
            best is None or endpoint.literal_segments > best.literal_segments
        ):
            best = endpoint
    return best


# --- models ---------------------------------------------------------------------------


def model(name: str) -> Any:
    import kubernetes.client.models as models

    return getattr(models, name, None)


@functools.cache
def required_fields(name: str) -> frozenset[str]:
    """JSON names of the fields whose setter refuses None under client-side validation."""
    from kubernetes.client import Configuration

    cls = model(name)
    config = Configuration()
    config.client_side_validation = True
    out = set()
    for attr in cls.openapi_types:
        obj = cls.__new__(cls)
        obj.local_vars_configuration = config
        try:
            setattr(obj, attr, None)
        except ValueError:
            out.add(cls.attribute_map[attr])
    return frozenset(out)


@functools.cache
def field_rules(name: str) -> dict[str, tuple[str | None, int | None]]:
    """JSON name -> (kind it "cannot be empty for" when new, "at most N characters")."""
    cls = model(name)
    out = {}
    for attr, json_name in cls.attribute_map.items():
        doc = inspect.getdoc(getattr(cls, attr).fset) or ""
        empty = _NOT_EMPTY.search(doc)
        most = _AT_MOST.search(doc)
        if empty or most:
            out[json_name] = (
                empty.group(1) if empty else None,
                int(most.group(1)) if most else None,
            )
    return out


def kind_of(model_name: str) -> str:
    return _VERSION_PREFIX.sub("", model_name)


def api_version_of(path: str) -> str | None:
    if path.startswith("/api/v1"):
        return "v1"
    match = re.match(r"^/apis/([^/]+)/([^/]+)/", path)
    return f"{match.group(1)}/{match.group(2)}" if match else None


class ModelWalker:
    """Checks a JSON value against an ``openapi_types`` type string.

    ``mode``: "full" (a whole object: required fields), "patch" (a merge patch: partial,
    null deletes) or "strategic" (a merge patch that may carry ``$`` directives).
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.found: list[tuple[str, str]] = []

    def check(self, kind: str, value: Any, where: str) -> None:
        if value is None:
            return  # a null: an absent optional field, or a deletion in a merge patch
        if kind == "object":
            return
        if kind.startswith("list["):
            if not isinstance(value, list):
                self.found.append((where, f"{type(value).__name__} where {kind} is"))
                return
            for index, item in enumerate(value):
                if item is None:
                    self.found.append((f"{where}[{index}]", f"null in {kind}"))
                self.check(kind[5:-1], item, f"{where}[{index}]")
            return
        if kind.startswith("dict("):
            if not isinstance(value, dict):
                self.found.append((where, f"{type(value).__name__} where {kind} is"))
                return
            inner = kind[len("dict(str, ") : -1]
            for key, item in value.items():
                # A null value deletes the key in a merge patch; a whole object has none.
                if item is None and self.mode == "full":
                    self.found.append((f"{where}[{key!r}]", f"null in {kind}"))
                self.check(inner, item, f"{where}[{key!r}]")
            return
        scalar = _SCALARS.get(kind)
        if scalar is not None:
            if not scalar(value):
                self.found.append((where, f"{value!r} is not {kind}"))
            return
        self._model(kind, value, where)

    def _model(self, name: str, value: Any, where: str) -> None:
        cls = model(name)
        if cls is None:
            self.found.append((where, f"no model {name} in the client"))
            return
        if not isinstance(value, dict):
            self.found.append((where, f"{type(value).__name__} where {name} is"))
            return
        # attribute_map gives the JSON names, openapi_types their types; required_fields the
        # setters that refuse None under client-side validation.
        by_json = {j: cls.openapi_types[a] for a, j in cls.attribute_map.items()}
        for key, item in value.items():
            sub = f"{where}.{key}" if where else key
            if key.startswith("$") and self.mode == "strategic":
                continue
            if key not in by_json:
                self.found.append((sub, f"unknown field {key!r} of {name}"))
                continue
            if item is None and self.mode == "full" and key in required_fields(name):
                self.found.append((sub, f"null, but {name}.{key} is required"))
            self.check(by_json[key], item, sub)
        if self.mode == "full":
            for key in sorted(required_fields(name) - set(value)):
                sub = f"{where}.{key}" if where else key
                self.found.append((sub, f"missing: {name}.{key} is required"))


_SCALARS = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "datetime": lambda v: isinstance(v, str) and bool(_RFC3339.match(v)),
    "date": lambda v: isinstance(v, str) and bool(re.match(r"^\d{4}-\d\d-\d\d$", v)),
}


def _json_pointer_type(model_name: str, pointer: str) -> tuple[str | None, str]:
    """The openapi type at an RFC 6902 path, or (None, why)."""
    kind = model_name
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if kind.startswith("list["):
            if part != "-" and not part.isdigit():
                return None, f"{part!r} is not an index of {kind}"
            kind = kind[5:-1]
        elif kind.startswith("dict("):
            kind = kind[len("dict(str, ") : -1]
        elif kind == "object":
            return "object", ""
        else:
            cls = model(kind)
            if cls is None:
                return None, f"{kind} has no fields"
            by_json = {j: cls.openapi_types[a] for a, j in cls.attribute_map.items()}
            if part not in by_json:
                return None, f"unknown field {part!r} of {kind}"
            kind = by_json[part]
    return kind, ""


class KubeContract:
    """The Kubernetes fakes' contract: the client's endpoints and models."""

    name = "kubernetes"

    def _source(self, endpoint: Endpoint | None, what: str) -> str:
        where = f"{endpoint.operation} {endpoint.verb} {endpoint.template}" if endpoint else what
        return f"kubernetes client {client_version()}: {where}"

    def _v(
        self, direction: str, request: Request, where: str, message: str, source: str
    ) -> Violation:
        return Violation(
            self.name, direction, f"{request.method} {request.path}", where, message, source
        )

    # --- requests -----------------------------------------------------------------------

    def check_request(self, request: Request) -> list[Violation]:
        endpoint = endpoint_for(request.method, request.path)
        if endpoint is None:
            return [
                self._v(
                    "request",
                    request,
                    "path",
                    "no API call of the client has this verb and path",
                    self._source(None, "kubernetes/client/api/*_api.py"),
                )
            ]
        source = self._source(endpoint, "")
        out = [
            self._v("request", request, where, message, source)
            for where, message in self._query(endpoint, request.query)
        ]
        out += [
            self._v("request", request, where, message, source)
            for where, message in self._body(endpoint, request)
        ]
        return out

    def _query(self, endpoint: Endpoint, query: dict[str, list[str]]) -> list[tuple[str, str]]:
        # The parameters the client's method appends (query_params.append) and their
        # docstring types; a bool as Go's strconv.ParseBool reads it.
        out = []
        for name, values in query.items():
            kind = endpoint.query.get(name)
            if kind is None:
                out.append((f"query.{name}", f"not a parameter of {endpoint.operation}"))
                continue
            for value in values:
                if kind == "int" and not re.fullmatch(r"-?\d+", value):
                    out.append((f"query.{name}", f"{value!r} is not an integer"))
                elif kind == "bool" and value not in _GO_BOOLS:
                    out.append((f"query.{name}", f"{value!r} is not a boolean"))
        return out

    def _body(self, endpoint: Endpoint, request: Request) -> list[tuple[str, str]]:
        value, error = json_body(request.body)
        if endpoint.body is None:
            return [("body", "a body sent to a call that takes none")] if request.body else []
        if error is not None:
            return [("body", error)]
        if endpoint.verb == "PATCH":
            return self._patch(endpoint, request, value)
        if endpoint.body == "object":
            return []  # a custom resource: no model
        walker = ModelWalker("full")
        walker.check(endpoint.body, value, "body")
        out = walker.found
        if isinstance(value, dict) and model(endpoint.body) is not None:
            out += _top_level(endpoint.body, value, request.path, subresource=_is_sub(endpoint))
            if endpoint.verb == "POST":
                out += _new_object_rules(endpoint.body, value)
        return out

    def _patch(self, endpoint: Endpoint, request: Request, value: Any) -> list[tuple[str, str]]:
        content = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if endpoint.content_types and content not in endpoint.content_types:
            return [("header.content-type", f"{content!r} is not one of {endpoint.content_types}")]
        target = endpoint.response
        kind = _PATCH_KINDS.get(content)
        if target is None or target == "object" or kind is None:
            return []
        if kind == "json":
            return _json_patch(target, value)
        if not isinstance(value, dict):
            return [("body", "a merge patch that is not an object")]
        walker = ModelWalker("strategic" if kind == "strategic" else "patch")
        walker.check(target, value, "body")
        return walker.found

    # --- responses ----------------------------------------------------------------------

    def check_response(self, request: Request, response: Response) -> list[Violation]:
        endpoint = endpoint_for(request.method, request.path)
        value, error = json_body(response.body)
        source = self._source(endpoint, "")
        if error is not None:
            return [self._v("response", request, "body", error, source)]
        is_status = isinstance(value, dict) and value.get("kind") == "Status"
        if response.status >= 400 or is_status:
            expected = "V1Status"
        elif endpoint is None or endpoint.response in (None, "object"):
            return []
        else:
            expected = endpoint.response
        if response.status >= 400 and not is_status:
            return [self._v("response", request, "body", "an error that is not a Status", source)]
        walker = ModelWalker("full")
        walker.check(expected, value, "body")
        found = walker.found
        if isinstance(value, dict):
            found += _top_level(expected, value, request.path, subresource=expected == "V1Status")
        return [self._v("response", request, w, m, f"{source} -> {expected}") for w, m in found]


def _is_sub(endpoint: Endpoint) -> bool:
    """A subresource call (``.../pods/{name}/eviction``): its body has its own group."""
    return bool(re.search(r"\{name\}/[a-z]+$", endpoint.template))


def _top_level(
    name: str, value: dict[str, Any], path: str, *, subresource: bool
) -> list[tuple[str, str]]:
    # The model's kind (V1NodeList: NodeList) and the group/version of the path
    # (/apis/events.k8s.io/v1/...: events.k8s.io/v1); a Status is always v1.
    out = []
    kind = kind_of(name)
    if "kind" in value and value["kind"] != kind:
        out.append(("body.kind", f"{value['kind']!r}, not {kind!r}"))
    expected = "v1" if name == "V1Status" else api_version_of(path)
    if not subresource and expected and "apiVersion" in value and value["apiVersion"] != expected:
        out.append(("body.apiVersion", f"{value['apiVersion']!r}, not {expected!r}"))
    return out


def _new_object_rules(name: str, value: dict[str, Any]) -> list[tuple[str, str]]:
    # The setters' docstrings: "cannot be empty for new Events", "at most 128 characters".
    out = []
    kind = kind_of(name)
    for field, (empty_for, most) in field_rules(name).items():
        item = value.get(field)
        if empty_for == kind and not item:
            out.append((f"body.{field}", f"empty: it 'cannot be empty for new {kind}s'"))
        if most is not None and isinstance(item, str) and len(item) > most:
            out.append((f"body.{field}", f"{len(item)} characters: 'at most {most} characters'"))
    if name in _EVENT_MODELS:
        for field in ("reason", "type"):
            if not value.get(field):
                out.append((f"body.{field}", f"an Event without {field} (issue 37)"))
    return out


def _json_patch(target: str, ops: Any) -> list[tuple[str, str]]:
    # RFC 6902 section 4: an array of operations with "op" and "path" (and "value"/"from").
    if not isinstance(ops, list):
        return [("body", "a JSON patch that is not an array")]
    out = []
    for index, op in enumerate(ops):
        where = f"body[{index}]"
        if not isinstance(op, dict) or op.get("op") not in _JSON_PATCH_OPS:
            out.append((where, f"not an RFC 6902 operation: {op!r}"))
            continue
        kind, why = _json_pointer_type(target, str(op.get("path", "")))
        if kind is None:
            out.append((f"{where}.path", why))
        elif "value" in op and op["op"] in ("add", "replace", "test"):
            walker = ModelWalker("full")
            walker.check(kind, op["value"], f"{where}.value")
            out += walker.found
    return out
