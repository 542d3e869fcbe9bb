"""The hostile-input lab: hypothesis profiles, hostile JSON, the function servers."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakeservers.certs import CertsServer
from harness.functions import FunctionServer
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from strategies import json_values

from loopbreaker.app.chat_actions import REFUSAL_HEADER
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
PUBSUB = "google.cloud.pubsub.topic.v1.messagePublished"
PROJECT = "hostile-project"
WEBHOOK_TOKEN = "hostile-webhook-token-0123"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MIB = 1 << 20

# --- profiles -----------------------------------------------------------------------------

_COMMON: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
}
PROFILES = {
    # make test: the same examples every run, few enough to stay within seconds.
    "ci": settings(
        derandomize=True,
        max_examples=10,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        **_COMMON,
    ),
    # make bench, or LOOPBREAKER_HYPOTHESIS_PROFILE=long: fresh examples, many more.
    "long": settings(max_examples=300, **_COMMON),
}
PROFILE_NAME = os.environ.get("LOOPBREAKER_HYPOTHESIS_PROFILE", "ci")
if PROFILE_NAME not in PROFILES:
    raise ValueError(
        f"LOOPBREAKER_HYPOTHESIS_PROFILE={PROFILE_NAME!r}: choose one of {sorted(PROFILES)}"
    )
PROFILE = PROFILES[PROFILE_NAME]

# --- rendering hostile JSON ---------------------------------------------------------------

# Values json.dumps cannot write are planted as marker strings and put in afterwards.
_MARKER = re.compile(r'"@@(DEEP|DIGITS|RAW):([^@]*)@@"')
LONE_SURROGATES = ("\ud800", "\udbff", "\udc00", "\udfff")


def deep(levels: int) -> str:
    return f"@@DEEP:{levels}@@"


def digits(count: int) -> str:
    return f"@@DIGITS:{count}@@"


def raw(text: str) -> str:
    return f"@@RAW:{text}@@"


def render(value: object) -> bytes:
    """JSON text of ``value``: lone surrogates as ``\\udXXX`` escapes (ensure_ascii, as a
    hostile producer writes them), markers replaced by what json.dumps refuses to write."""

    def expand(match: re.Match[str]) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind == "DEEP":
            return "[" * int(arg) + "]" * int(arg)
        if kind == "DIGITS":
            return "7" * int(arg)
        return arg

    return _MARKER.sub(expand, json.dumps(value)).encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def set_path(document: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    """A copy of ``document`` with ``value`` at ``path`` (intermediate objects made)."""
    out = json.loads(json.dumps(document))
    here = out
    for key in path[:-1]:
        if not isinstance(here.get(key), dict):
            here[key] = {}
        here = here[key]
    here[path[-1]] = value
    return out


# --- strategies ---------------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = json_values(scalars=_SCALARS, keys=st.text(max_size=6), max_leaves=8)


def _with_surrogate(parts: tuple[str, str, str]) -> str:
    return parts[0] + parts[1] + parts[2]


HOSTILE = st.one_of(
    JSON_VALUES,
    st.integers(65, 3000).map(deep),
    st.integers(4301, 6000).map(digits),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]).map(raw),
    st.tuples(st.text(max_size=3), st.sampled_from(LONE_SURROGATES), st.text(max_size=3)).map(
        _with_surrogate
    ),
    st.tuples(st.text(max_size=3), st.just("\x00"), st.text(max_size=3)).map(_with_surrogate),
    st.just("x" * MIB),
)


# --- the servers --------------------------------------------------------------------------


@dataclass
class Server:
    function: FunctionServer
    store: Path
    _seen: int = 0

    @property
    def url(self) -> str:
        return self.function.url

    def new_log(self) -> str:
        """What the server printed since the last call."""
        text = self.function.log()
        fresh, self._seen = text[self._seen :], len(text)
        return fresh

    def post(self, body: bytes, headers: dict[str, str], path: str = "/") -> tuple[int, bytes]:
        """POST; a 5xx must be a transient failure whose retry succeeds."""
        status, reply, _ = self.post_full(body, headers, path)
        return status, reply

    def post_full(
        self, body: bytes, headers: dict[str, str], path: str = "/"
    ) -> tuple[int, bytes, dict[str, str]]:
        for _ in range(5):
            status, reply, answer = _post(self.url + path, body, headers)
            if status < 500:
                return status, reply, answer
        raise AssertionError(f"5xx on every retry: {status} {reply[:300]!r}")

    def click(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """on_chat_action's security status: the reply's, or for a refusal of a verified
        click (answered 200 so the clicker reads it) the one its refusal header names."""
        status, reply, answer = self.post_full(body, headers)
        refusal = answer.get(REFUSAL_HEADER)
        return (int(refusal), reply) if status == 200 and refusal else (status, reply)

    def incidents(self) -> list[Incident]:
        store = SqliteStore(self.store)
        try:
            return store.list_incidents(limit=10_000)
        finally:
            store.close()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with DIRECT.open(request, timeout=60) as response:
            return int(response.status), response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read(), dict(exc.headers)
    except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as exc:
        # No answer at all: as bad as a 5xx (the caller retries, then fails naming it).
        return 599, repr(exc).encode(), {}


@dataclass
class Lab:
    log_entry: Server
    webhook: Server
    chat: Server
    remediation: Server
    certs: CertsServer
    #: The faulty-host incident awaiting approval in the chat and remediation stores.
    awaiting: Incident


def assert_no_traceback(*servers: Server) -> None:
    for server in servers:
        log = server.new_log()
        assert "Traceback" not in log, log[-4000:]
        assert "Exception on /" not in log, log[-4000:]


def log_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]
