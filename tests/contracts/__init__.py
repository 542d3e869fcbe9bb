"""Contracts the fake servers hold every request and response to (issue 37, part 3).

The fakes in ``tests/fakeservers`` speak the vendors' REST APIs; a fake that accepts what the
real API refuses, or answers what the real API never answers, lets a test pass for the wrong
reason. Each fake therefore declares a contract, and ``FakeServer`` checks every request it
receives and every response it sends against it:

* :mod:`contracts.discovery` - Google APIs, from the discovery documents that
  google-api-python-client ships (``googleapiclient/discovery_cache/documents/``):
  ``compute.v1.json`` for the Compute Engine fakes, ``chat.v1.json`` for the Chat fake;
* :mod:`contracts.kube_models` - the Kubernetes API, from the official ``kubernetes``
  client's API classes (path, verb, body and response types) and models
  (``openapi_types``/``attribute_map``, required fields, documented constraints).

What a contract finds is recorded on the server (``server.contract_violations``) and fails
the test that caused it (:mod:`contracts.plugin`, an autouse fixture).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fakeservers.base import Request, Response


@dataclass(frozen=True)
class Violation:
    """One way a request or response departs from its contract, with where the rule is."""

    contract: str
    #: "request" or "response".
    direction: str
    #: What was called: the discovery method id, or "VERB /path".
    method: str
    #: Where in the message: "body.faultReasons[0].behavior", "query.key", "path.zone".
    where: str
    message: str
    #: The rule's source: document, pointer into it, library and version.
    source: str

    def __str__(self) -> str:
        return (
            f"{self.contract} {self.method} {self.direction} {self.where}: {self.message} "
            f"[{self.source}]"
        )


class Contract(Protocol):
    """What a fake server declares: checks of one request and of the response to it."""

    name: str

    def check_request(self, request: Request) -> list[Violation]: ...

    def check_response(self, request: Request, response: Response) -> list[Violation]: ...


def json_body(raw: bytes) -> tuple[Any, str | None]:
    """A message body as JSON: (value, None), or (None, why it is not JSON)."""
    import json

    if not raw:
        return None, None
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return None, f"not JSON: {exc}"
