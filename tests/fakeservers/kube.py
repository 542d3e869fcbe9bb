"""A fake Kubernetes API server (nodes and pods, list with limit/continue) and TLS helpers."""

from __future__ import annotations

import datetime
import ipaddress
import re
import ssl
import tempfile
from pathlib import Path
from typing import Any

from .base import FakeServer, Request, Response


class KubernetesServer(FakeServer):
    """``/api/v1/nodes``, ``/api/v1/pods``, ``/api/v1/namespaces/{ns}/pods``."""

    _NS_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")

    def __init__(
        self,
        nodes: list[dict[str, Any]] | None = None,
        pods: list[dict[str, Any]] | None = None,
        *,
        token: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(tls=tls)
        self.nodes = list(nodes or [])
        self.pods = list(pods or [])
        self.token = token

    def error(self, status: int, message: str) -> Response:
        reasons = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 429: "TooManyRequests"}
        return Response.json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": reasons.get(status, "InternalError"),
                "code": status,
            },
            status,
        )

    def route(self, request: Request) -> Response:
        if (
            self.token is not None
            and request.headers.get("authorization") != f"Bearer {self.token}"
        ):
            return self.error(401, "Unauthorized")
        if request.method != "GET":
            return self.error(405, "method not allowed")
        if request.path == "/api/v1/nodes":
            return self._list("NodeList", self.nodes, request)
        if request.path == "/api/v1/pods":
            return self._list("PodList", self.pods, request)
        match = self._NS_PODS.match(request.path)
        if match:
            namespace = match.group(1)
            pods = [p for p in self.pods if p.get("metadata", {}).get("namespace") == namespace]
            return self._list("PodList", pods, request)
        return self.error(404, f"the server could not find the requested resource {request.path}")

    def _list(self, kind: str, items: list[dict[str, Any]], request: Request) -> Response:
        start = int(request.param("continue") or 0)
        limit = int(request.param("limit") or 0) or len(items) or 1
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": "12345"}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        return Response.json(
            {"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": page}
        )


def write_kubeconfig(
    path: Path, server: str, *, token: str | None = None, ca_file: Path | None = None
) -> Path:
    """A kubeconfig with one cluster/user/context pointing at ``server``."""
    cluster = f"    server: {server}\n"
    cluster += f"    certificate-authority: {ca_file}\n" if ca_file else ""
    user = f"    token: {token}\n" if token else "    {}\n"
    if not token:
        user = "    username: test\n"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: fake\n  cluster:\n{cluster}"
        f"users:\n- name: fake\n  user:\n{user}"
        "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
        "current-context: fake\n"
    )
    return path


def self_signed_tls() -> tuple[ssl.SSLContext, bytes]:
    """A server SSL context for 127.0.0.1 and the PEM of its self-signed certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
        cert_path.write_bytes(cert_pem)
        key_path.write_bytes(key_pem)
        context.load_cert_chain(cert_path, key_path)
    return context, cert_pem
