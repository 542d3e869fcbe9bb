"""Google Chat's signing keys, served locally, and tokens signed with them.

``CertsServer`` answers ``GET /certs`` with ``{kid: x509 PEM}`` exactly like
``https://www.googleapis.com/service_accounts/v1/metadata/x509/chat@system.gserviceaccount.com``;
:meth:`CertsServer.token` mints an RS256 JWT with google-auth's own signer, so
``google.oauth2.id_token.verify_token`` checks it for real.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt

from .base import FakeServer, Request, Response

CHAT_ISSUER = "chat@system.gserviceaccount.com"


class SigningKey:
    """An RSA key with a self-signed certificate, as Google publishes them."""

    def __init__(self, kid: str) -> None:
        self.kid = kid
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CHAT_ISSUER)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .sign(self._key, hashes.SHA256())
        )
        self.certificate_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        private_pem = self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        self.signer = crypt.RSASigner.from_string(private_pem, key_id=kid)


class CertsServer(FakeServer):
    """Serves the public certificates of ``keys``; ``token()`` signs with the first."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.keys = [SigningKey("chat-key-1")]

    @property
    def certs_url(self) -> str:
        return f"{self.url}/certs"

    def route(self, request: Request) -> Response:
        if request.method == "GET" and request.path == "/certs":
            return Response.json({k.kid: k.certificate_pem for k in self.keys})
        return self.error(404, f"no route {request.method} {request.path}")

    def token(
        self,
        audience: str,
        *,
        issuer: str = CHAT_ISSUER,
        expires_in: int = 300,
        signer: crypt.Signer | None = None,
        **claims: Any,
    ) -> str:
        now = int(time.time())
        payload = {"iss": issuer, "aud": audience, "iat": now - 5, "exp": now + expires_in}
        payload.update(claims)
        raw = jwt.encode(signer or self.keys[0].signer, payload)
        return raw.decode() if isinstance(raw, bytes) else str(raw)
