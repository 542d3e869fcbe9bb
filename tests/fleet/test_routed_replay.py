"""Routes through the responder, replayed on the live timeline, into local Slack and Google
Chat servers: each incident lands in the channel its route names, the first match wins, and a
re-diagnosis moves an incident once.

One shared cluster, as the fleet page's example: a bad host (``faulty-host``), a team's OOM
loop (``jobset-oom-killed``, namespace ``llm``) and another team's NCCL hang
(``pytorchjob-nccl-timeout``, namespaces ``nlp-train`` and ``nlp-eval``), moved into the OOM
team's project so that two projects and three namespaces share the routes.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
import requests
from fakeservers.chat import ChatServer
from fakeservers.slack import SlackServer

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.chat.clients import GoogleChatNotifier, SlackNotifier
from loopbreaker.chat.notify import Notifier
from loopbreaker.cli.main import main
from loopbreaker.diagnosis.evidence import TelemetryDirEvidence
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.sqlite import SqliteStore
from loopbreaker.replay import run as replay

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "telemetry"
GLOBAL = "C0GLOBAL01"
CHANNELS = {"team-llm": "C0TEAMLLM1", "team-nlp": "C0TEAMNLP1", "shadowed": "C0SHADOW01"}
# A workload incident diagnosed before its loop shows ("no_restart_loop") is the team's too.
WORKLOAD_CAUSES = "[out_of_memory, gpu_out_of_memory, application, image_pull, no_restart_loop]"


def route_file(destination: str, ids: dict[str, str], default: str) -> str:
    return f"""
routes:
  - name: team-llm
    match: {{projects: [helios-ml-prod], namespaces: [llm], causes: {WORKLOAD_CAUSES}}}
    {destination}: {ids["team-llm"]}
    approvers: [U0TEAMLLM1]
  - name: team-nlp
    match: {{namespaces: ["nlp-*"], causes: [application]}}
    {destination}: {ids["team-nlp"]}
  # Matches what team-nlp matches, and more: reached only for what team-nlp does not take.
  - name: shadowed
    match: {{namespaces: [nlp-train]}}
    {destination}: {ids["shadowed"]}
default:
  name: platform
  {default}
  approvers: [{K.APPROVER}]
"""


def shared_cluster(tmp: Path) -> list[Path]:
    """The three scenarios; the NCCL one moved into the OOM team's project."""
    nccl = tmp / "pytorchjob-nccl-timeout"
    shutil.copytree(EXAMPLES / "pytorchjob-nccl-timeout", nccl)
    for path in nccl.rglob("*"):
        if path.is_file():
            path.write_text(path.read_text().replace("sable-nlp-lab", "helios-ml-prod"))
    return [EXAMPLES / "faulty-host", EXAMPLES / "jobset-oom-killed", nccl]


def replay_all(notifier: Notifier, tmp: Path, routes: str, **env: str) -> list[Incident]:
    settings = K.chat_settings(LOOPBREAKER_ROUTES=routes, **env)
    found: list[Incident] = []
    for n, scenario in enumerate(shared_cluster(tmp)):
        path = tmp / f"incidents-{n}.sqlite"
        replay.run(
            [scenario / "logs.json"],
            settings=settings,
            telemetry=scenario,
            store_path=path,
            notifier=notifier,
        )
        store = SqliteStore(path)
        try:
            found += store.list_incidents()
        finally:
            store.close()
    return found


def by_key(found: list[Incident]) -> dict[str, Incident]:
    return {f"{i.key.scope.value}/{i.key.name}": i for i in found}


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    with SlackServer(channels={GLOBAL, *CHANNELS.values()}) as server:
        yield server


SLACK_ENV = {
    "LOOPBREAKER_NOTIFIER": "slack",
    "LOOPBREAKER_SLACK_BOT_TOKEN": "xoxb-test-token",
    "LOOPBREAKER_SLACK_CHANNEL": GLOBAL,
}


