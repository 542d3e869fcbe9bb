"""A fake Kubernetes API server (nodes, pods, TrainJobs; list with limit/continue) and TLS
helpers."""

from __future__ import annotations

import datetime
import ipaddress
import re
import ssl
import tempfile
from pathlib import Path
from typing import Any

from contracts.kube_models import KubeContract

from .base import FakeServer, Request, Response


class KubernetesServer(FakeServer):
    """``/api/v1/nodes``, ``/api/v1/pods``, ``/api/v1/namespaces/{ns}/pods``,
    ``/apis/trainer.kubeflow.org/v1alpha1[/namespaces/{ns}]/trainjobs`` and
    ``/apis/jobset.x-k8s.io/v1alpha2[/namespaces/{ns}]/jobsets``."""

    contract = KubeContract()

    _NS_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
    #: kubeflow/trainer v2.1.0 pkg/apis/trainer/v1alpha1: group trainer.kubeflow.org,
    #: version v1alpha1, resource trainjobs (a namespaced CRD).
    TRAINER = "trainer.kubeflow.org/v1alpha1"
    _TRAINJOBS = re.compile(
        r"^/apis/trainer\.kubeflow\.org/v1alpha1(?:/namespaces/([^/]+))?/trainjobs$"
    )
    #: kubernetes-sigs/jobset api/jobset/v1alpha2/groupversion_info.go: group jobset.x-k8s.io,
    #: version v1alpha2; resource jobsets (namespaced).
    JOBSET = "jobset.x-k8s.io/v1alpha2"
    _JOBSETS = re.compile(r"^/apis/jobset\.x-k8s\.io/v1alpha2(?:/namespaces/([^/]+))?/jobsets$")

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
        #: TrainJobs; None serves no trainer.kubeflow.org resource (CRD not installed: 404).
        self.trainjobs: list[dict[str, Any]] | None = None
        #: JobSets; None serves no jobset.x-k8s.io resource (CRD not installed: 404).
        self.jobsets: list[dict[str, Any]] | None = None

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
        match = self._TRAINJOBS.match(request.path)
        if match and self.trainjobs is not None:
            jobs = [
                # Custom resources are served as stored: each item repeats its apiVersion/kind.
                {"apiVersion": self.TRAINER, "kind": "TrainJob", **j}
                for j in self.trainjobs
                if match.group(1) in (None, j.get("metadata", {}).get("namespace"))
            ]
            return self._list("TrainJobList", jobs, request, api_version=self.TRAINER)
        match = self._JOBSETS.match(request.path)
        if match and self.jobsets is not None:
            jobsets = [
                {"apiVersion": self.JOBSET, "kind": "JobSet", **j}
                for j in self.jobsets
                if match.group(1) in (None, j.get("metadata", {}).get("namespace"))
            ]
            return self._list("JobSetList", jobsets, request, api_version=self.JOBSET)
        match = self._NS_PODS.match(request.path)
        if match:
            namespace = match.group(1)
            pods = [p for p in self.pods if p.get("metadata", {}).get("namespace") == namespace]
            return self._list("PodList", pods, request)
        return self.error(404, f"the server could not find the requested resource {request.path}")

    def _list(
        self, kind: str, items: list[dict[str, Any]], request: Request, *, api_version: str = "v1"
    ) -> Response:
        start = int(request.param("continue") or 0)
        limit = int(request.param("limit") or 0) or len(items) or 1
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": "12345"}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        return Response.json(
            {"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": page}
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
