"""The exception tree of loopbreaker.

    LoopbreakerError                 base of everything raised on purpose
     +-- InvalidInput                bad input from a user or an event: never retried
     |    +-- InvalidLogEntry        a value that is not a Cloud Logging LogEntry
     |    +-- InvalidContext         missing or malformed diagnosis context (flags, times)
     |    +-- InvalidTelemetry       a telemetry file that cannot be read as documented
     |    +-- InvalidEvent           a CloudEvent / Pub/Sub envelope that cannot be decoded
     |    +-- ConfigError            a LOOPBREAKER_* setting with a bad value
     +-- IgnorableEvent              valid, but nothing to do (ack and log at INFO)
     +-- SourceUnavailable           a telemetry reader could not answer (auth, network,
     |                               timeout, malformed response); the step degrades
     +-- TransientError              worth a retry by the caller (Pub/Sub redelivery)
     +-- StoreError                  the incident store refused a call for good (permission
     |                               denied, not found, invalid argument): not retried
     +-- UnsafeToAct                 a safety gate refused a mutation; tell a human
     +-- ActionFailed                a Kubernetes, Compute or Support API call failed; the
     |                               remediation step fails (``status``: the HTTP status)
     +-- ApprovalInvalid             a chat action that must not be honoured: malformed,
          |                          tampered, expired or for another request (HTTP 400)
          +-- Unauthenticated        the chat platform's signature or token does not verify (401)
          +-- NotAnApprover          the clicking user is not in LOOPBREAKER_APPROVERS (403)
          +-- AlreadyDecided         the incident is decided, expired or superseded (409)

Adapters wrap library errors with ``raise ... from exc`` so callers only need this tree.
"""

from __future__ import annotations


class LoopbreakerError(Exception):
    """Base class of every error loopbreaker raises on purpose."""


class InvalidInput(LoopbreakerError):
    """Input that can never succeed, however often it is retried."""


class InvalidLogEntry(InvalidInput):
    """The value is not a Cloud Logging LogEntry."""


class InvalidContext(InvalidInput):
    """The diagnosis context is incomplete or malformed."""


class InvalidTelemetry(InvalidInput):
    """A telemetry file does not follow the documented format."""


class InvalidEvent(InvalidInput):
    """An event envelope (CloudEvent, Pub/Sub push) cannot be decoded."""


class ConfigError(InvalidInput):
    """A configuration value is missing or malformed."""


class IgnorableEvent(LoopbreakerError):
    """A well-formed event that needs no action."""


class SourceUnavailable(LoopbreakerError):
    """A telemetry source could not answer; the diagnosis goes on without it."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


class TransientError(LoopbreakerError):
    """A failure that a later retry may not hit (store contention, 5xx)."""


class StoreError(LoopbreakerError):
    """The incident store refused a call in a way a retry cannot fix."""


class UnsafeToAct(LoopbreakerError):
    """A safety gate refused a mutation."""


class ActionFailed(LoopbreakerError):
    """A mutating (or re-checking) API call of a remediation step failed."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ApprovalInvalid(LoopbreakerError):
    """A chat action that must not be honoured; ``http_status`` is the reply it gets."""

    http_status = 400


class Unauthenticated(ApprovalInvalid):
    """The request's platform signature or bearer token is missing, bad or stale."""

    http_status = 401


class NotAnApprover(ApprovalInvalid):
    """The user who clicked may not decide remediations."""

    http_status = 403


class AlreadyDecided(ApprovalInvalid):
    """The incident was decided already, or is no longer awaiting this approval."""

    http_status = 409
