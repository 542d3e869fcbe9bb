"""The README states contracts; these checks keep it in step with the code."""

from __future__ import annotations

from pathlib import Path

from loopbreaker.app.settings import markdown_table
from loopbreaker.model import RemediationPath, RootCause, SignalKind

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_quick_start_is_the_two_commands() -> None:
    quick = README.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in quick.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"]


def test_settings_table_matches_the_settings_module() -> None:
    assert markdown_table().strip() in README


def test_every_root_cause_path_and_signal_kind_is_documented() -> None:
    for name in [*RootCause, *RemediationPath, *SignalKind]:
        assert f"`{name.value}`" in README, name
