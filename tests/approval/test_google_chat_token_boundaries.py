"""Google Chat's bearer token: the header's shape, the claims handed back, the transport
the certificates come through, and what each refusal says.

Tokens are RS256 JWTs signed with a key whose certificate a local server publishes the way
Google publishes Chat's (tests/fakeservers/certs.py), and google-auth verifies them
for real. Headers come lowercased, as ``ChatActions.handle`` passes them on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fakeservers.certs import CertsServer
from google.auth import jwt
from google.auth.transport.requests import Request as GoogleRequest

from loopbreaker.approval.verify import CHAT_ISSUER, GoogleChatVerifier
from loopbreaker.errors import TransientError, Unauthenticated

AUDIENCE = "123456789012"
MISSING = "missing Authorization: Bearer token"


@pytest.fixture(scope="module")
def certs() -> Iterator[CertsServer]:
    with CertsServer() as server:
        yield server


class RecordingTransport:
    """google-auth's requests transport, noting every URL it fetches."""

    def __init__(self) -> None:
        self.inner = GoogleRequest()
        self.urls: list[str] = []

    def __call__(self, url: str, method: str = "GET", **kwargs: Any) -> Any:
        self.urls.append(url)
        return self.inner(url, method=method, **kwargs)


def bearer(token: str, scheme: str = "Bearer", gap: str = " ") -> dict[str, str]:
    return {"authorization": f"{scheme}{gap}{token}"}


def refusal(verifier: GoogleChatVerifier, headers: dict[str, str]) -> str:
    with pytest.raises(Unauthenticated) as refused:
        verifier.verify(headers)
    return str(refused.value)


def test_the_claims_handed_back_are_the_tokens_own(certs: CertsServer) -> None:
    token = certs.token(AUDIENCE, email="ignored@example.com", extra="kept")
    # No transport injected: the verifier builds its own and fetches the certificates.
    claims = GoogleChatVerifier(AUDIENCE, certs.certs_url).verify(bearer(token))
    assert claims == jwt.decode(token, verify=False)
    assert claims["iss"] == CHAT_ISSUER and claims["extra"] == "kept"


@pytest.mark.parametrize("issuer", ["https://accounts.google.com", "accounts.google.com"])
def test_an_endpoint_url_token_hands_back_its_claims(certs: CertsServer, issuer: str) -> None:
    # Google signs OIDC tokens under either spelling of its issuer.
    token = certs.token(AUDIENCE, issuer=issuer, email=CHAT_ISSUER, email_verified=True)
    claims = GoogleChatVerifier(AUDIENCE, certs.certs_url).verify(bearer(token))
    assert claims == jwt.decode(token, verify=False)


def test_an_injected_transport_is_the_one_used_and_kept(certs: CertsServer) -> None:
    transport = RecordingTransport()
    verifier = GoogleChatVerifier(AUDIENCE, certs.certs_url, request=transport)
    verifier.verify(bearer(certs.token(AUDIENCE)))
    verifier.verify(bearer(certs.token(AUDIENCE)))
    assert transport.urls == [certs.certs_url, certs.certs_url]


@pytest.mark.parametrize(("scheme", "gap"), [("bearer", " "), ("BEARER", " "), ("Bearer", "   ")])
def test_the_scheme_is_case_insensitive_and_spaces_before_the_token_are_dropped(
    certs: CertsServer, scheme: str, gap: str
) -> None:
    token = certs.token(AUDIENCE)
    claims = GoogleChatVerifier(AUDIENCE, certs.certs_url).verify(bearer(token, scheme, gap))
    assert claims["aud"] == AUDIENCE


def test_no_authorization_header_is_refused(certs: CertsServer) -> None:
    assert refusal(GoogleChatVerifier(AUDIENCE, certs.certs_url), {}) == MISSING


@pytest.mark.parametrize("value", ["", "Bearer", "Bearer ", "Bearer    ", "Token"])
def test_a_header_without_a_token_is_refused(certs: CertsServer, value: str) -> None:
    verifier = GoogleChatVerifier(AUDIENCE, certs.certs_url)
    assert refusal(verifier, {"authorization": value}) == MISSING


@pytest.mark.parametrize("scheme", ["Basic", "Token", "Bearer:", "Bearerx"])
def test_a_valid_token_under_another_scheme_is_refused(certs: CertsServer, scheme: str) -> None:
    transport = RecordingTransport()
    verifier = GoogleChatVerifier(AUDIENCE, certs.certs_url, request=transport)
    assert refusal(verifier, bearer(certs.token(AUDIENCE), scheme)) == MISSING
    assert transport.urls == []  # refused before any certificate was fetched


def test_a_token_that_does_not_verify_says_so(certs: CertsServer) -> None:
    verifier = GoogleChatVerifier(AUDIENCE, certs.certs_url)
    said = refusal(verifier, bearer(certs.token("another-audience")))
    assert said.startswith("Google Chat token does not verify: ")
    assert "another-audience" in said  # google-auth's own reason follows


def test_a_token_from_another_issuer_names_it(certs: CertsServer) -> None:
    verifier = GoogleChatVerifier(AUDIENCE, certs.certs_url)
    said = refusal(verifier, bearer(certs.token(AUDIENCE, issuer="attacker@evil.example")))
    assert said == (
        "Google Chat token was not issued by or for chat@system.gserviceaccount.com "
        "(iss 'attacker@evil.example')"
    )


@pytest.mark.parametrize("verified", ["true", 1, None])
def test_an_endpoint_url_token_needs_email_verified_exactly_true(
    certs: CertsServer, verified: object
) -> None:
    claims: dict[str, Any] = {"email": CHAT_ISSUER}
    if verified is not None:
        claims["email_verified"] = verified
    token = certs.token(AUDIENCE, issuer="https://accounts.google.com", **claims)
    verifier = GoogleChatVerifier(AUDIENCE, certs.certs_url)
    assert refusal(verifier, bearer(token)) == (
        "Google Chat token was not issued by or for chat@system.gserviceaccount.com "
        "(iss 'https://accounts.google.com')"
    )


def test_unreachable_certificates_are_transient_and_say_so(certs: CertsServer) -> None:
    # Port 9 (discard) on loopback: nothing listens, the connection is refused.
    verifier = GoogleChatVerifier(AUDIENCE, "http://127.0.0.1:9/certs")
    with pytest.raises(TransientError) as failed:
        verifier.verify(bearer(certs.token(AUDIENCE)))
    assert str(failed.value).startswith("cannot fetch Google Chat's certificates: ")
