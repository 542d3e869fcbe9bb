"""Approval requests: what a human is asked to approve, and the signed token a button carries.

Pure (stdlib only). An ``isolate_host`` diagnosis names a :class:`Target`: the node, its
GCE VM by name *and* numeric id (GKE recreates VMs under the same name, so the name alone
could later point at a healthy replacement), zone, project and physical host. The
incident stores one :class:`ApprovalRequest` for it; the chat buttons carry an
:class:`ActionRequest` token, HMAC-SHA256 over canonical JSON (sorted keys, no spaces)::

    lb1.<base64url(canonical JSON)>.<base64url(HMAC-SHA256(key, "lb1." + payload))>

:func:`verify_token` checks the signature in constant time *before* it reads the JSON,
then the expiry. Whether the request is still the incident's open one, and single use, is
decided in :func:`loopbreaker.incidents.decide` inside one store transaction.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from loopbreaker.approval.repair import (
    ComputeFacts,
    FaultReason,
    HostFacts,
    RepairPath,
    RepairPolicy,
    choose_path,
    fault_reason,
)
from loopbreaker.errors import ApprovalInvalid, InvalidInput
from loopbreaker.model import Diagnosis, NodeInfo, RemediationPath, Signal
from loopbreaker.timeutil import format_rfc3339, parse_rfc3339

E = TypeVar("E", bound=StrEnum)

APPROVE_ACTION = "approve_remediation"
REJECT_ACTION = "reject_remediation"
CHAT_ACTIONS = frozenset({APPROVE_ACTION, REJECT_ACTION})
TOKEN_VERSION = "lb1"
#: Slack caps a button value at 2000 characters; a token is far below (about 450).
MAX_TOKEN_LENGTH = 2000
#: Keys shorter than this are refused at start-up: an HMAC key is only as strong as it is long.
MIN_KEY_LENGTH = 16

_NUMERIC_ID = re.compile(r"^[0-9]{1,20}$")
_PAYLOAD_KEYS = frozenset(
    {
        "v",
        "incident_id",
        "approval_id",
        "action",
        "node",
        "instance",
        "instance_id",
        "zone",
        "project",
        "expires_at",
    }
)


class Platform(StrEnum):
    """Where a decision was made."""

    SLACK = "slack"
    GOOGLE_CHAT = "google-chat"


class Decision(StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Target:
    """The one node and VM an ``isolate_host`` remediation would act on."""

    node: str
    instance: str
    instance_id: str
    zone: str
    project: str
    physical_host: str
    host_known: bool = True
    node_pool: str | None = None
    cluster: str | None = None
    #: The repair path the approval is for (``gke``, ``report``, ``delete``), and why it was
    #: chosen; None on approvals from before paths existed (the policy decides then).
    repair_path: RepairPath | None = None
    repair_why: str | None = None
    #: ``reportHostAsFaulty``'s fault reason the diagnosis supports.
    fault_reason: FaultReason = FaultReason.BEHAVIOR_UNSPECIFIED
    #: The branch the approval's rule selects when Compute, read at the re-check, does not
    #: confirm ``repair_path`` (``auto`` with the reservation unknown when asking: delete);
    #: None when the path was settled when asking, or the policy allows no other path.
    fallback_path: RepairPath | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "instance": self.instance,
            "instance_id": self.instance_id,
            "zone": self.zone,
            "project": self.project,
            "physical_host": self.physical_host,
            "host_known": self.host_known,
            "node_pool": self.node_pool,
            "cluster": self.cluster,
            "repair_path": self.repair_path.value if self.repair_path else None,
            "repair_why": self.repair_why,
            "fault_reason": self.fault_reason.value,
            "fallback_path": self.fallback_path.value if self.fallback_path else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Target:
        return cls(
            node=data["node"],
            instance=data["instance"],
            instance_id=str(data["instance_id"]),
            zone=data["zone"],
            project=data["project"],
            physical_host=data["physical_host"],
            host_known=bool(data.get("host_known", True)),
            node_pool=data.get("node_pool"),
            cluster=data.get("cluster"),
            repair_path=_enum(RepairPath, data.get("repair_path")),
            repair_why=data.get("repair_why"),
            fault_reason=_enum(FaultReason, data.get("fault_reason"))
            or FaultReason.BEHAVIOR_UNSPECIFIED,
            fallback_path=_enum(RepairPath, data.get("fallback_path")),
        )


@dataclass(frozen=True)
class ApprovalRequest:
    """The open question "may we isolate this host?", stored on the incident."""

    id: str
    action: str
    target: Target
    issued_at: datetime
    expires_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action,
            "target": self.target.to_dict(),
            "issued_at": format_rfc3339(self.issued_at),
            "expires_at": format_rfc3339(self.expires_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRequest:
        return cls(
            id=data["id"],
            action=data["action"],
            target=Target.from_dict(data["target"]),
            issued_at=parse_rfc3339(data["issued_at"]),
            expires_at=parse_rfc3339(data["expires_at"]),
        )


@dataclass(frozen=True)
class Approval:
    """A recorded decision: who decided what, when, through which platform."""

    decision: Decision
    request_id: str
    action: str
    target: Target
    actor: str
    platform: Platform
    at: datetime
    #: The approved request's own expiry: remediation must not start after it.
    expires_at: datetime
    actor_name: str | None = None
    #: Set once the remediation request is on the remediation topic (approvals only).
    published_at: datetime | None = None
    published_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision.value,
            "request_id": self.request_id,
            "action": self.action,
            "target": self.target.to_dict(),
            "by": self.actor,
            "by_name": self.actor_name,
            "platform": self.platform.value,
            "at": format_rfc3339(self.at),
            "expires_at": format_rfc3339(self.expires_at),
            "published_at": format_rfc3339(self.published_at) if self.published_at else None,
            "published_id": self.published_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Approval:
        published = data.get("published_at")
        return cls(
            decision=Decision(data["decision"]),
            request_id=data["request_id"],
            action=data["action"],
            target=Target.from_dict(data["target"]),
            actor=data["by"],
            actor_name=data.get("by_name"),
            platform=Platform(data["platform"]),
            at=parse_rfc3339(data["at"]),
            expires_at=parse_rfc3339(data["expires_at"]),
            published_at=parse_rfc3339(published) if published else None,
            published_id=data.get("published_id"),
        )


@dataclass(frozen=True)
class ActionRequest:
    """What an Approve / Reject button carries, signed."""

    incident_id: str
    approval_id: str
    action: str
    node: str
    instance: str
    instance_id: str
    zone: str
    project: str
    expires_at: datetime

    @classmethod
    def of(cls, incident_id: str, request: ApprovalRequest) -> ActionRequest:
        t = request.target
        return cls(
            incident_id=incident_id,
            approval_id=request.id,
            action=request.action,
            node=t.node,
            instance=t.instance,
            instance_id=t.instance_id,
            zone=t.zone,
            project=t.project,
            expires_at=request.expires_at,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "incident_id": self.incident_id,
            "approval_id": self.approval_id,
            "action": self.action,
            "node": self.node,
            "instance": self.instance,
            "instance_id": self.instance_id,
            "zone": self.zone,
            "project": self.project,
            "expires_at": format_rfc3339(self.expires_at),
        }

    def matches(self, incident_id: str, request: ApprovalRequest) -> bool:
        """True when this is exactly the incident's open request, target included."""
        return self == ActionRequest.of(incident_id, request)


