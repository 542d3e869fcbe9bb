"""Run loopbreaker on every bundled example, the way a user would from a shell."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = Path(sys.executable).with_name("loopbreaker")


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    shown = " ".join(shlex.quote(a) for a in ["loopbreaker", *argv[1:]])
    print(f"$ {shown}", flush=True)
    return subprocess.run(argv, text=True, capture_output=True, check=False)


def diagnose_scenarios() -> int:
    failures = 0
    for scenario in sorted((HERE / "telemetry").glob("*/scenario.json")):
        spec = json.loads(scenario.read_text())
        ctx = spec["context"]
        argv = [str(CLI), "diagnose"]
        for key in ("project", "location", "cluster", "namespace", "workload", "issue_time"):
            if ctx.get(key):
                argv += [f"--{key.replace('_', '-')}", ctx[key]]
        argv += ["--telemetry", str(scenario.parent.relative_to(Path.cwd()))]
        print(f"\n=== {scenario.parent.name}: {spec.get('description', '')}")
        text = run(argv)
        sys.stdout.write(text.stdout)
        if text.returncode != 0:
            sys.stdout.write(text.stderr)
            failures += 1
            continue
        verdict = json.loads(run([*argv, "--format", "json"]).stdout)
        expected = spec["expect"]["root_cause"]
        mark = "as expected" if verdict["root_cause"] == expected else f"EXPECTED {expected}"
        print(f"--> root_cause {verdict['root_cause']} ({mark})")
        failures += verdict["root_cause"] != expected
    return failures


def replay_storm() -> int:
    events = sorted((HERE / "events").glob("*.jsonl"))
    if not events:
        return 0
    print("\n=== event storm replayed through the same service as the Cloud Function")
    result = run([str(CLI), "replay", *(str(p.relative_to(Path.cwd())) for p in events)])
    sys.stdout.write(result.stdout)
    return int(result.returncode != 0)


def main() -> int:
    failures = diagnose_scenarios() + replay_storm()
    outcome = f"{failures} problem(s)" if failures else "all verdicts as expected"
    print(f"\ndemo finished: {outcome}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
