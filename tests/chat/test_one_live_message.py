"""One failure, one live message, in Slack and in Google Chat.

The A3 scenario (``gpu-xid-hardware-twice``) replayed on its live timeline: at the host's
first failure the node-pool incident and the workload's incident each post a message
(``host_error``); at the second, the pool incident asks for approval (``faulty_host``) and
the workload's incident is merged into it. The workload's earlier message is then replaced
in place: it says it was merged, names (and in Slack links) the incident that holds the
failure, and carries no verdict and no buttons. A person scrolling the channel sees one
message that states the verdict and asks for the decision.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
import remedkit as R
import requests
from fakeservers.chat import ChatServer
from fakeservers.slack import SlackServer

from loopbreaker.chat.clients import GoogleChatNotifier, SlackNotifier
from loopbreaker.chat.notify import Notifier
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.replay import run as replay

CHANNEL = "C0LOOPBRK"
SPACE = "AAAAloopbrk"


def run(notifier: Notifier, tmp: Path) -> list[Incident]:
    store_path = tmp / "incidents.sqlite"
    replay.run(
        [R.A3 / "logs.json"],
        settings=K.chat_settings(),
        telemetry=R.A3,
        store_path=store_path,
        notifier=notifier,
    )
    store = SqliteStore(store_path)
    try:
        return store.list_incidents()
    finally:
        store.close()


def holder_and_merged(found: list[Incident]) -> tuple[Incident, Incident]:
    [holder] = [i for i in found if i.approval_request is not None]
    [merged] = [i for i in found if i.linked_to == holder.id]
    # The merged incident had posted before it was merged: there is a message to replace.
    assert merged.chat is not None and holder.chat is not None
    return holder, merged


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    with SlackServer(channels={CHANNEL}) as server:
        yield server


def test_slack_replaces_the_merged_incidents_message_with_a_link_to_the_holder(
    slack: SlackServer, tmp_path: Path
) -> None:
    notifier = SlackNotifier("xoxb-test-token", CHANNEL, base_url=slack.api_url, timeout=2)
    holder, merged = holder_and_merged(run(notifier, tmp_path))
    messages = list(slack.messages.values())
    # Two messages in the channel, one per incident: the merged one was updated in place.
    assert len(messages) == 2
    by_incident = {_slack_incident(m): m for m in messages}
    assert set(by_incident) == {holder.id, merged.id}
    assert merged.chat["ts"] == by_incident[merged.id]["ts"]  # type: ignore[index]
    live = [m for m in messages if _slack_live(m)]
    assert [_slack_incident(m) for m in live] == [holder.id]
    text = _slack_text(by_incident[merged.id])
    assert text.startswith("[merged]")
    # A link to the holder's message, as Slack's chat.getPermalink gave it.
    channel, ts = holder.chat["channel"], holder.chat["ts"]  # type: ignore[index]
    link = f"https://example-team.slack.com/archives/{channel}/p{ts.replace('.', '')}"
    assert f"*Merged into <{link}|{holder.id}>*" in text
    assert ("chat.getPermalink", {"channel": channel, "message_ts": ts}) in slack.calls


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer(spaces={SPACE}) as server:
        yield server


def test_google_chat_replaces_the_merged_incidents_message_naming_the_holder(
    chat: ChatServer, tmp_path: Path
) -> None:
    notifier = GoogleChatNotifier(
        space=f"spaces/{SPACE}", api_url=chat.url, session=requests.Session(), timeout=2
    )
    holder, merged = holder_and_merged(run(notifier, tmp_path))
    messages = list(chat.messages.values())
    assert len(messages) == 2
    by_incident = {_chat_incident(m): m for m in messages}
    assert set(by_incident) == {holder.id, merged.id}
    assert by_incident[merged.id]["name"] == merged.chat["message"]  # type: ignore[index]
    live = [m for m in messages if _chat_live(m)]
    assert [_chat_incident(m) for m in live] == [holder.id]
    card = by_incident[merged.id]["cardsV2"][0]["card"]
    assert card["header"]["title"].startswith("[merged]")
    first = card["sections"][0]["widgets"][0]["textParagraph"]["text"]
    assert first.startswith(f"<b>Merged into {holder.id}</b>")
    assert holder.chat["message"] in first  # type: ignore[index]


# --- what a reader sees ---------------------------------------------------------------


def _slack_text(message: dict[str, Any]) -> str:
    parts = []
    for block in message["blocks"]:
        if block.get("text"):
            parts.append(block["text"]["text"])
        parts += [e["text"] for e in block.get("elements", ()) if "text" in e]
    return "\n".join(str(p) if isinstance(p, str) else str(p.get("text")) for p in parts)


def _slack_incident(message: dict[str, Any]) -> str:
    found = re.search(r"loopbreaker incident `(inc-[0-9a-f]+)`", _slack_text(message))
    assert found, message
    return found.group(1)


def _slack_live(message: dict[str, Any]) -> bool:
    """States a verdict (``cause -> path``) or asks for something (buttons)."""
    asks = any(b["type"] == "actions" for b in message["blocks"])
    return asks or " -> " in _slack_text(message)


def _chat_incident(message: dict[str, Any]) -> str:
    subtitle = message["cardsV2"][0]["card"]["header"]["subtitle"]
    found = re.search(r"loopbreaker incident (inc-[0-9a-f]+)", subtitle)
    assert found, subtitle
    return found.group(1)


def _chat_live(message: dict[str, Any]) -> bool:
    sections = message["cardsV2"][0]["card"]["sections"]
    asks = any("buttonList" in w for s in sections for w in s["widgets"])
    return asks or " -&gt; " in str(sections)