def canonical_json(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    # validate=True: characters outside the alphabet are an error, not silently dropped.
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


def _mac(key: bytes, signed_part: str) -> bytes:
    return hmac.new(key, signed_part.encode("ascii"), hashlib.sha256).digest()


def sign_token(request: ActionRequest, key: bytes) -> str:
    """The button value for ``request`` (deterministic: same request, same token)."""
    signed_part = f"{TOKEN_VERSION}.{_b64(canonical_json(request.to_dict()))}"
    return f"{signed_part}.{_b64(_mac(key, signed_part))}"


def verify_token(token: object, key: bytes, now: datetime) -> ActionRequest:
    """The ActionRequest in ``token``; ApprovalInvalid when forged, tampered or expired."""
    if not isinstance(token, str) or not token:
        raise ApprovalInvalid("the action carries no action request")
    if len(token) > MAX_TOKEN_LENGTH:
        raise ApprovalInvalid("the action request is too long to be one of ours")
    parts = token.split(".")
    if not token.isascii() or len(parts) != 3 or parts[0] != TOKEN_VERSION:
        raise ApprovalInvalid(f"the action request is not a {TOKEN_VERSION} token")
    signed_part = f"{parts[0]}.{parts[1]}"
    try:
        signature = _unb64(parts[2])
    except (binascii.Error, ValueError) as exc:
        raise ApprovalInvalid("the action request's signature is not base64url") from exc
    # Signature first, in constant time: nothing of an unsigned payload is read.
    if not hmac.compare_digest(signature, _mac(key, signed_part)):
        raise ApprovalInvalid("the action request's signature does not verify (tampered?)")
    # Signed by our key, yet decoded as carefully as any input: the key may leak, and a
    # bug that signed a bad value must not become a 500.
    try:
        data = json.loads(_unb64(parts[1]).decode("utf-8"))
    except (binascii.Error, ValueError, RecursionError) as exc:
        raise ApprovalInvalid("the signed action request is not JSON") from exc
    if (
        not isinstance(data, dict)
        or set(data) != _PAYLOAD_KEYS
        or type(data["v"]) is not int
        or data["v"] != 1
    ):
        raise ApprovalInvalid("the signed action request has an unknown shape")
    for name in sorted(_PAYLOAD_KEYS - {"v"}):
        value = data[name]
        if not isinstance(value, str):
            raise ApprovalInvalid(f"the signed action request's {name} is not a string")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ApprovalInvalid(
                f"the signed action request's {name} is not valid Unicode text"
            ) from None
    try:
        expires_at = parse_rfc3339(data["expires_at"], what="expires_at")
    except InvalidInput as exc:
        raise ApprovalInvalid(f"the signed action request has a bad expiry: {exc}") from exc
    request = ActionRequest(
        incident_id=data["incident_id"],
        approval_id=data["approval_id"],
        action=data["action"],
        node=data["node"],
        instance=data["instance"],
        instance_id=data["instance_id"],
        zone=data["zone"],
        project=data["project"],
        expires_at=expires_at,
    )
    if request.expires_at <= now:
        raise ApprovalInvalid(
            f"the action request expired at {format_rfc3339(request.expires_at)}; "
            "nothing was changed"
        )
    return request


def request_id(incident_id: str, target: Target, issued_at: datetime) -> str:
    """Deterministic id of an approval request (replays of the same input agree)."""
    text = "\n".join(
        (incident_id, target.instance, target.instance_id, target.node, format_rfc3339(issued_at))
    )
    return "apr-" + hashlib.sha256(text.encode()).hexdigest()[:20]


# --- who may decide ------------------------------------------------------------------

_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")
_EMAIL = re.compile(r"^[^@\s,]+@[^@\s,]+\.[^@\s,]+$")


#: Optional prefixes that say which platform an approver entry is for.
_APPROVER_PREFIXES = {"slack:": Platform.SLACK, "google-chat:": Platform.GOOGLE_CHAT}


def parse_approvers(raw: str) -> frozenset[str]:
    """``U0123ABC,alice@example.com`` -> the set; ValueError naming a malformed entry.

    A Slack user id is a Slack approver, an email a Google Chat approver; an entry may say
    so with ``slack:`` or ``google-chat:``, and must then have that platform's shape.
    """
    found: set[str] = set()
    for part in raw.split(","):
        name = part.strip()
        if not name:
            continue
        platform = next((p for k, p in _APPROVER_PREFIXES.items() if name.startswith(k)), None)
        bare = name.split(":", 1)[1].strip() if platform else name
        if platform in (None, Platform.SLACK) and _SLACK_USER.match(bare):
            found.add(bare)
        elif platform in (None, Platform.GOOGLE_CHAT) and _EMAIL.match(bare):
            found.add(bare.lower())  # Google Chat emails are case-insensitive
        else:
            raise ValueError(
                f"{name!r} is neither a Slack user id (U0123ABCD) nor an email address"
                + (f" for {platform.value}" if platform else "")
            )
    return frozenset(found)


def is_approver(approvers: Iterable[str], platform: Platform, user: str) -> bool:
    """Each platform's clicks match only its own kind of identity: a Slack click by a
    Slack user id, a Google Chat click by the verified email, never the other's."""
    if not user:
        return False
    if platform is Platform.SLACK:
        return bool(_SLACK_USER.match(user)) and user in set(approvers)
    return bool(_EMAIL.match(user)) and user.lower() in set(approvers)


# --- which node and VM ---------------------------------------------------------------


#: Reads one VM from Compute Engine when the approval is asked for: its facts, or a sentence
#: saying why Compute could not be read. None where live sources are off (a replay).
ComputeRead = Callable[[str, str, str], "ComputeFacts | str"]


@dataclass(frozen=True)
class TargetChoice:
    target: Target | None
    #: Why there is no target (shown in the message instead of the buttons).
    reason: str | None = None


def choose_target(
    diagnosis: Diagnosis,
    signals: Sequence[Signal],
    nodes: Sequence[NodeInfo] = (),
    *,
    cluster: str | None = None,
    repair: RepairPolicy = RepairPolicy.AUTO,
    compute: ComputeRead | None = None,
) -> TargetChoice:
    """The node and VM to isolate for an ``isolate_host`` verdict, or why there is none.

    The repair path (:func:`loopbreaker.approval.repair.choose_path`) is chosen here, from
    what the diagnosis read of the node and what Compute Engine says of its VM now
    (``compute``; its provisioning model decides whether a host repair can take it), so
    the card names what the buttons approve. Without Compute's answer the card names the
    rule the re-check applies.

    The first suspect host (the engine ranks them) and, of its nodes, the one that failed
    last: that is the VM on the bad host now. Zone, project and the numeric instance id
    come from the node object (``providerID``, the ``container.googleapis.com/instance_id``
    annotation) or the incident's own Compute Engine audit entries; a VM whose numeric id
    is unknown gets no approval request, since we could not tell it from its replacement.
    """
    if diagnosis.remediation.path is not RemediationPath.ISOLATE_HOST:
        return TargetChoice(None)
    if not diagnosis.suspect_hosts:
        return TargetChoice(None, "the diagnosis names no suspect host")
    suspect = diagnosis.suspect_hosts[0]
    if suspect.episodes:
        node = max(suspect.episodes, key=lambda e: (e.start, e.node)).node
    elif suspect.nodes:
        node = suspect.nodes[-1]
    else:
        return TargetChoice(None, f"no node is known on host {suspect.host}")
    info = next((n for n in nodes if n.name == node), None)
    instance = (info.instance if info else None) or node
    about = [s for s in signals if instance in (s.instance, s.node)]
    instance_id = (info.instance_id if info else None) or next(
        (s.instance_id for s in reversed(about) if s.instance_id), None
    )
    zone = (
        (info.zone if info else None)
        or suspect.zone
        or next((s.zone for s in reversed(about) if s.zone), None)
    )
    project = (
        (info.project if info else None)
        or next((s.project for s in reversed(about) if s.project), None)
        or diagnosis.context.project
    )
    missing = [name for name, value in (("zone", zone), ("project", project)) if not value]
    if not instance_id or not _NUMERIC_ID.match(instance_id):
        missing.append("numeric instance id")
    if missing:
        return TargetChoice(
            None, f"the {' and '.join(missing)} of VM {instance} could not be resolved"
        )
    assert zone is not None and project is not None and instance_id is not None
    answer: ComputeFacts | str = "live sources are off"
    if repair is RepairPolicy.DELETE:
        answer = "LOOPBREAKER_REPAIR_PATH=delete needs no Compute facts"
    elif compute is not None:
        answer = compute(project, zone, instance)
    facts = HostFacts(
        node,
        machine_type=info.machine_type if info else None,
        version=info.kubelet_version if info else None,
        reservation=info.reservation if info else None,
        spot=info.spot if info else False,
        flex_start=info.flex_start if info else False,
        compute=answer if isinstance(answer, ComputeFacts) else None,
        compute_gap=answer if isinstance(answer, str) else None,
    )
    path = choose_path(repair, facts)
    if path.refusal:
        return TargetChoice(None, path.refusal)
    return TargetChoice(
        Target(
            node=node,
            instance=instance,
            instance_id=instance_id,
            zone=zone,
            project=project,
            physical_host=suspect.host,
            host_known=suspect.host_known,
            node_pool=(info.node_pool if info else None) or suspect.node_pool,
            cluster=cluster or diagnosis.context.cluster or None,
            repair_path=path.path,
            repair_why=path.why,
            fault_reason=fault_reason(suspect.fault_reason),
            fallback_path=path.fallback,
        )
    )


def _enum(kind: type[E], value: object) -> E | None:
    """A stored enum value; None when absent or unknown (a record from another version)."""
    try:
        return kind(value) if isinstance(value, str) and value else None
    except ValueError:
        return None
