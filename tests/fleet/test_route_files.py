"""A route file that cannot be used is refused at start: one line naming LOOPBREAKER_ROUTES
and the problem, exit 2, never a traceback; from the CLI and from a Cloud Function alike.
A usable one, given as a path or as the YAML itself, is read the same either way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopbreaker.settings.load import load_settings

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "functions" / "main.py"
CLI = Path(sys.executable).with_name("loopbreaker")
SLACK = {
    "LOOPBREAKER_NOTIFIER": "slack",
    "LOOPBREAKER_SLACK_BOT_TOKEN": "xoxb-test-token",
    "LOOPBREAKER_SLACK_CHANNEL": "C0GLOBAL01",
}
GOOD = """\
routes:
  - name: team-vision
    match: {namespaces: [vision-*], causes: [out_of_memory, application]}
    slack_channel: C0VISION01
    approvers: [U0VISIONLD]
default:
  name: platform
  approvers: [U0ONCALL01, alice@example.com]
"""

BAD = [
    ("routes:\n  - name: [", "not valid YAML at line"),
    ("- just\n- a list\n", "expected a mapping with routes and default"),
    ("routes: []\n", "no default route"),
    ("routes: []\ndefault:\n  name: platform\n  chanel: C0PLATFORM\n", "unknown key 'chanel'"),
    ("routes: []\nfallback: {name: x}\ndefault: {name: platform}\n", "unknown key 'fallback'"),
    (
        "routes:\n  - name: t\n    match: {namespace: [a]}\n    slack_channel: C0TEAM0001\n"
        "default: {name: platform}\n",
        "route t match: unknown key 'namespace'",
    ),
    (
        "routes:\n  - name: t\n    match: {causes: [oom]}\n    slack_channel: C0TEAM0001\n"
        "default: {name: platform}\n",
        "route t: unknown cause 'oom'",
    ),
    ("routes: []\ndefault: {name: platform, slack_channel: '#ml-platform'}\n", "is not a Slack"),
    (
        "routes:\n  - {name: t, google_chat_space: ml-team}\ndefault: {name: platform}\n",
        "route t: google_chat_space 'ml-team' is not a Google Chat space",
    ),
    (
        "routes:\n  - {name: t, google_chat_space: spaces/AAAAteam}\ndefault: {name: platform}\n",
        "names a Google Chat space but LOOPBREAKER_NOTIFIER is slack",
    ),
    ("routes:\n  - {name: t, match: {namespaces: [a]}}\ndefault: {name: p}\n", "names no slack"),
    (
        "routes:\n  - {name: p, slack_channel: C0TEAM0001}\ndefault: {name: p}\n",
        "route name 'p' is used twice",
    ),
    ("routes: []\ndefault: {name: platform, approvers: [bob]}\n", "'bob' is neither"),
    ("routes: []\ndefault: {match: {causes: [capacity]}}\n", "takes no 'match'"),
]


@pytest.mark.parametrize(("text", "problem"), BAD, ids=[p for _, p in BAD])
def test_the_cli_refuses_a_bad_route_file_in_one_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **SLACK, "LOOPBREAKER_ROUTES": text}
    done = subprocess.run(
        [str(CLI), "incidents", "list"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done
    [line] = done.stderr.splitlines()
    assert line.startswith("loopbreaker: error: LOOPBREAKER_ROUTES: ") and problem in line, line


def test_a_cloud_function_with_a_bad_route_file_does_not_start(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text("routes: []\ndefault: {name: platform, slack_channel: general}\n")
    env = {"PATH": "/usr/bin:/bin", **SLACK, "LOOPBREAKER_ROUTES": str(path)}
    code = f"import runpy; runpy.run_path({str(SOURCE)!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    logged = json.loads(line)
    assert logged["severity"] == "CRITICAL"
    assert "LOOPBREAKER_ROUTES: route platform: slack_channel 'general'" in logged["message"]


def test_a_route_file_larger_than_any_real_one_is_refused_unread(tmp_path: Path) -> None:
    # A log pasted in by mistake: refused by its size, given inline or as a file.
    text = "default: {name: platform}\n" + "# pasted\n" * 40_000
    path = tmp_path / "routes.yaml"
    path.write_text(text)
    for value in (text, str(path)):
        with pytest.raises(Exception, match=r"LOOPBREAKER_ROUTES: .*larger than 262144 bytes"):
            load_settings({**SLACK, "LOOPBREAKER_ROUTES": value})


def test_a_missing_route_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"cannot read the route file .*routes\.yaml"):
        load_settings({**SLACK, "LOOPBREAKER_ROUTES": str(tmp_path / "routes.yaml")})


def test_a_path_and_the_yaml_itself_give_the_same_routes(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(GOOD)
    by_path = load_settings({**SLACK, "LOOPBREAKER_ROUTES": str(path)}).chatops.routes
    inline = load_settings({**SLACK, "LOOPBREAKER_ROUTES": GOOD}).chatops.routes
    assert by_path == inline and by_path is not None
    [team] = by_path.routes
    assert (team.name, team.namespaces, team.slack_channel) == (
        "team-vision",
        ("vision-*",),
        "C0VISION01",
    )
    assert team.causes == {"out_of_memory", "application"} and team.approvers == {"U0VISIONLD"}
    # The default names no channel: the global one (LOOPBREAKER_SLACK_CHANNEL) is used.
    assert by_path.default.destination is None
    assert by_path.default.approvers == {"U0ONCALL01", "alice@example.com"}


def test_the_worked_route_file_in_the_docs_is_a_usable_one() -> None:
    text = (ROOT / "docs" / "fleet.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    routes = load_settings({**SLACK, "LOOPBREAKER_ROUTES": block}).chatops.routes
    assert routes is not None
    assert [r.name for r in routes.all()] == ["team-vision", "team-language", "platform"]
