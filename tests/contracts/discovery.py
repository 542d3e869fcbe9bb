"""Requests and responses of Google REST APIs against their discovery documents.

Source: the discovery documents google-api-python-client ships in
``googleapiclient/discovery_cache/documents/`` (2.202.0: ``compute.v1.json`` revision
20261106, ``chat.v1.json`` revision 20261107), loaded once per process. A request is matched
to the document's method by HTTP method and ``"/" + servicePath + flatPath`` (``path`` when a
method has no ``flatPath``), the most specific template winning; then:

* path parameters: the ``pattern`` of the parameter, on the value the ``path`` template
  captures (``{+name}`` spans slashes: RFC 6570 reserved expansion);
* query parameters: declared by the method (``location: query``) or by the document's own
  ``parameters`` (the standard ones: ``alt``, ``fields``, ``key``, ``prettyPrint``,
  ``quotaUser``, ``$.xgafv`` ...), with their ``type``, ``enum``, ``pattern`` and
  ``repeated``; a ``$`` before a standard parameter's name is its alias, as
  google-cloud-compute's REST transport sends ``$alt=json;enum-encoding=int``
  ("System Parameters", cloud.google.com/apis/docs/system-parameters); the values of a
  ``google-fieldmask`` parameter (``updateMask``) must name fields of the request schema;
  ``required`` query parameters must be there;
* the body: against ``request.$ref`` (:class:`contracts.schemas.SchemaWalker`); no
  body where the method takes none;
* the response: ``response.$ref`` for a 2xx (an empty body where the method has no
  response); for a status >= 400, Google's JSON error format, loosely: ``error.code`` (the
  HTTP status), ``error.message``, ``error.status`` (a ``google.rpc.Code`` name)
  ("Errors", cloud.google.com/apis/design/errors#http_mapping).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from contracts import Violation, json_body
from contracts.schemas import Found, SchemaWalker, description_flags, uuid_problem

if TYPE_CHECKING:
    from fakeservers.base import Request, Response

#: google.rpc.Code names (googleapis/google/rpc/code.proto), as ``error.status``.
RPC_CODES = frozenset(
    {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    }
)
_ERROR_KEYS = frozenset({"code", "message", "status", "details", "errors"})
_TEMPLATE_VAR = re.compile(r"\{(\+?)([^}]+)\}")
_BOOL = {"true", "false"}


def client_version() -> str:
    return importlib.metadata.version("google-api-python-client")


@functools.cache
def document(name: str) -> dict[str, Any]:
    """A discovery document shipped with google-api-python-client, e.g. ``compute.v1``."""
    import googleapiclient

    path = Path(googleapiclient.__file__).parent / "discovery_cache" / "documents"
    with (path / f"{name}.json").open(encoding="utf-8") as handle:
        return json.load(handle)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Method:
    id: str
    http_method: str
    pointer: str
    spec: dict[str, Any]
    #: Matches the request path (flatPath, one segment per variable).
    flat: re.Pattern[str]
    #: Captures the parameters of ``path`` (``{+x}`` spanning slashes).
    full: re.Pattern[str]
    literal_segments: int


def _template(template: str) -> tuple[re.Pattern[str], int]:
    parts: list[str] = []
    last = 0
    for match in _TEMPLATE_VAR.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        name = re.sub(r"\W", "_", match.group(2))
        parts.append(f"(?P<{name}>.+)" if match.group(1) else f"(?P<{name}>[^/]+)")
        last = match.end()
    parts.append(re.escape(template[last:]))
    literals = len([s for s in _TEMPLATE_VAR.sub("", template).split("/") if s])
    return re.compile("^" + "".join(parts) + "$"), literals


@functools.cache
def methods(name: str) -> dict[str, list[Method]]:
    """Every method of a document, by HTTP method."""
    doc = document(name)
    root = "/" + doc.get("servicePath", "")
    found: dict[str, list[Method]] = {}

    def walk(resources: dict[str, Any], pointer: str) -> None:
        for rname, resource in resources.items():
            here = f"{pointer}/{rname}"
            for mname, spec in (resource.get("methods") or {}).items():
                flat, literals = _template(root + spec.get("flatPath", spec["path"]))
                full, _ = _template(root + spec["path"])
                method = Method(
                    spec["id"],
                    spec["httpMethod"],
                    f"{here}/methods/{mname}",
                    spec,
                    flat,
                    full,
                    literals,
                )
                found.setdefault(spec["httpMethod"], []).append(method)
            walk(resource.get("resources") or {}, f"{here}/resources")

    walk(doc.get("resources") or {}, "resources")
    return found


@dataclass
class DiscoveryContract:
    """A fake's contract: one Google API's discovery document (``compute.v1``, ``chat.v1``)."""

    name: str
    #: Query parameters the document does not declare but the API documents elsewhere,
    #: each with its source (e.g. Chat's incoming-webhook ``token``).
    extra_query: dict[str, str] = field(default_factory=dict)

    # --- lookup -------------------------------------------------------------------------

    def method_for(self, http_method: str, path: str) -> tuple[Method, dict[str, str]] | None:
        best: tuple[Method, dict[str, str]] | None = None
        for method in methods(self.name).get(http_method, ()):
            if not method.flat.match(path):
                continue
            if best is None or method.literal_segments > best[0].literal_segments:
                full = method.full.match(path)
                best = (method, full.groupdict() if full else {})
        return best

    def _source(self, pointer: str) -> str:
        revision = document(self.name).get("revision", "?")
        return (
            f"{self.name}.json#/{pointer} (revision {revision}, google-api-python-client "
            f"{client_version()})"
        )

    def _violation(self, direction: str, method: str, found: Found) -> Violation:
        return Violation(
            self.name, direction, method, found.where, found.message, self._source(found.pointer)
        )

    # --- requests -----------------------------------------------------------------------

    def check_request(self, request: Request) -> list[Violation]:
        matched = self.method_for(request.method, request.path)
        if matched is None:
            return [
                Violation(
                    self.name,
                    "request",
                    f"{request.method} {request.path}",
                    "path",
                    "no method of the discovery document has this HTTP method and path",
                    self._source("resources"),
                )
            ]
        method, path_values = matched
        found: list[Found] = []
        found += self._path_params(method, path_values)
        found += self._query_params(method, request.query)
        found += self._request_body(method, request.body, _int_enums(request))
        return [self._violation("request", method.id, f) for f in found]

    def _path_params(self, method: Method, values: dict[str, str]) -> list[Found]:
        out = []
        params = method.spec.get("parameters") or {}
        for name, raw in values.items():
            spec = params.get(name) or {}
            pattern = spec.get("pattern")
            value = unquote(raw)
            if pattern and not re.fullmatch(pattern, value):
                out.append(
                    Found(
                        f"path.{name}",
                        f"{value!r} does not match the pattern {pattern!r}",
                        f"{method.pointer}/parameters/{name}/pattern",
                    )
                )
        return out

    def _query_params(self, method: Method, query: dict[str, list[str]]) -> list[Found]:
        out: list[Found] = []
        declared = method.spec.get("parameters") or {}
        standard = document(self.name).get("parameters") or {}
        for name, values in query.items():
            spec, pointer = _query_spec(name, declared, standard, method.pointer)
            if spec is None:
                if name not in self.extra_query:
                    out.append(
                        Found(
                            f"query.{name}",
                            "not a parameter of this method nor a standard parameter",
                            f"{method.pointer}/parameters",
                        )
                    )
                continue
            if len(values) > 1 and not spec.get("repeated"):
                out.append(Found(f"query.{name}", f"repeated {values}", pointer))
            for value in values:
                out += _query_value(spec, value, f"query.{name}", pointer)
                if spec.get("format") == "google-fieldmask":
                    out += self._field_mask(method, value, f"query.{name}", pointer)
        for name, spec in declared.items():
            # "required": true, or a description that says so ("Required. The field paths
            # to update.": chat.v1.json spaces.messages.patch updateMask).
            required = (
                spec.get("required") or description_flags(spec.get("description", "")).required
            )
            if spec.get("location") == "query" and required and name not in query:
                out.append(
                    Found(
                        f"query.{name}",
                        "missing required parameter",
                        f"{method.pointer}/parameters/{name}",
                    )
                )
        return out

    def _field_mask(self, method: Method, value: str, where: str, pointer: str) -> list[Found]:
        ref = (method.spec.get("request") or {}).get("$ref")
        if ref is None or value.strip() == "*":
            return []
        schemas = document(self.name)["schemas"]
        out = []
        for path in filter(None, (p.strip() for p in value.split(","))):
            schema: dict[str, Any] | None = schemas[ref]
            for part in path.split("."):
                props = (schema or {}).get("properties") or {}
                key = part if part in props else _camel(part)
                prop = props.get(key)
                if prop is None:
                    out.append(
                        Found(where, f"field mask path {path!r} names no field of {ref}", pointer)
                    )
                    break
                while "$ref" in prop:
                    prop = schemas[prop["$ref"]]
                schema = prop.get("items", prop) if prop.get("type") == "array" else prop
                if "$ref" in (schema or {}):
                    schema = schemas[schema["$ref"]]  # type: ignore[index]
        return out

    def _request_body(self, method: Method, raw: bytes, int_enums: bool) -> list[Found]:
        ref = method.spec.get("request")
        value, error = json_body(raw)
        if ref is None:
            if raw.strip() not in (b"", b"{}"):
                return [Found("body", "a body sent to a method that takes none", method.pointer)]
            return []
        if error is not None:
            return [Found("body", error, f"{method.pointer}/request")]
        walker = SchemaWalker(document(self.name)["schemas"], "request", int_enums=int_enums)
        walker.check(ref, {} if value is None else value, "body", f"{method.pointer}/request")
        return walker.found

    # --- responses ----------------------------------------------------------------------

    def check_response(self, request: Request, response: Response) -> list[Violation]:
        matched = self.method_for(request.method, request.path)
        method_id = matched[0].id if matched else f"{request.method} {request.path}"
        value, error = json_body(response.body)
        if response.status >= 400:
            found = _error_body(value, error, response.status)
            return [
                Violation(
                    self.name,
                    "response",
                    method_id,
                    f.where,
                    f.message,
                    "Google JSON error format, cloud.google.com/apis/design/errors",
                )
                for f in found
            ]
        if matched is None:
            return []  # the request is already reported
        method = matched[0]
        ref = method.spec.get("response")
        if ref is None:
            if response.body.strip() not in (b"", b"{}"):
                found = [
                    Found("body", "a body answered by a method with no response", method.pointer)
                ]
            else:
                found = []
        elif error is not None or value is None:
            found = [Found("body", error or "empty", f"{method.pointer}/response")]
        else:
            walker = SchemaWalker(
                document(self.name)["schemas"], "response", int_enums=_int_enums(request)
            )
            walker.check(ref, value, "body", f"{method.pointer}/response")
            found = walker.found
        return [self._violation("response", method.id, f) for f in found]


def _int_enums(request: Request) -> bool:
    alts = request.query.get("$alt", []) + request.query.get("alt", [])
    return any("enum-encoding=int" in alt for alt in alts)


def _query_spec(
    name: str, declared: dict[str, Any], standard: dict[str, Any], pointer: str
) -> tuple[dict[str, Any] | None, str]:
    spec = declared.get(name)
    if spec is not None and spec.get("location") == "query":
        return spec, f"{pointer}/parameters/{name}"
    if name in standard:
        return standard[name], f"parameters/{name}"
    if name.startswith("$") and name[1:] in standard:
        # "$alt" is how a system parameter may be named in a URL (System Parameters).
        return standard[name[1:]], f"parameters/{name[1:]}"
    return None, pointer


def _query_value(spec: dict[str, Any], value: str, where: str, pointer: str) -> list[Found]:
    kind = spec.get("type", "string")
    if kind == "boolean" and value.lower() not in _BOOL:
        return [Found(where, f"{value!r} is not a boolean", pointer)]
    if kind == "integer" and not re.fullmatch(r"-?\d+", value):
        return [Found(where, f"{value!r} is not an integer", pointer)]
    # A system parameter may carry options after ';' ($alt=json;enum-encoding=int).
    head = value.split(";", 1)[0] if where.startswith("query.$") else value
    enum = spec.get("enum")
    if enum and head not in enum:
        return [Found(where, f"{value!r} is not one of {enum}", f"{pointer}/enum")]
    pattern = spec.get("pattern")
    if pattern and not re.fullmatch(pattern, value):
        return [Found(where, f"{value!r} does not match {pattern!r}", f"{pointer}/pattern")]
    problem = uuid_problem(description_flags(spec.get("description", "")), value)
    if problem is not None:
        return [Found(where, problem, f"{pointer}/description")]
    return []


def _error_body(value: Any, error: str | None, status: int) -> list[Found]:
    if error is not None:
        return [Found("body", error, "")]
    inner = value.get("error") if isinstance(value, dict) else None
    if not isinstance(inner, dict):
        return [Found("body", "an error answer without an 'error' object", "")]
    out = []
    if inner.get("code") != status:
        out.append(
            Found("body.error.code", f"{inner.get('code')!r}, not the HTTP status {status}", "")
        )
    if not isinstance(inner.get("message"), str):
        out.append(Found("body.error.message", "missing or not a string", ""))
    if "status" in inner and inner["status"] not in RPC_CODES:
        out.append(Found("body.error.status", f"{inner['status']!r} is not a google.rpc.Code", ""))
    out += [
        Found(f"body.error.{k}", "not a field of Google's error", "")
        for k in inner
        if k not in _ERROR_KEYS
    ]
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


#: Compute Engine v1 (the instances.get, delete, reportHostAsFaulty and zoneOperations fakes).
def compute_v1() -> DiscoveryContract:
    return DiscoveryContract("compute.v1")


#: Cloud Logging v2 (``entries.list``), GKE v1 (``projects.locations.clusters.get``), Cloud
#: Support v2 (cases, caseClassifications.search): the other Google fakes.
def logging_v2() -> DiscoveryContract:
    return DiscoveryContract("logging.v2")


def container_v1() -> DiscoveryContract:
    return DiscoveryContract("container.v1")


def cloudsupport_v2() -> DiscoveryContract:
    return DiscoveryContract("cloudsupport.v2")


#: Google Chat v1. An incoming webhook's URL carries ``key`` (a standard parameter) and
#: ``token``, which the discovery document does not declare: "Build a Google Chat app as a
#: webhook", developers.google.com/workspace/chat/quickstart/webhooks (the URL Chat gives,
#: ``.../v1/spaces/SPACE/messages?key=KEY&token=TOKEN``).
def chat_v1() -> DiscoveryContract:
    return DiscoveryContract(
        "chat.v1",
        extra_query={"token": "developers.google.com/workspace/chat/quickstart/webhooks"},
    )
