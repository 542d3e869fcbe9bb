"""Secret Manager: settings given as ``LOOPBREAKER_<NAME>_SECRET_NAME`` are read once at start.

:func:`resolve` returns the settings with every secret's value filled in; a secret that
cannot be read is a ConfigError naming the variable, so the function fails at start-up
rather than at the first click.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from loopbreaker.errors import ConfigError
from loopbreaker.settings.load import MIN_SIGNING_KEY_LENGTH, PREFIX, Secret, Settings


class SecretReader(Protocol):
    def read(self, version_name: str) -> str:
        """The payload of a secret version, as text; ConfigError if it cannot be read."""
        ...


class SecretManagerReader:
    """google-cloud-secret-manager ``access_secret_version``."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    def read(self, version_name: str) -> str:
        import requests
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc

        try:
            if self._client is None:
                from google.cloud import secretmanager

                self._client = secretmanager.SecretManagerServiceClient()
            response = self._client.access_secret_version(name=version_name, timeout=10.0)
        except (gexc.GoogleAPIError, auth_exc.GoogleAuthError, requests.RequestException) as exc:
            # Unreachable endpoints (REST) and missing credentials surface as these.
            raise ConfigError(f"cannot read secret {version_name}: {exc}") from exc
        try:
            return bytes(response.payload.data).decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"secret {version_name} is not UTF-8 text") from exc


def resolve(settings: Settings, reader: SecretReader | None = None) -> Settings:
    """Settings whose secrets all carry their values (read through ``reader``)."""
    chat, prometheus = settings.chatops, settings.prometheus
    pending = {k: s for k, s in chat.secrets().items() if s.value is None}
    # The Prometheus' secrets are PROMETHEUS_<FIELD> (fields bearer_token, password).
    pending |= {f"prometheus_{k}": s for k, s in prometheus.secrets().items() if s.value is None}
    if not pending:
        return settings
    source = reader or SecretManagerReader()
    filled: dict[str, Secret] = {}
    for field_name, secret in pending.items():
        assert secret.name is not None
        try:
            value = source.read(secret.name)
        except ConfigError as exc:
            variable = f"{PREFIX}{field_name.upper()}_SECRET_NAME"
            raise ConfigError(f"{variable}: {exc}") from exc
        if not value:
            raise ConfigError(f"{PREFIX}{field_name.upper()}_SECRET_NAME: {secret.name} is empty")
        filled[field_name] = Secret(value=value, name=secret.name)
    chat_filled = {k: v for k, v in filled.items() if not k.startswith("prometheus_")}
    resolved = replace(chat, **chat_filled)  # type: ignore[arg-type]
    key = resolved.action_signing_key
    if key is not None and len(key.get()) < MIN_SIGNING_KEY_LENGTH:
        raise ConfigError(f"{PREFIX}ACTION_SIGNING_KEY_SECRET_NAME: the key is too short")
    prometheus_filled = {
        k.removeprefix("prometheus_"): v for k, v in filled.items() if k.startswith("prometheus_")
    }
    return replace(
        settings,
        chatops=resolved,
        prometheus=replace(prometheus, **prometheus_filled),  # type: ignore[arg-type]
    )
