"""``loopbreaker incidents list|show`` through the CLI, on a store the responder filled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import chatkit as K
import pytest
from fakes import FakeClock, FakeNotifier, FakeQueue

from loopbreaker.app.bootstrap import build_chat_actions
from loopbreaker.cli.main import main
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.sqlite import SqliteStore


@pytest.fixture(scope="module")
def approved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Incident]:
    """The faulty-host store after an approval through on_chat_action's service."""
    path = tmp_path_factory.mktemp("cli") / "incidents.sqlite"
    incident = K.make_faulty_store(path)
    store = SqliteStore(path)
    service = build_chat_actions(
        K.chat_settings(),
        store=store,
        queue=FakeQueue(),
        notifier=FakeNotifier(),
        clock=FakeClock(K.click_time(incident)),
    )
    headers, body = K.slack_request(K.slack_payload(K.token_of(incident)), K.click_time(incident))
    assert service.handle(headers, body).status == 200
    store.close()
    return path, incident


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_names_state_key_cluster_counts_and_approval(
    approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str]
) -> None:
    path, incident = approved
    code, out, _ = run(capsys, "incidents", "list", "--store", str(path), "--format", "json")
    assert code == 0
    found = json.loads(out)["incidents"]
    # The workload's own incident (its pods' FailedScheduling Events) asks for nothing.
    assert sorted(i["state"] for i in found) == ["approved", "diagnosed"]
    [item] = [i for i in found if i["id"] == incident.id]
    assert item["state"] == "approved"
    assert item["key"] == str(incident.key) and item["cluster"] == "tpu-cluster-prod"
    assert item["counts"] == dict(sorted(incident.counts.items()))
    assert item["root_cause"] == "faulty_host" and item["remediation_path"] == "isolate_host"
    approval: dict[str, Any] = item["approval"]
    assert (approval["decision"], approval["by"], approval["platform"]) == (
        "approved",
        K.APPROVER,
        "slack",
    )
    assert approval["at"] and approval["published_id"] == "fake-1"


@pytest.mark.parametrize(("state", "count"), [("approved", 1), ("awaiting_approval", 0)])
def test_list_filters_by_state(
    approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str], state: str, count: int
) -> None:
    path, _ = approved
    code, out, _ = run(
        capsys,
        "incidents",
        "list",
        "--store",
        f"sqlite:{path}",
        "--state",
        state,
        "--format",
        "json",
    )
    assert code == 0 and len(json.loads(out)["incidents"]) == count


def test_show_json_has_the_diagnosis_target_approval_and_audit_trail(
    approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str]
) -> None:
    path, incident = approved
    code, out, _ = run(
        capsys, "incidents", "show", incident.id, "--store", str(path), "--format", "json"
    )
    assert code == 0
    shown = json.loads(out)
    assert shown["diagnosis"]["target"]["instance_id"] == "5464165239889847435"
    assert (
        shown["diagnosis"]["ticket_draft"]["physical_host"]
        == shown["approval"]["target"]["physical_host"]
    )
    assert shown["approval_request"] is None and shown["approval"]["by"] == K.APPROVER
    states = [(a["from"], a["to"]) for a in shown["audit"]]
    assert states[0] == (None, "open") and ("awaiting_approval", "approved") in states
    assert all({"at", "actor", "from", "to", "note"} <= set(a) for a in shown["audit"])


def test_show_text_reads_like_a_report(
    approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str]
) -> None:
    path, incident = approved
    code, out, _ = run(capsys, "incidents", "show", incident.id, "--store", str(path))
    assert code == 0
    assert f"Incident {incident.id}: approved" in out
    assert "approval: approved by alice (U0APPROVER) via slack" in out
    assert "audit trail:" in out and "awaiting_approval -> approved" in out


def test_an_unknown_id_exits_2_naming_it(
    approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = approved
    code, out, err = run(capsys, "incidents", "show", "inc-nope", "--store", str(path))
    assert code == 2 and out == "" and "no incident 'inc-nope'" in err


def test_a_missing_store_file_exits_2_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.sqlite"
    code, _, err = run(capsys, "incidents", "list", "--store", str(missing))
    assert code == 2 and "no incident store" in err and not missing.exists()


def test_an_unknown_state_exits_2(
    approved: tuple[Path, Incident], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = approved
    with pytest.raises(SystemExit) as exited:
        main(["incidents", "list", "--store", str(path), "--state", "happy"])
    assert exited.value.code == 2 and "invalid choice: 'happy'" in capsys.readouterr().err
