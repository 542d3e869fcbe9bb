"""A tiny threaded HTTP server on 127.0.0.1 with recorded requests and injectable faults.

Subclasses implement ``route(request) -> Response`` for one REST API and
``error(status, message) -> Response`` for that API's error body. Faults are queued with
``inject(Fault.FORBIDDEN, times=1, path="/v2/")`` and consumed by the next matching requests.

A subclass may declare the vendor's ``contract`` (:mod:`contracts`): every request it receives
and every response it sends is checked against it, and what departs from it is kept in
``contract_violations``. :func:`take_violations` hands them to the test run
(``contracts.plugin`` fails the test that caused them); an injected MALFORMED answer is exempt.
"""

from __future__ import annotations

import abc
import contextlib
import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, ClassVar, Self
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from contracts import Contract, Violation

LOCALHOST = "127.0.0.1"


class Fault(StrEnum):
    UNAUTHORIZED = "401"
    FORBIDDEN = "403"
    NOT_FOUND = "404"
    TOO_MANY_REQUESTS = "429"
    SERVER_ERROR = "500"
    UNAVAILABLE = "503"
    #: Answer only after ``slow_seconds``, beyond the clients' short test timeouts.
    TIMEOUT = "timeout"
    #: 200 with a body that is not JSON.
    MALFORMED = "malformed"
    #: Close the connection without any response.
    RESET = "reset"


_FAULT_STATUS = {
    Fault.UNAUTHORIZED: 401,
    Fault.FORBIDDEN: 403,
    Fault.NOT_FOUND: 404,
    Fault.TOO_MANY_REQUESTS: 429,
    Fault.SERVER_ERROR: 500,
    Fault.UNAVAILABLE: 503,
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, value: Any, status: int = 200, **headers: str) -> Response:
        return cls(status, json.dumps(value).encode(), "application/json", dict(headers))


@dataclass
class _Injected:
    fault: Fault
    remaining: int
    path: str | None
    skip: int = 0


class FakeServer(abc.ABC):
    """Base class: start with ``with Server() as s:``; ``s.url`` is the base URL."""

    #: How long a TIMEOUT fault stalls; tests use client timeouts well below it.
    slow_seconds = 1.5
    #: The API's machine-readable contract (tests/contracts); None: nothing is checked.
    contract: ClassVar[Contract | None] = None

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[Request] = []
        #: Every departure from ``contract``, requests and responses, in arrival order.
        self.contract_violations: list[Violation] = []
        self._taken = 0
        self._faults: list[_Injected] = []
        self._lock = threading.Lock()
        self._tls = tls
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- to override -----------------------------------------------------------------

    @abc.abstractmethod
    def route(self, request: Request) -> Response:
        """The REST API this server speaks: one response per request."""

    def error(self, status: int, message: str) -> Response:
        return Response.json({"error": {"code": status, "message": message}}, status)

    # --- faults ----------------------------------------------------------------------

    def inject(
        self, fault: Fault, *, times: int = 1, path: str | None = None, after: int = 0
    ) -> None:
        """Fail ``times`` requests whose path contains ``path``, after ``after`` good ones."""
        with self._lock:
            self._faults.append(_Injected(fault, times, path, after))

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for injected in self._faults:
                if injected.remaining > 0 and (injected.path is None or injected.path in path):
                    if injected.skip > 0:
                        injected.skip -= 1
                        return None
                    injected.remaining -= 1
                    return injected.fault
        return None

    def requests_to(self, path_part: str) -> list[Request]:
        return [r for r in self.requests if path_part in r.path]

    # --- contract ---------------------------------------------------------------------

    def take_violations(self) -> list[Violation]:
        """The violations not taken yet: a test that sends a bad request on purpose takes
        (and asserts) them, so that the run does not fail on them."""
        with self._lock:
            taken = self.contract_violations[self._taken :]
            self._taken = len(self.contract_violations)
        return taken

    def _check(self, what: str, check: Any, *args: Any) -> None:
        try:
            found = list(check(*args))
        except Exception as exc:  # a crash of the checker must fail the test, not hide
            from contracts import Violation

            name = self.contract.name if self.contract else "?"
            found = [Violation(name, what, "?", "?", f"the check crashed: {exc!r}", __file__)]
        if found:
            with self._lock:
                self.contract_violations.extend(found)

    # --- lifecycle -------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{LOCALHOST}:{self.port}"

    def start(self) -> Self:
        handler = _handler_for(self)
        self._httpd = ThreadingHTTPServer((LOCALHOST, 0), handler)
        self._httpd.daemon_threads = True
        if self._tls is not None:
            self._httpd.socket = self._tls.wrap_socket(self._httpd.socket, server_side=True)
        # A short poll interval keeps shutdown() (and so every teardown) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=type(self).__name__,
            daemon=True,
        )
        self._thread.start()
        with _STARTED_LOCK:
            _STARTED.append(self)
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- dispatch (called from handler threads) ---------------------------------------

    def _dispatch(self, request: Request) -> Response | None:
        with self._lock:
            self.requests.append(request)
        if self.contract is not None:
            self._check("request", self.contract.check_request, request)
        fault = self._take_fault(request.path)
        response = self._respond(request, fault)
        if self.contract is not None and response is not None and fault is not Fault.MALFORMED:
            self._check("response", self.contract.check_response, request, response)
        return response

    def _respond(self, request: Request, fault: Fault | None) -> Response | None:
        if fault is None:
            try:
                return self.route(request)
            except KeyError as exc:
                return self.error(404, f"not found: {exc}")
        if fault is Fault.TIMEOUT:
            time.sleep(self.slow_seconds)
            return self.route(request)
        if fault is Fault.MALFORMED:
            return Response(200, b'{"this is": not json', "application/json")
        if fault is Fault.RESET:
            return None
        status = _FAULT_STATUS[fault]
        response = self.error(status, f"injected fault {fault.value}")
        if status == 429:
            response.headers.setdefault("Retry-After", "0")
        return response


_STARTED: list[FakeServer] = []
_STARTED_LOCK = threading.Lock()


def take_violations() -> list[tuple[FakeServer, Violation]]:
    """Violations not taken yet from every server started in this process; servers that
    have stopped are forgotten once taken."""
    with _STARTED_LOCK:
        servers = list(_STARTED)
        _STARTED[:] = [s for s in servers if s._httpd is not None]
    return [(server, v) for server in servers for v in server.take_violations()]


def _handler_for(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus the
        # client's delayed ACK adds ~40 ms to every request.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass  # keep pytest output clean

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = Request(
                method=self.command,
                path=parts.path,
                query=parse_qs(parts.query, keep_blank_values=True),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            if request.method == "POST" and request.headers.get("content-type", "").startswith(
                "application/x-www-form-urlencoded"
            ):
                for key, values in parse_qs(body.decode(), keep_blank_values=True).items():
                    request.query.setdefault(key, []).extend(values)
            response = server._dispatch(request)
            if response is None:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(2)
                return
            # Errors happen when a client gave up (timeout faults): nothing left to tell it.
            with contextlib.suppress(OSError):
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(response.body)

        do_GET = _serve
        do_POST = _serve
        do_PATCH = _serve
        do_DELETE = _serve

    return Handler
