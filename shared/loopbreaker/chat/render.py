"""Lay a Notification out as a Slack Block Kit message or a Google Chat card v2 (pure).

Every text is clipped to the platform's documented limit (Slack Block Kit reference;
Google Chat message size), so a long ticket draft or query never gets a message
refused. Buttons appear only when the notification carries an approval prompt: Slack's
Approve has a confirmation dialog naming node, VM and physical host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopbreaker.approval.requests import APPROVE_ACTION, REJECT_ACTION
from loopbreaker.chat.notify import ApprovalPrompt, Notification

#: Slack Block Kit limits (characters).
SLACK_HEADER = 150
SLACK_SECTION = 3000
SLACK_FIELD = 2000
SLACK_FIELDS = 10
SLACK_BUTTON_TEXT = 75
SLACK_BUTTON_VALUE = 2000
SLACK_CONFIRM_TITLE = 100
SLACK_CONFIRM_TEXT = 300
SLACK_CONFIRM_BUTTON = 30
SLACK_CONTEXT = 2000
SLACK_BLOCKS = 50
#: The fallback ``text`` of chat.postMessage; Slack truncates beyond 40,000 and advises 4,000.
SLACK_TEXT = 3000
#: Google Chat: a whole message is at most 32,000 bytes; we keep every paragraph short.
CHAT_MESSAGE_BYTES = 32_000
CHAT_PARAGRAPH = 2000
CHAT_TITLE = 200

ACTIONS_BLOCK_ID = "remediation_actions"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- Slack ---------------------------------------------------------------------------


def _mrkdwn_escape(text: str) -> str:
    # Slack's three control characters; everything else is literal.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, SLACK_SECTION)}}


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": clip(text, limit), "emoji": False}


def slack_message(n: Notification, link: str | None = None) -> dict[str, Any]:
    """``{"text", "blocks"}`` for chat.postMessage / chat.update; ``link``: the permalink of
    the message of the incident this one was merged into."""
    e = _mrkdwn_escape
    blocks: list[dict[str, Any]] = [{"type": "header", "text": _plain(n.title, SLACK_HEADER)}]
    if n.merged_into:
        held = n.merged_into.get("incident", "")
        title = n.merged_into.get("title", "")
        label = n.merged_into.get("label", "Merged into")
        named = f"<{link}|{e(held)}>" if link else f"`{e(held)}`"
        blocks.append(_section(f"*{e(label)} {named}*: {e(title)}"))
    if n.banner:
        blocks.append(_section(f":double_vertical_bar: *{e(n.banner)}*"))
    if n.verdict:
        blocks.append(_section(f"*{e(n.verdict)}*\n{e(n.summary)}"))
    else:
        blocks.append(_section(e(n.text)))
    if n.facts:
        blocks.append(
            {
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": clip(f"*{e(label)}*\n{e(value)}", SLACK_FIELD)}
                    for label, value in n.facts[:SLACK_FIELDS]
                ],
            }
        )
    if n.hosts:
        rows = [
            f"• `{e(r['host'])}`: {e(r['nodes'])}, {e(r['failures'])} failure(s)"
            + (f", {e(r['zone'])}" if r.get("zone") else "")
            + (f", last {e(r['last_failure'])}" if r.get("last_failure") else "")
            + (f", {e(r['gpu_faults'])}" if r.get("gpu_faults") else "")
            + (f", {e(r['health'])}" if r.get("health") else "")
            for r in n.hosts
        ]
        blocks.append(_section("*Hosts and nodes*\n" + "\n".join(rows)))
    if n.excerpts:
        body = "\n".join(clip(x, 300) for x in n.excerpts).replace("```", "'''")
        blocks.append(_section(f"*Key log lines*\n```{e(body)}```"))
    if n.queries:
        body = "\n".join(n.queries).replace("```", "'''")
        blocks.append(_section(f"*Queries*\n```{e(body)}```"))
    if n.ticket:
        blocks.append(
            _section(
                f"*Support ticket draft*: {e(str(n.ticket.get('title', '')))}\n"
                f"{e(str(n.ticket.get('summary', '')))}"
            )
        )
    if n.recommendations and n.approval is None:
        blocks.append(
            _section("*Recommended*\n" + "\n".join(f"• {e(r)}" for r in n.recommendations))
        )
    if n.remediation:
        body = "\n".join(e(line) for line in n.remediation[1:])
        blocks.append(_section(f"*{e(n.remediation[0])}*\n{body}"))
    if n.verification:
        body = "\n".join(e(line) for line in n.verification[1:])
        blocks.append(_section(f"*{e(n.verification[0])}*\n{body}".rstrip()))
    if n.approval_note:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": clip(e(n.approval_note), SLACK_CONTEXT)}],
            }
        )
    if n.approval is not None:
        blocks.append(_slack_actions(n.approval))
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": clip(f"loopbreaker incident `{n.incident_id}` · {n.state}", 200),
                }
            ],
        }
    )
    if len(blocks) > SLACK_BLOCKS:  # cannot happen with the sections above; keep the buttons
        blocks = blocks[: SLACK_BLOCKS - 2] + blocks[-2:]
    text = f"{n.banner}\n{n.title}\n{n.text}" if n.banner else f"{n.title}\n{n.text}"
    return {"text": clip(text, SLACK_TEXT), "blocks": blocks}


def _slack_actions(prompt: ApprovalPrompt) -> dict[str, Any]:
    if len(prompt.token) > SLACK_BUTTON_VALUE:
        raise ValueError(f"action request of {len(prompt.token)} characters is too long")
    e = _mrkdwn_escape
    confirm_text = e(prompt.what) or (
        f"Cordon and drain *{e(prompt.node)}*, then delete VM *{e(prompt.instance)}* "
        f"(id {e(prompt.instance_id)}) on host `{e(prompt.physical_host)}`."
    )
    return {
        "type": "actions",
        "block_id": ACTIONS_BLOCK_ID,
        "elements": [
            {
                "type": "button",
                "action_id": APPROVE_ACTION,
                "text": _plain(prompt.label, SLACK_BUTTON_TEXT),
                "style": "danger",
                "value": prompt.token,
                "confirm": {
                    "title": _plain(f"Isolate host of {prompt.node}?", SLACK_CONFIRM_TITLE),
                    "text": {"type": "mrkdwn", "text": clip(confirm_text, SLACK_CONFIRM_TEXT)},
                    "confirm": _plain("Approve", SLACK_CONFIRM_BUTTON),
                    "deny": _plain("Cancel", SLACK_CONFIRM_BUTTON),
                    "style": "danger",
                },
            },
            {
                "type": "button",
                "action_id": REJECT_ACTION,
                "text": _plain("Reject", SLACK_BUTTON_TEXT),
                "value": prompt.token,
            },
        ],
    }


# --- Google Chat ---------------------------------------------------------------------


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _paragraph(text: str) -> dict[str, Any]:
    return {"textParagraph": {"text": clip(text, CHAT_PARAGRAPH)}}


def google_chat_message(n: Notification) -> dict[str, Any]:
    """``{"text", "cardsV2"}`` for an incoming webhook or ``spaces.messages``."""
    h = _html
    widgets: list[dict[str, Any]] = []
    if n.merged_into:
        held, title = n.merged_into.get("incident", ""), n.merged_into.get("title", "")
        name = n.merged_into.get("message")
        label = n.merged_into.get("label", "Merged into")
        where = f" (message {h(name)})" if name else ""
        widgets.append(_paragraph(f"<b>{h(label)} {h(held)}</b>{where}: {h(title)}"))
    if n.banner:
        widgets.append(_paragraph(f"<b>⏸ {h(n.banner)}</b>"))
    if n.verdict:
        widgets.append(_paragraph(f"<b>{h(n.verdict)}</b><br>{h(n.summary)}"))
    else:
        widgets.append(_paragraph(h(n.text).replace("\n", "<br>")))
    for label, value in n.facts:
        widgets.append(
            {"decoratedText": {"topLabel": clip(label, 100), "text": clip(h(value), 500)}}
        )
    sections: list[dict[str, Any]] = [{"widgets": widgets}]
    if n.hosts:
        rows = [
            f"<b>{h(r['host'])}</b>: {h(r['nodes'])}, {h(r['failures'])} failure(s)"
            + (f", {h(r['zone'])}" if r.get("zone") else "")
            + (f", {h(r['gpu_faults'])}" if r.get("gpu_faults") else "")
            + (f", {h(r['health'])}" if r.get("health") else "")
            for r in n.hosts
        ]
        sections.append(_chat_section("Hosts and nodes", "<br>".join(rows)))
    if n.excerpts:
        sections.append(
            _chat_section("Key log lines", "<br>".join(h(clip(x, 300)) for x in n.excerpts))
        )
    if n.queries:
        sections.append(_chat_section("Queries", "<br>".join(h(q) for q in n.queries)))
    if n.ticket:
        title, summary = str(n.ticket.get("title", "")), str(n.ticket.get("summary", ""))
        sections.append(_chat_section("Support ticket draft", f"<b>{h(title)}</b><br>{h(summary)}"))
    if n.recommendations and n.approval is None:
        sections.append(
            _chat_section("Recommended", "<br>".join(f"• {h(r)}" for r in n.recommendations))
        )
    if n.remediation:
        lines = "<br>".join(h(line) for line in n.remediation[1:])
        sections.append(_chat_section(n.remediation[0], lines))
    if n.verification:
        body = "<br>".join(h(line) for line in n.verification[1:]) or h(n.verification[0])
        sections.append(_chat_section(clip(n.verification[0], 100), body))
    if n.approval_note:
        sections.append(_chat_section("Approval", h(n.approval_note)))
    if n.approval is not None:
        sections.append(_chat_buttons(n.approval))
    message = {
        "text": clip(
            f"{n.banner}\n{n.title}\n{n.text}" if n.banner else f"{n.title}\n{n.text}", 4000
        ),
        "cardsV2": [
            {
                "cardId": f"incident-{n.incident_id}",
                "card": {
                    "header": {
                        "title": clip(n.title, CHAT_TITLE),
                        "subtitle": clip(f"loopbreaker incident {n.incident_id} · {n.state}", 200),
                    },
                    "sections": sections,
                },
            }
        ],
    }
    return message


def _chat_section(header: str, html: str) -> dict[str, Any]:
    return {"header": header, "widgets": [_paragraph(html)]}


def _chat_buttons(prompt: ApprovalPrompt) -> dict[str, Any]:
    h = _html
    what = (
        f"Approve: {h(prompt.what)} Valid until {h(prompt.expires_at)}."
        if prompt.what
        else f"Approve cordons and drains <b>{h(prompt.node)}</b>, then deletes VM "
        f"<b>{h(prompt.instance)}</b> (id {h(prompt.instance_id)}) on host "
        f"<b>{h(prompt.physical_host)}</b>. Valid until {h(prompt.expires_at)}."
    )
    parameters = [{"key": "action_request", "value": prompt.token}]
    return {
        "header": "Approval",
        "widgets": [
            _paragraph(what),
            {
                "buttonList": {
                    "buttons": [
                        {
                            "text": "Approve",
                            "onClick": {
                                "action": {"function": APPROVE_ACTION, "parameters": parameters}
                            },
                        },
                        {
                            "text": "Reject",
                            "onClick": {
                                "action": {"function": REJECT_ACTION, "parameters": parameters}
                            },
                        },
                    ]
                }
            },
        ],
    }


def slack_thread(where: Mapping[str, str] | None) -> tuple[str, str] | None:
    """(channel, ts) of an incident's Slack message, when it has one."""
    if where and where.get("platform") == "slack" and where.get("channel") and where.get("ts"):
        return where["channel"], where["ts"]
    return None
