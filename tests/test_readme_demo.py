"""What README.md says `make demo` shows and needs, against what examples/demo.py does.

The figures (diagnoses, deliveries, incidents, signals) come from running the demo's own
commands through the CLI; the whole demo (a minute, emulators) is not run here.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from loopbreaker.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DEMO_FILE = ROOT / "examples" / "demo.py"


def demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("loopbreaker_demo", DEMO_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def try_it() -> str:
    text = README.read_text(encoding="utf-8")
    return " ".join(text.split("## Try it", 1)[1].split("\n## ", 1)[0].split())


def stated(pattern: str) -> tuple[int, ...]:
    match = re.search(pattern, try_it())
    assert match, f"README.md's Try it no longer says: {pattern}"
    return tuple(int(g) for g in match.groups())


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out


def test_the_number_of_diagnoses_is_the_number_of_scenarios() -> None:
    assert stated(r"\*\*(\d+) diagnoses\.\*\*") == (len(demo().scenarios()),)


def _number(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    assert match, (pattern, text)
    return int(match.group(1))


def test_the_storm_figures_are_the_replay_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    files = [str(p.relative_to(ROOT)) for p in demo().storm_files()]
    out = run(["replay", *files], capsys)
    deliveries = _number(r"Replayed (\d+) deliveries", out)
    incidents = _number(r"(?m)^Incidents: (\d+)", out)
    kinds: dict[str, int] = {}
    for counts in re.findall(r": \d+ signals \(([^)]*)\)", out):
        for number, kind in re.findall(r"(\d+) (\w+)", counts):
            kinds[kind] = kinds.get(kind, 0) + int(number)
    assert stated(r"storm of (\d+) log-sink deliveries") == (deliveries,)
    assert stated(r"\((\d+) preemptions, (\d+) NCCL timeouts") == (
        kinds["preemption"],
        kinds["nccl_timeout"],
    )
    assert stated(r"(\d+) incidents for (\d+) failure signals") == (incidents, sum(kinds.values()))


def test_the_requirements_are_what_the_demo_starts() -> None:
    """Python 3.11, and the Pub/Sub emulator (gcloud, Java) the chat-ops step starts."""
    source = DEMO_FILE.read_text(encoding="utf-8")
    text = try_it()
    assert "start_pubsub_emulator" in source
    assert "Python 3.11" in text and "pubsub-emulator" in text and "Java" in text
    assert "needs only" not in text
    assert text.count("needs Python") == 1


def test_the_demo_shows_one_json_verdict_shortened(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = demo()
    scenario = ROOT / "examples" / "telemetry" / module.JSON_SHOWN / "scenario.json"
    assert scenario in module.scenarios()
    context = json.loads(scenario.read_text())["context"]
    argv = ["diagnose", "--telemetry", str(scenario.parent.relative_to(ROOT)), "--format", "json"]
    for key in ("project", "location", "cluster", "namespace", "workload", "issue_time"):
        argv += [f"--{key.replace('_', '-')}", context[key]]
    monkeypatch.chdir(ROOT)
    full = run(argv, capsys)
    verdict = json.loads(full)
    short = json.loads(module.shortened(verdict))
    assert list(short) == list(verdict)
    assert short["root_cause"] == verdict["root_cause"] == "faulty_host"
    assert short["steps"] == f"… {len(verdict['steps'])} item(s)"
    shown = module.shortened(verdict).splitlines()
    assert len(shown) < 30 and len(shown) * 5 < len(json.dumps(verdict, indent=2).splitlines())
