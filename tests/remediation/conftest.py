"""Fixtures of the remediation tests: the faulty-host incident approved in chat, once per
module, and a lab of local Kubernetes, Compute and Support servers around a copy of it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
import remedkit as R
from fakes import FakeClock

from loopbreaker.incidents import Incident


@pytest.fixture(scope="module")
def approved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident, dict[str, Any]]:
    path = tmp_path_factory.mktemp("approved") / "template.sqlite"
    incident, request = R.approve_faulty(path)
    return path, incident, request


@pytest.fixture
def lab(approved: tuple[Path, Incident, dict[str, Any]], tmp_path: Path) -> Iterator[R.Lab]:
    path, incident, _ = approved
    assert incident.approval is not None
    clock = FakeClock(incident.approval.at + timedelta(minutes=1))
    with R.lab(K.copy_store(path, tmp_path / "incidents.sqlite"), clock, tmp_path) as made:
        yield made


@pytest.fixture
def request_(approved: tuple[Path, Incident, dict[str, Any]]) -> dict[str, Any]:
    return dict(approved[2])
