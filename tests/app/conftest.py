"""The fixtures of the click tests: the faulty-host template, certificates, Slack's
response_url server, and a fresh desk per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import chatkit as K
import pytest
from clickdesk import Desk, make_desk
from fakeservers.certs import CertsServer
from fakeservers.slack import SlackServer

from loopbreaker.incidents import Incident


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident]:
    path = tmp_path_factory.mktemp("faulty") / "template.sqlite"
    return path, K.make_faulty_store(path)


@pytest.fixture(scope="module")
def certs() -> Iterator[CertsServer]:
    with CertsServer() as server:
        yield server


@pytest.fixture(scope="module")
def hooks() -> Iterator[SlackServer]:
    """Where the clicks' response_url points: refusals are told there, ephemerally."""
    with SlackServer() as server:
        yield server


@pytest.fixture
def desk(
    template: tuple[Path, Incident], tmp_path: Path, certs: CertsServer, hooks: SlackServer
) -> Iterator[Desk]:
    made = make_desk(
        template,
        tmp_path,
        certs,
        K.chat_settings(
            LOOPBREAKER_GOOGLE_CHAT_CERTS_URL=certs.certs_url,
            LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX=hooks.url + "/actions/",
        ),
        hooks,
    )
    made.posts_before = len(hooks.responses)  # the module's earlier tests, in any order
    yield made
    made.store.close()
