"""A fake of the Cloud Support API v2: create/get/list cases, search case classifications.

Routes, as ``google-cloud-support``'s ``support_v2`` REST transport sends them:

* ``POST /v2/{parent=projects/*|organizations/*}/cases`` (body: the Case)
* ``GET  /v2/{parent}/cases`` and ``GET /v2/{parent}/cases/{n}``
* ``GET  /v2/caseClassifications:search?query=display_name:"*Compute Engine*"``

The transport asks for ``$alt=json;enum-encoding=int``: enums (``state``, ``priority``) go
out as numbers then, and as names otherwise, like the real service. A case needs a
``displayName`` and the ``classification.id`` of a known classification (400 otherwise).
"""

from __future__ import annotations

import copy
import fnmatch
import itertools
import re
import threading
from typing import Any

from contracts.discovery import cloudsupport_v2

from .base import Request, Response
from .google import GoogleApiServer

#: Made-up ids in the opaque shape of real ones (real ids come from the live search).
DEFAULT_CLASSIFICATIONS = [
    {
        "id": "100FAKE0CE0INSTANCE0000000000000000000000",
        "displayName": "Compute \u003e Compute Engine \u003e Instance",
    },
    {
        "id": "100FAKE0CE0HARDWARE0000000000000000000000",
        "displayName": "Compute \u003e Compute Engine \u003e Hardware",
    },
    {
        "id": "100FAKE0GKE0NODE000000000000000000000000",
        "displayName": "Kubernetes \u003e Google Kubernetes Engine \u003e Node",
    },
]
_STATES = [
    "STATE_UNSPECIFIED",
    "NEW",
    "IN_PROGRESS_GOOGLE_SUPPORT",
    "ACTION_REQUIRED",
    "SOLUTION_PROVIDED",
    "CLOSED",
]
_PRIORITIES = ["PRIORITY_UNSPECIFIED", "P0", "P1", "P2", "P3", "P4"]
_QUERY = re.compile(r'^\s*(display_name|id)\s*:\s*"([^"]*)"\s*$')


class SupportServer(GoogleApiServer):
    """Cases under ``projects/P`` or ``organizations/O``; ``cases`` holds them by name."""

    contract = cloudsupport_v2()

    _CASES = re.compile(r"^/v2/((?:projects|organizations)/[^/]+)/cases$")
    _CASE = re.compile(r"^/v2/((?:projects|organizations)/[^/]+/cases/[^/]+)$")

    def __init__(self, classifications: list[dict[str, str]] | None = None) -> None:
        super().__init__()
        self.classifications = copy.deepcopy(
            DEFAULT_CLASSIFICATIONS if classifications is None else classifications
        )
        #: name -> stored case (enums as names).
        self.cases: dict[str, dict[str, Any]] = {}
        #: The request bodies of create calls, as sent.
        self.created: list[dict[str, Any]] = []
        self.create_time = "2026-05-20T15:15:00Z"
        self._numbers = itertools.count(50_000_001)
        self._state = threading.RLock()

    def route(self, request: Request) -> Response:
        with self._state:
            return self._route(request)

    def _route(self, request: Request) -> Response:
        method, path = request.method, request.path
        if path == "/v2/caseClassifications:search" and method == "GET":
            return self._search(request)
        if match := self._CASES.match(path):
            if method == "POST":
                return self._create(match.group(1), request)
            if method == "GET":
                parent = match.group(1) + "/"
                cases = [c for name, c in self.cases.items() if name.startswith(parent)]
                return Response.json({"cases": [self._out(c, request) for c in cases]})
        if (match := self._CASE.match(path)) and method == "GET":
            case = self.cases.get(match.group(1))
            if case is None:
                return self.error(404, f"Case {match.group(1)} not found")
            return Response.json(self._out(case, request))
        return self.error(404, f"no route {method} {path}")

    def _create(self, parent: str, request: Request) -> Response:
        try:
            body = request.json()
        except ValueError:
            return self.error(400, "Invalid JSON payload received.")
        if not isinstance(body, dict):
            return self.error(400, "Invalid JSON payload received.")
        if not body.get("displayName"):
            return self.error(400, "Case display_name is required.")
        classification = (body.get("classification") or {}).get("id")
        known = {c["id"]: c for c in self.classifications}
        if classification not in known:
            return self.error(400, f"Invalid case classification id: {classification!r}")
        self.created.append(copy.deepcopy(body))
        name = f"{parent}/cases/{next(self._numbers)}"
        case = copy.deepcopy(body)
        case.update(
            name=name,
            state="NEW",
            createTime=self.create_time,
            updateTime=self.create_time,
            classification=dict(known[classification]),
            priority=_enum_name(body.get("priority", 0), _PRIORITIES),
            escalated=False,
        )
        case.setdefault("timeZone", "UTC")
        case.setdefault("languageCode", "en-US")
        self.cases[name] = case
        return Response.json(self._out(case, request))

    def _search(self, request: Request) -> Response:
        query = request.param("query", "") or ""
        found = self.classifications
        if query.strip():
            match = _QUERY.match(query)
            if match is None:
                return self.error(400, f"Invalid query: {query}")
            field = "displayName" if match.group(1) == "display_name" else "id"
            pattern = match.group(2)
            found = [c for c in found if fnmatch.fnmatchcase(c[field], pattern)]
        return Response.json({"caseClassifications": copy.deepcopy(found)})

    def _out(self, case: dict[str, Any], request: Request) -> dict[str, Any]:
        out = copy.deepcopy(case)
        if "enum-encoding=int" in (request.param("$alt") or ""):
            out["state"] = _STATES.index(case["state"])
            out["priority"] = _PRIORITIES.index(case["priority"])
        return out


def _enum_name(value: int | str, names: list[str]) -> str:
    if isinstance(value, int):
        return names[value] if 0 <= value < len(names) else names[0]
    return value if value in names else names[0]