def test_slack_each_incident_lands_in_its_routes_channel_only(
    slack: SlackServer, tmp_path: Path
) -> None:
    notifier = SlackNotifier("xoxb-test-token", GLOBAL, base_url=slack.api_url, timeout=2)
    # The default names no channel: it posts to LOOPBREAKER_SLACK_CHANNEL.
    found = by_key(
        replay_all(notifier, tmp_path, route_file("slack_channel", CHANNELS, ""), **SLACK_ENV)
    )
    routed = {
        key: (i.diagnosis.root_cause if i.diagnosis else None, i.route) for key, i in found.items()
    }
    assert routed == {
        # The bad host: the platform's, its pool incident and the workload's it merged.
        "pool/gke-tpu-cluster-prod-tpu-pool": ("faulty_host", "platform"),
        "workload/default/llama3-70b-training": ("faulty_host", "platform"),
        # The team's OOM loop: the workload's incident, and the node pool's incident whose
        # kernel OOM kills name the team's pods only by uid (resolved from the metrics).
        "workload/llm/mistral-7b-sft": ("out_of_memory", "team-llm"),
        "pool/gke-a3-train-usc1-a3-pool": ("out_of_memory", "team-llm"),
        # First match wins: team-nlp, not the later route that also names nlp-train.
        "workload/nlp-train/bert-ddp": ("application", "team-nlp"),
        # A cause no team route owns, in a team namespace: the default.
        "workload/nlp-eval/roberta-sweep-3": ("unknown", "platform"),
    }
    posted: dict[str, set[str]] = {}
    for message in slack.messages.values():
        posted.setdefault(message["channel"], set()).add(_incident(message))
    ids = {key: i.id for key, i in found.items()}
    assert posted == {
        GLOBAL: {
            ids["pool/gke-tpu-cluster-prod-tpu-pool"],
            ids["workload/default/llama3-70b-training"],
            ids["workload/nlp-eval/roberta-sweep-3"],
        },
        CHANNELS["team-llm"]: {
            ids["workload/llm/mistral-7b-sft"],
            ids["pool/gke-a3-train-usc1-a3-pool"],
        },
        CHANNELS["team-nlp"]: {ids["workload/nlp-train/bert-ddp"]},
    }
    # The host's approval card asks the platform; the team's OOM cards ask no one.
    host = found["pool/gke-tpu-cluster-prod-tpu-pool"]
    assert host.approval_request is not None and "Approve" in _text(slack, host)
    for key in ("workload/llm/mistral-7b-sft", "pool/gke-a3-train-usc1-a3-pool"):
        assert "Route: team-llm" in _text(slack, found[key]) or "team-llm" in _text(
            slack, found[key]
        )


def test_google_chat_routes_to_spaces_through_the_chat_api(tmp_path: Path) -> None:
    spaces = {name: f"spaces/AAAA{name.replace('-', '')}" for name in CHANNELS}
    names = {s.removeprefix("spaces/") for s in spaces.values()} | {"AAAAplatform"}
    with ChatServer(spaces=names) as chat:
        notifier = GoogleChatNotifier(
            space="spaces/AAAAplatform", api_url=chat.url, session=requests.Session(), timeout=2
        )
        env = {
            "LOOPBREAKER_NOTIFIER": "google-chat",
            "LOOPBREAKER_GOOGLE_CHAT_SPACE": "spaces/AAAAplatform",
        }
        routes = route_file("google_chat_space", spaces, "google_chat_space: spaces/AAAAplatform")
        found = by_key(replay_all(notifier, tmp_path, routes, **env))
        where = {name.split("/messages/")[0]: set() for name in chat.messages}
        for name, message in chat.messages.items():
            where[name.split("/messages/")[0]].add(_chat_incident(message))
    ids = {key: i.id for key, i in found.items()}
    assert where["spaces/AAAAteamllm"] == {
        ids["workload/llm/mistral-7b-sft"],
        ids["pool/gke-a3-train-usc1-a3-pool"],
    }
    assert where["spaces/AAAAteamnlp"] == {ids["workload/nlp-train/bert-ddp"]}
    assert ids["pool/gke-tpu-cluster-prod-tpu-pool"] in where["spaces/AAAAplatform"]
    assert "spaces/AAAAshadowed" not in where


def test_a_rediagnosis_moves_an_incident_once_and_points_its_old_message_there(
    slack: SlackServer, tmp_path: Path
) -> None:
    # The A3 host fails twice: host_error at the first failure, faulty_host at the second.
    routes = f"""
routes:
  - name: first-look
    match: {{causes: [host_error]}}
    slack_channel: {CHANNELS["team-llm"]}
default: {{name: platform, slack_channel: {CHANNELS["team-nlp"]}, approvers: [{K.APPROVER}]}}
"""
    notifier = SlackNotifier("xoxb-test-token", GLOBAL, base_url=slack.api_url, timeout=2)
    store = tmp_path / "incidents.sqlite"
    replay.run(
        [EXAMPLES / "gpu-xid-hardware-twice" / "logs.json"],
        settings=K.chat_settings(LOOPBREAKER_ROUTES=routes, **SLACK_ENV),
        telemetry=EXAMPLES / "gpu-xid-hardware-twice",
        store_path=store,
        notifier=notifier,
    )
    opened = SqliteStore(store)
    try:
        [pool] = [i for i in opened.list_incidents() if i.key.scope.value == "pool"]
    finally:
        opened.close()
    assert (pool.diagnosis and pool.diagnosis.root_cause, pool.route) == ("faulty_host", "platform")
    moves = [a.note for a in pool.audit if "route" in a.note]
    assert moves == ["moved from route first-look to route platform"]
    mine = [m for m in slack.messages.values() if _incident(m) == pool.id]
    # One message in each channel: the live one in the platform's, a pointer where it was.
    assert sorted(m["channel"] for m in mine) == sorted(
        [CHANNELS["team-llm"], CHANNELS["team-nlp"]]
    )
    [old] = [m for m in mine if m["channel"] == CHANNELS["team-llm"]]
    [live] = [m for m in mine if m["channel"] == CHANNELS["team-nlp"]]
    assert old["text"].startswith("[moved]") and "see route platform" in old["text"]
    assert "approve" not in str(old.get("blocks")).lower()
    assert live["text"].startswith("[awaiting_approval] faulty_host") and pool.chat == {
        "platform": "slack",
        "channel": CHANNELS["team-nlp"],
        "ts": live["ts"],
    }


