"""deploy/slack/manifest.yaml asks for exactly the Slack scopes the code's calls need.

The Slack Web API methods are read from the library's source (the method names passed to
``WebClient.api_call`` through ``SlackNotifier._call``, and any ``client.chat_postMessage``
style call), so a new call without its scope in the manifest fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import hcl2
import yaml

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "shared" / "loopbreaker"
MANIFEST = ROOT / "deploy" / "slack" / "manifest.yaml"
MODULE = ROOT / "infra" / "terraform"

#: Slack Web API method => the bot scope it needs (api.slack.com/methods); None: the
#: method's reference says "No scope required" (chat.getPermalink).
SCOPES: dict[str, str | None] = {
    "chat.getPermalink": None,
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.delete": "chat:write",
    "chat.postEphemeral": "chat:write",
    "conversations.info": "channels:read",
    "conversations.join": "channels:join",
    "reactions.add": "reactions:write",
    "users.info": "users:read",
    "users.lookupByEmail": "users:read.email",
    "files.uploadV2": "files:write",
}
_FAMILIES = ("chat", "conversations", "reactions", "users", "files", "views", "pins")
_SDK_METHOD = re.compile(rf"^({'|'.join(_FAMILIES)})_([A-Za-z0-9]+)$")


def slack_methods() -> dict[str, set[str]]:
    """Slack method => the library files that call it."""
    found: dict[str, set[str]] = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            method = None
            name = node.func.attr
            if name in ("_call", "api_call") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    method = first.value
            elif _SDK_METHOD.match(name):
                family, rest = name.split("_", 1)
                method = f"{family}.{rest}"
            if method and method.split(".")[0] in _FAMILIES:
                found.setdefault(method, set()).add(str(path.relative_to(ROOT)))
    return found


def manifest() -> dict:
    loaded = yaml.safe_load(MANIFEST.read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_code_calls_slack_methods_the_scanner_finds() -> None:
    methods = slack_methods()
    # The notifier posts and updates one message per incident.
    assert {"chat.postMessage", "chat.update"} <= set(methods), methods
    unknown = set(methods) - set(SCOPES)
    assert not unknown, f"add the bot scope of {unknown} to SCOPES and the manifest"


def slash_commands_handled() -> bool:
    """on_chat_action answers Slack slash commands (a form with a ``command`` field)."""
    source = (LIBRARY / "app" / "clicks.py").read_text()
    return '"command" not in form' in source


def test_the_manifest_asks_for_exactly_the_scopes_the_calls_need() -> None:
    needed = sorted(
        {scope for method in slack_methods() if (scope := SCOPES[method]) is not None}
        | ({"commands"} if slash_commands_handled() else set())
    )
    scopes = manifest()["oauth_config"]["scopes"]
    assert sorted(scopes["bot"]) == needed
    assert "user" not in scopes, "loopbreaker acts as its bot, never as a user"


def test_clicks_go_to_on_chat_action_and_no_events_are_subscribed() -> None:
    settings = manifest()["settings"]
    interactivity = settings["interactivity"]
    assert interactivity["is_enabled"] is True
    # The stable URL form the module gives on_chat_action (local.function_urls), with the
    # module's default prefix; REGION and PROJECT_ID are replaced before use.
    assert interactivity["request_url"] == (
        "https://REGION-PROJECT_ID.cloudfunctions.net/loopbreaker-on-chat-action"
    )
    with open(MODULE / "main.tf") as handle:
        main = hcl2.load(handle)
    locals_ = {k: v for block in main["locals"] for k, v in block.items()}
    functions = locals_["functions"]
    assert functions["on_chat_action"]["name"] == '"on-chat-action"'
    with open(MODULE / "variables.tf") as handle:
        variables = {k: v for block in hcl2.load(handle)["variable"] for k, v in block.items()}
    assert variables['"prefix"']["default"] == '"loopbreaker"'
    assert ".cloudfunctions.net/${local.name_prefix}${fn.name}" in locals_["function_urls"]
    # No Events API: the code answers no url_verification and reads no event_callback, so
    # an event subscription would not even verify.
    source = "\n".join(p.read_text() for p in LIBRARY.rglob("*.py"))
    assert "url_verification" not in source and "event_callback" not in source
    assert "event_subscriptions" not in settings
    assert settings["socket_mode_enabled"] is False
    assert manifest()["features"]["bot_user"]["display_name"]


def test_the_slash_command_goes_to_on_chat_action() -> None:
    assert slash_commands_handled()
    [command] = manifest()["features"]["slash_commands"]
    assert command["command"] == "/loopbreaker"
    assert command["url"] == manifest()["settings"]["interactivity"]["request_url"]


def test_the_terraform_output_renders_this_manifest_with_the_real_url() -> None:
    with open(MODULE / "main.tf") as handle:
        main = hcl2.load(handle)
    locals_ = {k: v for block in main["locals"] for k, v in block.items()}
    assert "deploy/slack/manifest.yaml" in locals_["slack_manifest_file"]
    rendered = locals_["slack_app_manifest"]
    assert 'request_url = local.function_urls["on_chat_action"]' in rendered
    with open(MODULE / "outputs.tf") as handle:
        outputs = {k: v for block in hcl2.load(handle)["output"] for k, v in block.items()}
    assert "yamlencode(local.slack_app_manifest)" in outputs['"slack_app_manifest"']["value"]
