"""The signed action request a button carries, at its edges: the length limit, the
expiry instant, the exact bytes that are signed, and what each refusal says.

A token is ``lb1.<base64url(canonical JSON)>.<base64url(HMAC-SHA256(key, "lb1." +
payload))>`` (approval/requests.py). The forgeries below are signed with the real key
where the point is that a *signed* payload is still checked (a leaked key, a bug that
signed a bad value): the signature is computed here from that documented scheme.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopbreaker.approval.requests import (
    MAX_TOKEN_LENGTH,
    ActionRequest,
    canonical_json,
    sign_token,
    verify_token,
)
from loopbreaker.errors import ApprovalInvalid

KEY = b"unit-test-signing-key-0123456789"
EXPIRES = datetime(2026, 5, 20, 8, 30, tzinfo=UTC)
NOW = EXPIRES - timedelta(minutes=28)


def request(**overrides: Any) -> ActionRequest:
    values: dict[str, Any] = {
        "incident_id": "inc-0123456789abcdef",
        "approval_id": "apr-0123456789abcdef0123",
        "action": "isolate_host",
        "node": "gke-a3-pool-x7k2",
        "instance": "gke-a3-pool-x7k2",
        "instance_id": "5464165239889847435",
        "zone": "us-east5-a",
        "project": "proj",
        "expires_at": EXPIRES,
    }
    values.update(overrides)
    return ActionRequest(**values)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def signed(payload: bytes, key: bytes = KEY) -> str:
    """A token over exactly ``payload``, signed as the module documents."""
    part = f"lb1.{b64(payload)}"
    return f"{part}.{b64(hmac.new(key, part.encode(), hashlib.sha256).digest())}"


def fields(**changes: Any) -> dict[str, Any]:
    data = request().to_dict()
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


def refusal(token: object, now: datetime = NOW) -> str:
    with pytest.raises(ApprovalInvalid) as refused:
        verify_token(token, KEY, now)
    return str(refused.value)


# --- what is signed ------------------------------------------------------------------


def test_the_signed_payload_is_sorted_compact_ascii_json() -> None:
    token = sign_token(request(node="nœud"), KEY)
    version, payload, _ = token.split(".")
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    assert version == "lb1"
    assert raw == (
        b'{"action":"isolate_host","approval_id":"apr-0123456789abcdef0123",'
        b'"expires_at":"2026-05-20T08:30:00Z","incident_id":"inc-0123456789abcdef",'
        b'"instance":"gke-a3-pool-x7k2","instance_id":"5464165239889847435",'
        b'"node":"n\\u0153ud","project":"proj","v":1,"zone":"us-east5-a"}'
    )
    assert raw == canonical_json(request(node="nœud").to_dict())
    assert token == signed(raw)  # HMAC-SHA256 over "lb1." + payload, base64url unpadded
    assert "=" not in token


def test_the_token_of_a_request_is_always_the_same() -> None:
    assert sign_token(request(), KEY) == sign_token(request(), KEY)
    assert sign_token(request(), KEY) != sign_token(request(), KEY + b"x")


def test_a_token_round_trips_to_the_same_request() -> None:
    assert verify_token(sign_token(request(), KEY), KEY, NOW) == request()


# --- the length limit ----------------------------------------------------------------


def long_token(length: int) -> str:
    """A genuine token of exactly ``length`` characters (a long approval id)."""
    for pad in range(length):
        token = sign_token(request(approval_id="apr-" + "a" * pad), KEY)
        if len(token) >= length:
            assert len(token) == length, "pick a length base64 can reach"
            return token
    raise AssertionError("unreachable")


def test_a_genuine_token_of_the_limit_is_taken() -> None:
    assert MAX_TOKEN_LENGTH == 2000  # Slack's cap on a button value
    token = long_token(2000)
    assert verify_token(token, KEY, NOW).approval_id.startswith("apr-aaa")


@pytest.mark.parametrize("length", [2001, 2002, 5000])
def test_anything_longer_is_refused_before_it_is_read(length: int) -> None:
    token = (long_token(2000) + "A" * length)[:length]
    assert refusal(token) == "the action request is too long to be one of ours"


# --- the expiry ----------------------------------------------------------------------


def test_a_token_is_good_until_the_instant_before_its_expiry() -> None:
    token = sign_token(request(), KEY)
    assert verify_token(token, KEY, EXPIRES - timedelta(microseconds=1)) == request()
    said = "the action request expired at 2026-05-20T08:30:00Z; nothing was changed"
    assert refusal(token, EXPIRES) == said
    assert refusal(token, EXPIRES + timedelta(days=1)) == said


# --- what each refusal says ----------------------------------------------------------


@pytest.mark.parametrize("token", [None, "", 42, b"lb1.e30.AAAA", ["lb1"]])
def test_no_token_at_all(token: object) -> None:
    assert refusal(token) == "the action carries no action request"


@pytest.mark.parametrize(
    "token", ["lb1.e30", "lb1.e30.AAAA.AAAA", "lb2.e30.AAAA", "LB1.e30.AAAA", "lb1.é.AAAA", "x"]
)
def test_not_the_shape_of_a_token(token: str) -> None:
    assert refusal(token) == "the action request is not a lb1 token"


@pytest.mark.parametrize("signature", ["!!!!", "AAA=A", "A"])
def test_a_signature_that_is_not_base64url(signature: str) -> None:
    _, payload, _ = sign_token(request(), KEY).split(".")
    assert refusal(f"lb1.{payload}.{signature}") == (
        "the action request's signature is not base64url"
    )


def test_a_signature_of_another_key_does_not_verify() -> None:
    assert refusal(sign_token(request(), b"another-key-0123456789abcdef")) == (
        "the action request's signature does not verify (tampered?)"
    )


@pytest.mark.parametrize("payload", [b"not json", b"\xff\xfe", b'{"v":1'])
def test_a_signed_payload_that_is_not_json(payload: bytes) -> None:
    assert refusal(signed(payload)) == "the signed action request is not JSON"


@pytest.mark.parametrize(
    "data",
    [
        ["v", 1],
        fields(v=2),
        fields(v="1"),
        fields(v=True),
        fields(v=1.0),
        fields(extra="x"),
        fields(zone=...),
        {},
    ],
    ids=["list", "v2", "v-text", "v-true", "v-float", "extra-key", "missing-key", "empty"],
)
def test_a_signed_payload_of_another_shape(data: Any) -> None:
    assert refusal(signed(canonical_json(data) if isinstance(data, dict) else b'["v",1]')) == (
        "the signed action request has an unknown shape"
    )


def test_a_field_that_is_not_text_is_named_first_in_key_order() -> None:
    token = signed(canonical_json(fields(zone=7, action=None, node=["n"])))
    assert refusal(token) == "the signed action request's action is not a string"
    token = signed(canonical_json(fields(zone=7)))
    assert refusal(token) == "the signed action request's zone is not a string"


def test_a_field_with_a_lone_surrogate_is_not_text() -> None:
    payload = canonical_json(fields()).replace(b'"proj"', b'"pr\\ud800oj"')
    assert refusal(signed(payload)) == (
        "the signed action request's project is not valid Unicode text"
    )


@pytest.mark.parametrize(
    ("expiry", "why"),
    [
        ("tomorrow", "is not an RFC 3339 timestamp (e.g. 2026-05-20T08:15:00Z)"),
        (
            "2026-05-20T08:30:00",
            "has no time zone: add Z for UTC or an offset such as +00:00 "
            "(e.g. 2026-05-20T08:30:00Z)",
        ),
        ("2026-13-01T00:00:00Z", "is not a valid date or time: month must be in 1..12"),
    ],
)
def test_a_signed_expiry_that_is_not_a_time(expiry: str, why: str) -> None:
    said = refusal(signed(canonical_json(fields(expires_at=expiry))))
    assert said == f"the signed action request has a bad expiry: expires_at {expiry!r} {why}"


def test_a_signed_payload_is_read_as_json_text() -> None:
    # json.loads would take these bytes as UTF-16; the token's payload is UTF-8 JSON only.
    payload = json.dumps(fields()).encode("utf-16")
    assert refusal(signed(payload)) == "the signed action request is not JSON"