def _slack_text(message: dict[str, Any]) -> str:
    parts: list[str] = []
    for block in message["blocks"]:
        if block.get("text"):
            parts.append(str(block["text"]["text"]))
        parts += [str(e["text"]) for e in block.get("elements", ()) if "text" in e]
    return "\n".join(parts)


def _incident(message: dict[str, Any]) -> str:
    """The incident a Slack message is about (its context line names it)."""
    found = re.search(r"loopbreaker incident `(inc-[0-9a-f]+)`", _slack_text(message))
    assert found, message
    return found.group(1)


def _chat_incident(message: dict[str, Any]) -> str:
    subtitle = message["cardsV2"][0]["card"]["header"]["subtitle"]
    found = re.search(r"loopbreaker incident (inc-[0-9a-f]+)", subtitle)
    assert found, subtitle
    return found.group(1)


def _text(slack: SlackServer, incident: Incident) -> str:
    assert incident.chat is not None
    [message] = [m for m in slack.messages.values() if m["ts"] == incident.chat["ts"]]
    return _slack_text(message) + str(message["blocks"])


def test_the_cli_prints_each_incidents_route_and_reports_one_route(
    slack: SlackServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notifier = SlackNotifier("xoxb-test-token", GLOBAL, base_url=slack.api_url, timeout=2)
    found = replay_all(notifier, tmp_path, route_file("slack_channel", CHANNELS, ""), **SLACK_ENV)
    oom_store = str(tmp_path / "incidents-1.sqlite")  # the OOM scenario's incidents
    capsys.readouterr()
    assert main(["incidents", "list", "--store", oom_store]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 and all(
        line.split("  route ")[1].startswith("team-llm") for line in listed
    )
    [pool] = [i for i in found if i.key.scope.value == "pool" and i.key.project == "helios-ml-prod"]
    assert main(["incidents", "show", pool.id, "--store", oom_store]) == 0
    assert "  route:    team-llm" in capsys.readouterr().out.splitlines()
    assert main(["incidents", "show", pool.id, "--store", oom_store, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["route"] == "team-llm"
    # The report's window runs on the wall clock: these incidents are opened by the
    # responder as on_log_entry and on_schedule would, now.
    live = tmp_path / "live.sqlite"
    store = SqliteStore(live)
    settings = K.chat_settings(
        LOOPBREAKER_ROUTES=route_file("slack_channel", CHANNELS, ""),
        LOOPBREAKER_SETTLE_TIME="0s",
        **SLACK_ENV,
    )
    for scenario in (EXAMPLES / "faulty-host", EXAMPLES / "jobset-oom-killed"):
        responder = build_responder(
            settings, store=store, evidence=TelemetryDirEvidence(scenario), notifier=notifier
        )
        for n, entry in enumerate(json.loads((scenario / "logs.json").read_text())):
            responder.handle_entry(f"{scenario.name}-{n}", entry)
        responder.settle()
    routed = Counter(i.route for i in store.list_incidents())
    store.close()
    assert routed["platform"] >= 1 and routed["team-llm"] >= 1 and routed["team-nlp"] == 0
    for route in ("platform", "team-llm", "team-nlp"):
        argv = ["incidents", "report", "--store", str(live), "--since", "1d", "--route", route]
        assert main([*argv, "--format", "json"]) == 0
        figures = json.loads(capsys.readouterr().out)
        assert (figures["route"], figures["incidents"]) == (route, routed[route])
    argv = ["incidents", "report", "--store", str(live), "--since", "1d", "--route", "platform"]
    assert main(argv) == 0
    assert "Route: platform (incidents routed there only)" in capsys.readouterr().out
