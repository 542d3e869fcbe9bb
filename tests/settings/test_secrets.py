"""Secret Manager secrets through the real google-cloud-secret-manager REST client."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import google.auth.credentials
import pytest
from fakeservers import Fault, Request, Response
from fakeservers.google import GoogleApiServer
from google.cloud import secretmanager

from loopbreaker.errors import ConfigError
from loopbreaker.settings.load import Secret, load_settings
from loopbreaker.settings.secrets import SecretManagerReader, resolve

TOKEN_VAR = "LOOPBREAKER_SLACK_BOT_TOKEN_SECRET_NAME"
TOKEN_NAME = "projects/p/secrets/tok/versions/latest"


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as Secret Manager reports in ``dataCrc32c``."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


class SecretManagerServer(GoogleApiServer):
    """``GET /v1/projects/{p}/secrets/{s}/versions/{v}:access`` (``v`` a number or latest)."""

    _PATH = re.compile(r"^/v1/projects/([^/]+)/secrets/([^/]+)/versions/([^/:]+):access$")

    def __init__(self) -> None:
        super().__init__()
        #: (project, secret) -> payloads of versions 1, 2, ...
        self.secrets: dict[tuple[str, str], list[bytes]] = {}
        #: Secrets the caller may not read: 403 PERMISSION_DENIED.
        self.denied: set[tuple[str, str]] = set()

    def route(self, request: Request) -> Response:
        match = self._PATH.match(request.path)
        if request.method != "GET" or match is None:
            return self.error(404, f"no route {request.method} {request.path}")
        project, secret, version = match.groups()
        if (project, secret) in self.denied:
            return self.error(
                403,
                f"Permission 'secretmanager.versions.access' denied for resource "
                f"'projects/{project}/secrets/{secret}/versions/{version}' (or it may not exist).",
            )
        versions = self.secrets.get((project, secret))
        if not versions:
            return self.error(404, f"Secret [projects/{project}/secrets/{secret}] not found.")
        number = len(versions) if version == "latest" else int(version)
        if not 1 <= number <= len(versions):
            return self.error(
                404,
                f"Secret Version [projects/{project}/secrets/{secret}/versions/{version}] "
                "not found.",
            )
        data = versions[number - 1]
        return Response.json(
            {
                "name": f"projects/{project}/secrets/{secret}/versions/{number}",
                # int64 fields are JSON strings in the REST mapping.
                "payload": {
                    "data": base64.b64encode(data).decode(),
                    "dataCrc32c": str(crc32c(data)),
                },
            }
        )


@pytest.fixture
def server() -> Iterator[SecretManagerServer]:
    with SecretManagerServer() as s:
        yield s


def reader(server: SecretManagerServer) -> SecretManagerReader:
    client = secretmanager.SecretManagerServiceClient(
        transport="rest",
        client_options={"api_endpoint": server.url},
        credentials=google.auth.credentials.AnonymousCredentials(),  # type: ignore[no-untyped-call]
    )
    return SecretManagerReader(client)


def test_crc32c_matches_the_published_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_read_latest_version(server: SecretManagerServer) -> None:
    server.secrets[("p", "tok")] = [b"xoxb-old", b"xoxb-new\n"]
    assert reader(server).read(TOKEN_NAME) == "xoxb-new"  # trailing newline stripped
    assert reader(server).read("projects/p/secrets/tok/versions/1") == "xoxb-old"
    assert [r.path for r in server.requests] == [
        "/v1/projects/p/secrets/tok/versions/latest:access",
        "/v1/projects/p/secrets/tok/versions/1:access",
    ]
    assert all(r.method == "GET" for r in server.requests)


def test_resolve_fills_the_secret(server: SecretManagerServer) -> None:
    server.secrets[("p", "tok")] = [b"xoxb-from-secret-manager"]
    settings = load_settings(
        {
            "LOOPBREAKER_NOTIFIER": "slack",
            "LOOPBREAKER_SLACK_CHANNEL": "C0LOOPBRK",
            TOKEN_VAR: TOKEN_NAME,
        }
    )
    assert settings.chatops.slack_bot_token == Secret(name=TOKEN_NAME)
    resolved = resolve(settings, reader(server))
    token = resolved.chatops.slack_bot_token
    assert token is not None
    assert token.get() == "xoxb-from-secret-manager"
    assert token.name == TOKEN_NAME
    assert "xoxb-from-secret-manager" not in repr(resolved)
    assert len(server.requests) == 1
    # Resolved settings carry every value: resolving again reads nothing.
    assert resolve(resolved, reader(server)) is resolved
    assert len(server.requests) == 1


def test_resolve_without_secret_names_reads_nothing(server: SecretManagerServer) -> None:
    settings = load_settings({"LOOPBREAKER_SLACK_BOT_TOKEN": "xoxb-inline"})
    assert resolve(settings, reader(server)) is settings
    assert server.requests == []


@pytest.mark.parametrize("case", ["missing", "denied"])
def test_unreadable_secret_names_the_variable(server: SecretManagerServer, case: str) -> None:
    if case == "denied":
        server.secrets[("p", "tok")] = [b"xoxb-secret"]
        server.denied.add(("p", "tok"))
    settings = load_settings({TOKEN_VAR: TOKEN_NAME})
    with pytest.raises(ConfigError) as caught:
        resolve(settings, reader(server))
    message = str(caught.value)
    assert message.startswith(f"{TOKEN_VAR}: cannot read secret {TOKEN_NAME}")
    assert ("403" if case == "denied" else "404") in message
    assert "xoxb-secret" not in message
    assert len(server.requests) == 1  # 403/404 are not retried


def test_injected_forbidden_is_a_config_error(server: SecretManagerServer) -> None:
    server.secrets[("p", "tok")] = [b"xoxb-secret"]
    server.inject(Fault.FORBIDDEN)
    with pytest.raises(ConfigError, match=TOKEN_VAR):
        resolve(load_settings({TOKEN_VAR: TOKEN_NAME}), reader(server))


def test_empty_secret_is_a_config_error(server: SecretManagerServer) -> None:
    server.secrets[("p", "tok")] = [b"  \n"]
    with pytest.raises(ConfigError, match=f"{TOKEN_VAR}: {TOKEN_NAME} is empty"):
        resolve(load_settings({TOKEN_VAR: TOKEN_NAME}), reader(server))


def test_non_utf8_secret_is_a_config_error(server: SecretManagerServer) -> None:
    server.secrets[("p", "tok")] = [b"\xff\xfe"]
    with pytest.raises(ConfigError, match=f"{TOKEN_VAR}: .*not UTF-8"):
        resolve(load_settings({TOKEN_VAR: TOKEN_NAME}), reader(server))


def test_short_signing_key_from_secret_manager_is_refused(server: SecretManagerServer) -> None:
    server.secrets[("p", "key")] = [b"too-short"]
    settings = load_settings(
        {"LOOPBREAKER_ACTION_SIGNING_KEY_SECRET_NAME": "projects/p/secrets/key/versions/1"}
    )
    with pytest.raises(ConfigError, match="ACTION_SIGNING_KEY_SECRET_NAME: the key is too short"):
        resolve(settings, reader(server))


def test_every_secret_is_resolved(server: SecretManagerServer) -> None:
    server.secrets[("p", "tok")] = [b"xoxb-token"]
    server.secrets[("p", "sign")] = [b"slack-signing-secret"]
    server.secrets[("p", "key")] = [b"k" * 32]
    settings = load_settings(
        {
            TOKEN_VAR: TOKEN_NAME,
            "LOOPBREAKER_SLACK_SIGNING_SECRET_SECRET_NAME": "projects/p/secrets/sign/versions/1",
            "LOOPBREAKER_ACTION_SIGNING_KEY_SECRET_NAME": "projects/p/secrets/key/versions/1",
        }
    )
    chat = resolve(settings, reader(server)).chatops
    assert chat.slack_bot_token is not None and chat.slack_bot_token.get() == "xoxb-token"
    assert chat.slack_signing_secret is not None
    assert chat.slack_signing_secret.get() == "slack-signing-secret"
    assert chat.action_signing_key is not None and chat.action_signing_key.get() == "k" * 32
    assert len(server.requests) == 3


def test_prometheus_secrets_are_resolved_and_named_by_their_variable(
    server: SecretManagerServer,
) -> None:
    server.secrets[("p", "prom-pw")] = [b"basic-auth-pw\n"]
    name = "projects/p/secrets/prom-pw/versions/latest"
    settings = load_settings(
        {
            "LOOPBREAKER_PROMETHEUS_URL": "https://prometheus.internal:9090",
            "LOOPBREAKER_PROMETHEUS_USERNAME": "loopbreaker",
            "LOOPBREAKER_PROMETHEUS_PASSWORD_SECRET_NAME": name,
        }
    )
    assert settings.prometheus.password == Secret(name=name)
    resolved = resolve(settings, reader(server))
    password = resolved.prometheus.password
    assert password is not None and password.get() == "basic-auth-pw"
    assert resolved.prometheus.username == "loopbreaker"
    assert resolved.chatops == settings.chatops
    assert "basic-auth-pw" not in repr(resolved)
    assert [r.path for r in server.requests] == [f"/v1/{name}:access"]
    # What the deployed wiring builds from it: basic auth to that Prometheus.
    from loopbreaker.app.bootstrap import build_evidence
    from loopbreaker.diagnosis.readers.sources import LiveEvidence

    provider = build_evidence(resolved)
    assert isinstance(provider, LiveEvidence)
    options = provider.options
    assert options.prometheus_basic_auth == ("loopbreaker", "basic-auth-pw")
    assert options.prometheus_bearer_token is None


def test_an_unreadable_prometheus_token_names_its_variable(server: SecretManagerServer) -> None:
    server.secrets[("p", "prom-token")] = [b"tok"]
    server.denied.add(("p", "prom-token"))
    settings = load_settings(
        {
            "LOOPBREAKER_PROMETHEUS_URL": "https://prometheus.internal:9090",
            "LOOPBREAKER_PROMETHEUS_BEARER_TOKEN_SECRET_NAME": (
                "projects/p/secrets/prom-token/versions/1"
            ),
        }
    )
    with pytest.raises(ConfigError) as caught:
        resolve(settings, reader(server))
    assert str(caught.value).startswith(
        "LOOPBREAKER_PROMETHEUS_BEARER_TOKEN_SECRET_NAME: cannot read secret "
    )
    assert "403" in str(caught.value)
