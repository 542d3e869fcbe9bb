"""``LOOPBREAKER_ROUTES``: the route file (its path, or the YAML itself), parsed and checked.

A route file that cannot be used is refused at start with one line naming the setting and
the problem: YAML that does not parse, a missing ``default``, an unknown key, an unknown
cause, a channel or space that is not an id, or a destination the notifier cannot reach.

    routes:
      - name: team-vision
        match: {projects: [ml-prod], namespaces: [vision-*], causes: [out_of_memory]}
        slack_channel: C0VISION01
        approvers: [U0VISIONLEAD]
    default:
      name: platform
      slack_channel: C0PLATFORM1
      approvers: [U0ONCALL01, alice@example.com]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopbreaker.approval.requests import parse_approvers
from loopbreaker.errors import ConfigError
from loopbreaker.incidents.routes import DEFAULT_NAME, MATCH_KEYS, Route, Routes
from loopbreaker.model import RootCause

NAME = "LOOPBREAKER_ROUTES"
#: A route file is small; anything larger is a mistake (a log pasted in).
MAX_BYTES = 256 * 1024
_TOP_KEYS = ("routes", "default")
_ROUTE_KEYS = ("name", "match", "slack_channel", "google_chat_space", "approvers")
_ROUTE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
#: Slack conversation ids: C (channel), G (private channel, legacy), D (direct message).
_SLACK_CHANNEL = re.compile(r"^[CGD][A-Z0-9]{6,}$")
_SPACE = re.compile(r"^spaces/[A-Za-z0-9_-]+$")
_CAUSES = tuple(c.value for c in RootCause)


def parse_routes(value: str, *, notifier: str, chat_webhook: bool = False) -> Routes:
    """The routes ``value`` holds (a path, or YAML when it has a ``:`` or a newline).

    ``notifier`` is ``LOOPBREAKER_NOTIFIER``: a Slack notifier cannot post to a Google Chat
    space, and an incoming Chat webhook (``chat_webhook``) only to its own space."""
    inline = ":" in value or "\n" in value
    if inline and len(value.encode()) > MAX_BYTES:
        raise _bad(f"larger than {MAX_BYTES} bytes")
    text = value if inline else _read(value)
    document = _yaml(text)
    if not isinstance(document, Mapping):
        raise _bad("expected a mapping with routes and default")
    _known(document, _TOP_KEYS, "the file")
    if "default" not in document or document["default"] is None:
        raise _bad("no default route: add 'default:' with at least a name or a channel")
    raw_routes = document.get("routes") or []
    if not isinstance(raw_routes, list):
        raise _bad("'routes' must be a list of routes")
    routes = tuple(
        _route(r, f"route {i + 1}", notifier, chat_webhook) for i, r in enumerate(raw_routes)
    )
    default = _route(document["default"], "default", notifier, chat_webhook, default=True)
    names = [r.name for r in (*routes, default)]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _bad(f"route name {twice[0]!r} is used twice")
    return Routes(routes, default)


def _bad(problem: str) -> ConfigError:
    return ConfigError(f"{NAME}: {problem}")


def _read(path: str) -> str:
    file = Path(path).expanduser()
    try:
        if file.stat().st_size > MAX_BYTES:
            raise _bad(f"{path}: larger than {MAX_BYTES} bytes")
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(f"{path}: not UTF-8 text") from exc
    except OSError as exc:
        raise _bad(f"cannot read the route file {path}: {exc.strerror or exc}") from exc


def _yaml(text: str) -> Any:
    import yaml  # only when routes are set: the cold start of most deployments skips it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise _bad(f"not valid YAML{where}: {problem}") from None


def _known(mapping: Mapping[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in mapping:
        if key not in allowed:
            raise _bad(f"{where}: unknown key {key!r} (expected {', '.join(allowed)})")


def _strings(value: Any, what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
        raise _bad(f"{what}: expected a list of strings")
    return tuple(i.strip() for i in items)


def _route(
    raw: Any, where: str, notifier: str, chat_webhook: bool, *, default: bool = False
) -> Route:
    if not isinstance(raw, Mapping):
        raise _bad(f"{where}: expected a mapping")
    _known(raw, _ROUTE_KEYS, where)
    name = raw.get("name", DEFAULT_NAME if default else None)
    if not isinstance(name, str) or not _ROUTE_NAME.match(name):
        raise _bad(f"{where}: 'name' must be lowercase letters, digits, '.', '_' or '-'")
    where = f"route {name}"
    if default and raw.get("match"):
        raise _bad(f"{where}: the default route matches everything; it takes no 'match'")
    match = raw.get("match") or {}
    if not isinstance(match, Mapping):
        raise _bad(f"{where}: 'match' must be a mapping")
    _known(match, MATCH_KEYS, f"{where} match")
    globs = {k: _strings(match[k], f"{where} match {k}") for k in MATCH_KEYS if k in match}
    causes = globs.pop("causes", ())
    for cause in causes:
        if cause not in _CAUSES:
            raise _bad(f"{where}: unknown cause {cause!r} (one of {', '.join(_CAUSES)})")
    channel = _id(raw, "slack_channel", _SLACK_CHANNEL, where, "a Slack channel id (C0123ABCD)")
    space = _id(raw, "google_chat_space", _SPACE, where, "a Google Chat space (spaces/NAME)")
    if channel and space:
        raise _bad(f"{where}: name slack_channel or google_chat_space, not both")
    if space and notifier == "slack" or channel and notifier == "google-chat":
        raise _bad(
            f"{where}: names {'a Google Chat space' if space else 'a Slack channel'} "
            f"but LOOPBREAKER_NOTIFIER is {notifier}"
        )
    if space and chat_webhook:
        raise _bad(
            f"{where}: an incoming Google Chat webhook posts to its own space only; "
            "set LOOPBREAKER_GOOGLE_CHAT_SPACE to route to spaces"
        )
    if not default and not (channel or space) and notifier in ("slack", "google-chat"):
        raise _bad(f"{where}: names no slack_channel or google_chat_space")
    approvers = raw.get("approvers")
    if approvers is not None and not isinstance(approvers, str):
        approvers = ",".join(_strings(approvers, f"{where} approvers"))
    try:
        who = parse_approvers(approvers or "")
    except ValueError as exc:
        raise _bad(f"{where} approvers: {exc}") from None
    return Route(
        name=name,
        projects=globs.get("projects", ()),
        clusters=globs.get("clusters", ()),
        namespaces=globs.get("namespaces", ()),
        workloads=globs.get("workloads", ()),
        causes=frozenset(causes),
        slack_channel=channel,
        google_chat_space=space,
        approvers=who,
    )


def _id(
    raw: Mapping[str, Any], key: str, shape: re.Pattern[str], where: str, what: str
) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not shape.match(value.strip()):
        raise _bad(f"{where}: {key} {value!r} is not {what}")
    return value.strip()
