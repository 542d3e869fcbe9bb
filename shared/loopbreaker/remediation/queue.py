"""Where approved remediation requests go: the remediation topic, or (locally) the log.

The request is built from the incident's recorded approval only (:func:`request_for`), so
what is published is exactly what a human approved. Each message carries attributes
``incident_id``, ``approval_id`` and ``dedup_id`` and the incident id as ordering key: a
redelivered or re-published request is recognised by ``on_remediation_request``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from loopbreaker import incidents
from loopbreaker.approval.requests import Decision
from loopbreaker.errors import ConfigError, InvalidInput, TransientError
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.logs import event, get_logger
from loopbreaker.timeutil import format_rfc3339

#: Seconds a publish may take before the caller gives up (Slack wants its answer in 3 s).
PUBLISH_TIMEOUT = 1.5


class RemediationQueue(Protocol):
    def publish(self, request: Mapping[str, Any]) -> str:
        """Publish one remediation request; its message id. TransientError to retry."""
        ...


def request_for(incident: Incident) -> dict[str, Any]:
    """The remediation request of an approved incident; InvalidInput if it is not approved."""
    approval = incident.approval
    if approval is None or approval.decision is not Decision.APPROVED:
        raise InvalidInput(f"incident {incident.id} is not approved")
    return {
        "incident_id": incident.id,
        "approval_id": approval.request_id,
        "dedup_id": dedup_id(incident.id, approval.request_id),
        "action": approval.action,
        "target": approval.target.to_dict(),
        "approved_by": approval.actor,
        "approved_by_name": approval.actor_name,
        "platform": approval.platform.value,
        "approved_at": format_rfc3339(approval.at),
        "expires_at": format_rfc3339(approval.expires_at),
    }


def dedup_id(incident_id: str, approval_id: str) -> str:
    return f"{incident_id}:{approval_id}"


def attributes_of(request: Mapping[str, Any]) -> dict[str, str]:
    return {
        "incident_id": str(request["incident_id"]),
        "approval_id": str(request["approval_id"]),
        "dedup_id": str(request["dedup_id"]),
    }


class PubSubQueue:
    """google-cloud-pubsub publisher with message ordering per incident.

    Honours ``PUBSUB_EMULATOR_HOST`` (the client library reads it).
    """

    def __init__(self, topic: str, *, timeout: float = PUBLISH_TIMEOUT, client: Any = None) -> None:
        self.topic = topic
        self.timeout = timeout
        self._client = client

    def _publisher(self) -> Any:
        if self._client is None:
            from google.cloud import pubsub_v1  # type: ignore[attr-defined]

            options = pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
            self._client = pubsub_v1.PublisherClient(publisher_options=options)
        return self._client

    def publish(self, request: Mapping[str, Any]) -> str:
        from concurrent.futures import TimeoutError as FutureTimeout

        from google.api_core import exceptions as gexc

        publisher = self._publisher()
        data = json.dumps(request, sort_keys=True, separators=(",", ":")).encode()
        key = str(request["incident_id"])
        try:
            future = publisher.publish(self.topic, data, ordering_key=key, **attributes_of(request))
            return str(future.result(timeout=self.timeout))
        except (gexc.NotFound, gexc.PermissionDenied) as exc:
            self._resume(publisher, key)
            raise ConfigError(
                f"cannot publish to LOOPBREAKER_REMEDIATION_TOPIC {self.topic}: {exc}"
            ) from exc
        except (FutureTimeout, gexc.GoogleAPIError) as exc:
            self._resume(publisher, key)
            raise TransientError(f"publishing to {self.topic} failed: {exc or 'timeout'}") from exc

    def _resume(self, publisher: Any, key: str) -> None:
        # A failed publish pauses its ordering key; later publishes would fail at once.
        with contextlib.suppress(ValueError):  # the key was not paused
            publisher.resume_publish(self.topic, key)


class LogQueue:
    """Local runs without a topic: the request is logged, `loopbreaker remediate` acts."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger or get_logger("remediation")
        self.published: list[Mapping[str, Any]] = []

    def publish(self, request: Mapping[str, Any]) -> str:
        self.published.append(dict(request))
        event(
            self._log,
            logging.WARNING,
            "no LOOPBREAKER_REMEDIATION_TOPIC: remediation request only logged "
            f"(run `loopbreaker remediate {request['incident_id']}`)",
            labels={"incident_id": request["incident_id"]},
            event="remediation_request_logged",
            request=dict(request),
        )
        return f"log:{request['dedup_id']}"


def publish_approved(
    store: IncidentStore,
    queue: RemediationQueue,
    incident: Incident,
    now: datetime,
    log: logging.Logger,
) -> tuple[str | None, Incident]:
    """Publish an approved incident's remediation request and record it; never raises.

    A failed publish leaves the approval unpublished; ``on_schedule`` tries again.
    """
    try:
        message_id = queue.publish(request_for(incident))
    except (TransientError, ConfigError) as exc:
        event(
            log,
            logging.ERROR,
            f"remediation request of {incident.id} not published yet: {exc}",
            labels=incident.labels(),
            event="remediation_publish_failed",
            reason=str(exc),
        )
        return None, incident
    stored = store.update(incident.id, lambda i: incidents.mark_published(i, now, message_id))
    event(
        log,
        logging.INFO,
        f"remediation request of {incident.id} published",
        labels=incident.labels(),
        event="remediation_published",
        message_id=message_id,
    )
    return message_id, stored.incident or incident
