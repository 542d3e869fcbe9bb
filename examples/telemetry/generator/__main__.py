"""The generator's entry point: write every scenario folder and the golden signal fixtures.

Scenario folders go under examples/telemetry, fixtures under tests/data/signals. Each scenario
folder holds::

    scenario.json  description, context and the expected diagnosis
    logs.json      Cloud Logging v2 LogEntry objects as ``gcloud logging read --format=json``
                   prints them (camelCase keys, sorted keys, newest entry first)
    metrics.om     OpenMetrics text, one sample a minute from T-90m to T+35m
    nodes.json     ``kubectl get nodes -o json`` (snapshot at T+35m)
    pods.json      ``kubectl get pods -A -o json`` for the workload's pods (snapshot at T+35m)

and, where a scenario has them, ``jobs.json`` and ``jobsets.json``.

Usage: ``python examples/telemetry/generator [--scenarios-only | --signals-only]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TELEMETRY = Path(__file__).resolve().parent.parent
REPO = TELEMETRY.parent.parent
SIGNALS_DIR = REPO / "tests" / "data" / "signals"

if not __package__:
    # Run as ``python examples/telemetry/generator``: Python put this folder on sys.path, where
    # the package itself cannot be imported; its parent folder can.
    sys.path[0] = str(TELEMETRY)

from generator.builders.scenario import dump  # noqa: E402
from generator.scenarios import SCENARIOS  # noqa: E402
from generator.signals import build_signals  # noqa: E402


def write_scenarios() -> None:
    for build in SCENARIOS:
        sc = build()
        sizes = sc.write(TELEMETRY)
        total = sum(sizes.values())
        print(
            f"{sc.slug:24s} {total / 1024:7.1f} KiB  "
            + "  ".join(f"{k}={v // 1024}K" for k, v in sizes.items())
        )


def write_signals() -> None:
    SIGNALS_DIR.mkdir(parents=True, exist_ok=True)
    fixtures = build_signals()
    for name, body in sorted(fixtures.items()):
        (SIGNALS_DIR / f"{name}.json").write_text(dump(body), encoding="utf-8")
    print(f"{len(fixtures)} signal fixtures -> {SIGNALS_DIR.relative_to(REPO)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scenarios-only", action="store_true")
    group.add_argument("--signals-only", action="store_true")
    args = parser.parse_args()
    if not args.signals_only:
        write_scenarios()
    if not args.scenarios_only:
        write_signals()


main()
