"""``loopbreaker replay`` end to end through the installed CLI, plus its file reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopbreaker.replay import reader as replay_reader

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).with_name("loopbreaker")
EVENTS = ROOT / "examples" / "events"
JSONL = EVENTS / "storm.jsonl"
PUSH = EVENTS / "storm.pubsub.json"
# Node-pool events and the Compute Engine audit entries of the same nodes (which name no
# cluster) are keyed by the pool's naming prefix, shared by all its zones.
POOL_KEY = "example-project/-/pool/gke-tpu-cluster-prod-spot-v5e-pool"
JOBSET_KEY = "example-project/tpu-cluster-prod/workload/default/llama3-70b-training"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "replay", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )


def replay_json(*args: str) -> dict[str, Any]:
    done = cli(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("path", [JSONL, PUSH], ids=["log-entries", "push-envelopes"])
def test_the_bundled_storm_gives_one_incident_per_key(path: Path) -> None:
    result = replay_json(str(path))
    assert result["read"] == 353
    assert result["accepted"] == 324  # of which 4 matched no failure signature
    assert result["duplicates"] == 24
    assert result["ignored"] == 4
    assert len(result["rejected"]) == 5
    assert all({"index", "reason"} <= set(r) for r in result["rejected"])
    by_key = {i["key"]: i for i in result["incidents"]}
    assert set(by_key) == {POOL_KEY, JOBSET_KEY}
    pool, jobset = by_key[POOL_KEY], by_key[JOBSET_KEY]
    assert (pool["signal_count"], pool["root_cause"]) == (256, "spot_preemption")
    assert pool["remediation_path"] == "avoid_preemption"
    assert (jobset["signal_count"], jobset["root_cause"]) == (64, "application")
    for incident in result["incidents"]:
        assert incident["cluster_name"] == "tpu-cluster-prod"
        assert incident["state"] == "diagnosed"
        assert incident["diagnoses"] == 1 and incident["notifications"] == 1


def test_rejections_name_the_item_and_the_reason() -> None:
    result = replay_json(str(JSONL))
    reasons = {r["index"]: r["reason"] for r in result["rejected"]}
    assert reasons[40].startswith("not JSON")
    assert "got an array" in reasons[100]
    assert "neither 'resource' nor 'logName'" in reasons[160]
    assert "relative time" in reasons[220]
    assert "'textPayload' must be a string" in reasons[280]


def test_both_files_together_are_one_storm_delivered_twice() -> None:
    result = replay_json(str(JSONL), str(PUSH))
    assert result["read"] == 706 and result["accepted"] == 324 and result["ignored"] == 4
    # The second file delivers every entry again: all but its 5 rejected items are
    # duplicates, the entries that concern no incident included.
    assert result["duplicates"] == 24 + (353 - 5)
    assert len(result["rejected"]) == 10
    assert len(result["incidents"]) == 2


def test_ids_are_deterministic_and_runs_independent() -> None:
    first = replay_json(str(JSONL))
    second = replay_json(str(JSONL))
    assert [i["id"] for i in first["incidents"]] == [i["id"] for i in second["incidents"]]
    assert second["accepted"] == 324  # a fresh temporary store each run


def test_a_kept_store_counts_a_second_replay_as_redelivery(tmp_path: Path) -> None:
    store = tmp_path / "incidents.sqlite"
    replay_json(str(PUSH), "--store", str(store))
    again = replay_json(str(PUSH), "--store", str(store))
    assert again["accepted"] == 0 and again["ignored"] == 0
    assert again["duplicates"] == 353 - 5  # every item but the rejected ones
    assert [i["signal_count"] for i in again["incidents"]] == [256, 64]
    assert all(i["diagnoses"] == 1 for i in again["incidents"])


def test_text_summary_on_stdout_and_nothing_per_entry_on_stderr() -> None:
    done = cli(str(JSONL))
    assert done.returncode == 0
    assert done.stdout.startswith(
        "Replayed 353 deliveries: 324 accepted (4 of them ignored: no failure signature, or "
        "nothing to group by), "
        "24 duplicates, 5 rejected."
    )
    assert POOL_KEY in done.stdout
    # The summary lists the rejections; at the default verbosity no line per entry.
    assert done.stderr == ""


def test_verbose_json_logs_have_one_info_line_per_rejection() -> None:
    done = subprocess.run(
        [str(CLI), "-v", "--log-format", "json", "replay", str(JSONL)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert {line["severity"] for line in lines} <= {"INFO", "WARNING"}
    rejected = [line for line in lines if line.get("event") == "entry_rejected"]
    assert len(rejected) == 5 and {line["severity"] for line in rejected} == {"INFO"}
    assert sum(line.get("event") == "notification" for line in lines) == 2


def test_telemetry_feeds_the_diagnosis() -> None:
    scenarios = sorted((ROOT / "examples" / "telemetry").glob("*/metrics.om"))
    if not scenarios:
        pytest.fail("examples/telemetry/*/metrics.om missing")
    result = replay_json(str(JSONL), "--telemetry", str(scenarios[0].parent))
    assert len(result["incidents"]) == 2
    assert all(i["root_cause"] for i in result["incidents"])


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    done = cli(str(tmp_path / "nope.jsonl"))
    assert done.returncode == 2
    assert "cannot read" in done.stderr


def test_reader_accepts_arrays_single_objects_and_json_lines(tmp_path: Path) -> None:
    array = tmp_path / "a.json"
    array.write_text('[{"a": 1}, {"b": 2}]')
    single = tmp_path / "b.json"
    single.write_text('{\n  "specversion": "1.0"\n}\n')
    lines = tmp_path / "c.jsonl"
    lines.write_text('{"c": 3}\n\nnot json\n{"d": 4}\n')
    empty = tmp_path / "d.jsonl"
    empty.write_text("\n")
    records = list(replay_reader.records([array, single, lines, empty]))
    assert [r[1] for r in records] == [0, 1, 2, 3, 4, 5]
    assert [r[2].rsplit("/", 1)[1] for r in records] == [
        "a.json[0]",
        "a.json[1]",
        "b.json",
        "c.jsonl:1",
        "c.jsonl:3",
        "c.jsonl:4",
    ]
    # The CloudEvent is not a log sink's; the line that is not JSON says so.
    assert [r[0] for r in records] == [
        "delivery",
        "delivery",
        "error",
        "delivery",
        "error",
        "delivery",
    ]
    assert records[2][3].startswith("event type None") and records[4][3].startswith("not JSON")
    assert records[5][3].entry == {"d": 4}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--telemetry", "/nonexistent/telemetry"], "telemetry directory"),
        (["--store", "/proc/nope/incidents.sqlite"], "cannot create the SQLite store"),
        (["--store", "NOT_A_DATABASE"], "file is not a database"),
    ],
)
def test_bad_replay_options_are_bad_input(args: list[str], words: str, tmp_path: Path) -> None:
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("these are notes, not a SQLite file\n" * 100)
    args = [str(not_a_database) if a == "NOT_A_DATABASE" else a for a in args]
    done = cli(str(JSONL), *args)
    assert done.returncode == 2
    assert words in done.stderr
    assert "Traceback" not in done.stderr


def test_a_broken_json_array_is_one_file_level_error(tmp_path: Path) -> None:
    broken = tmp_path / "cut.json"
    broken.write_text(json.dumps([{"a": 1}, {"b": 2}], indent=2)[:-10])
    done = cli(str(broken))
    assert done.returncode == 2
    assert "cut.json: not valid JSON or JSON Lines" in done.stderr


def test_a_regional_pools_storm_from_both_sinks_is_one_incident_with_its_cluster(
    tmp_path: Path,
) -> None:
    # GKE node-pool events name the cluster; Compute Engine audit entries only the VM. The
    # pool is regional: one managed instance group (and name hash) per zone.
    project, cluster, pool = "proj", "clus-x", "spot-pool"
    zones = {"us-east1-b": "aabbccdd", "us-east1-c": "11223344", "us-east1-d": "55667788"}
    lines = []
    for i in range(20):
        zone = sorted(zones)[i % 3]
        group = f"gke-{cluster}-{pool}-{zones[zone]}"
        node, stamp = f"{group}-{i:04x}", f"2026-05-20T08:00:{i:02d}Z"
        lines.append(
            {
                "insertId": f"pool-{i}",
                "logName": f"projects/{project}/logs/container.googleapis.com%2Fnode-pool-events",
                "resource": {
                    "type": "gke_nodepool",
                    "labels": {
                        "project_id": project,
                        "location": "us-east1",
                        "cluster_name": cluster,
                        "node_pool_name": pool,
                    },
                },
                "timestamp": stamp,
                "textPayload": f"PreemptionEvent: Node '{node}' in node pool '{pool}' preempted.",
            }
        )
        lines.append(
            {
                "insertId": f"audit-{i}",
                "logName": f"projects/{project}/logs/cloudaudit.googleapis.com%2Fsystem_event",
                "resource": {
                    "type": "gce_instance",
                    "labels": {"project_id": project, "zone": zone, "instance_id": str(i)},
                },
                "timestamp": stamp,
                "protoPayload": {
                    "methodName": "compute.instances.preempted",
                    "resourceName": f"projects/{project}/zones/{zone}/instances/{node}",
                },
            }
        )
    lines.sort(key=lambda e: e["insertId"].startswith("pool"))  # audit entries first
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = replay_json(str(path))
    assert result["accepted"] == 40
    [incident] = result["incidents"]
    assert incident["key"] == f"{project}/-/pool/gke-{cluster}-{pool}"
    assert incident["cluster_name"] == cluster
    assert incident["signal_count"] == 40 and incident["counts"] == {"preemption": 40}
    assert incident["root_cause"] == "spot_preemption"
    assert incident["diagnoses"] == 1 and incident["notifications"] == 1
    assert cluster in incident["summary"]


def test_a_tfjob_restart_loop_through_the_pipeline_is_its_faulty_host() -> None:
    scenario = ROOT / "examples" / "telemetry" / "tfjob-faulty-host"
    result = replay_json(str(scenario / "logs.json"), "--telemetry", str(scenario))
    causes = {i["key"]: i["root_cause"] for i in result["incidents"]}
    # The job's pods and TFJobRestarting Events name it: the pipeline diagnoses a TFJob.
    assert causes["lumen-vision-prod/a3-vision-usc1/workload/ml-jobs/resnet50-ps"] == "faulty_host"


def test_replay_takes_a_workload_kind_and_refuses_an_unknown_one() -> None:
    assert cli(str(JSONL), "--workload-kind", "pytorchjob").returncode == 0
    done = cli(str(JSONL), "--workload-kind", "mpijob")
    assert done.returncode == 2 and "--workload-kind" in done.stderr


# --- dead letters: the seven payloads of issue 22 among good entries --------------------------


def _dead_letters() -> tuple[list[dict[str, Any]], dict[int, tuple[str, str]]]:
    """A `gcloud pubsub subscriptions pull --format=json` of the dead-letter subscription:
    good sink messages with the seven crash payloads between them. Returns the pulled
    messages and, by index, each bad one's name and the words its rejection must say."""
    from hostile.payloads import host_error_entry, pubsub_message, seven_dead_letters
    from hostile.servers import render

    pulled: list[dict[str, Any]] = []
    bad: dict[int, tuple[str, str]] = {}
    for number, (name, message, words) in enumerate(seven_dead_letters()):
        entry = host_error_entry(f"good-{number}", f"gke-c-dead-1a2b3c4d-{number:04x}", number)
        pulled.append(
            {
                "ackId": f"ack-good-{number}",
                "message": pubsub_message(render(entry), str(900 + number)),
            }
        )
        bad[len(pulled)] = (name, words)
        pulled.append({"ackId": f"ack-{name}", "message": message})
    last = host_error_entry("good-last", "gke-c-dead-1a2b3c4d-00ff", 30)
    pulled.append({"ackId": "ack-good-last", "message": pubsub_message(render(last), "999")})
    return pulled, bad


@pytest.mark.parametrize("layout", ["array", "json-lines"])
def test_a_dead_letter_file_with_the_seven_crash_payloads_is_replayed_to_the_end(
    tmp_path: Path, layout: str
) -> None:
    from hostile.servers import render

    pulled, bad = _dead_letters()
    if layout == "array":
        path = tmp_path / "dead.json"
        path.write_bytes(b"[\n" + b",\n".join(render(p) for p in pulled) + b"\n]\n")
    else:
        path = tmp_path / "dead.jsonl"
        path.write_bytes(b"".join(render(p) + b"\n" for p in pulled))
    result = replay_json(str(path))
    assert result["read"] == len(pulled) == 15
    # Every good entry made it, into the one pool incident they share.
    assert result["accepted"] == 8 and result["duplicates"] == 0
    [incident] = result["incidents"]
    assert incident["signal_count"] == 8 and incident["key"] == "hostile-project/-/pool/gke-c-dead"
    # Each bad one is rejected with its position and what is wrong with it.
    rejected = {r["index"]: r for r in result["rejected"]}
    assert set(rejected) == set(bad)
    for index, (name, words) in bad.items():
        position = f"dead.json[{index}]" if layout == "array" else f"dead.jsonl:{index + 1}"
        assert rejected[index]["source"].endswith(position), (name, rejected[index])
        assert words in rejected[index]["reason"], (name, rejected[index])
    assert result["rejected_total"] == 7 and result["unreadable"] == []


def test_a_file_broken_half_way_is_replayed_up_to_the_break_and_the_next_file_too(
    tmp_path: Path,
) -> None:
    lines = JSONL.read_text().splitlines()
    broken = tmp_path / "broken.json"
    broken.write_text("[" + ",".join(lines[:10]) + ', {"cut')
    done = cli(str(broken), str(PUSH), "--format", "json")
    assert done.returncode == 2
    assert "broken.json: not valid JSON or JSON Lines" in done.stderr
    assert "Traceback" not in done.stderr
    result = json.loads(done.stdout)
    assert result["read"] == 11 + 353
    [unreadable] = result["unreadable"]
    assert unreadable.endswith("(at " + str(broken) + "[10])")
    assert {i["key"] for i in result["incidents"]} == {POOL_KEY, JOBSET_KEY}


def test_a_cloud_storage_sink_directory_is_replayed(tmp_path: Path) -> None:
    good = []
    for line in JSONL.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # the storm's deliberately broken lines
        stamp = entry.get("timestamp") if isinstance(entry, dict) else None
        if isinstance(stamp, str) and stamp[:2] == "20" and isinstance(entry.get("logName"), str):
            good.append(entry)
    by_hour: dict[tuple[str, str], list[str]] = {}
    for entry in good:
        log_id = str(entry["logName"]).rsplit("/", 1)[1]
        key = (log_id, str(entry["timestamp"])[:13])
        by_hour.setdefault(key, []).append(json.dumps(entry))
    for (log_id, hour), lines in by_hour.items():
        day, h = hour.split("T")
        path = tmp_path / log_id / day.replace("-", "/") / f"{h}:00:00_{h}:59:59_S0.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    result = replay_json(str(tmp_path))
    assert result["read"] == len(good)
    assert {i["key"] for i in result["incidents"]} == {POOL_KEY, JOBSET_KEY}


# --- issue 20: a storm of OOM kills in one JobSet -------------------------------------------

OOM_STORM = EVENTS / "oom-storm.jsonl"
OOM_KEY = "example-project/a3-train-usc1/workload/llm/mistral-7b-sft"


def test_a_storm_of_oom_kills_in_one_jobset_is_one_incident_that_asks_no_approval() -> None:
    result = replay_json(str(OOM_STORM))
    assert result["read"] == 57 and result["duplicates"] == 6 and result["rejected"] == []
    # The kubelet's status patches name only the pod. The 16 of the later attempts join
    # the JobSet's incident, which the store knows by then (its deleted pods named it); the
    # first attempt's 8 arrive before anything named it: remembered, counted, no incident.
    assert result["ignored"] == 8 and result["unresolved_pods"] == 8
    [incident] = result["incidents"]
    assert incident["key"] == OOM_KEY
    assert incident["counts"] == {"job_restarting": 3, "oom_killed": 40}
    assert (incident["root_cause"], incident["remediation_path"]) == (
        "out_of_memory",
        "fix_memory",
    )
    # Approval is for isolating a host only: the incident is diagnosed, nothing waits.
    assert incident["requires_approval"] is False
    assert incident["state"] == "diagnosed"
    assert incident["approval"] is None and incident["expires_at"] is None
    assert incident["suspect_hosts"] == []
    assert "container trainer was OOM-killed (limit 160Gi)" in incident["summary"]
    # On the live timeline each of the three restarts (11 minutes apart) settles and is
    # diagnosed before the next one: one diagnosis and one (changed) message each.
    restarts = OOM_STORM.read_text().count('"reason":"Restarting"')
    assert restarts == 3
    assert incident["diagnoses"] == restarts and incident["notifications"] == restarts


# --- GPU and accelerator faults through the pipeline (issue 27) ---------------------------

GPU_SCENARIOS = [
    "gpu-xid-application-every-rank",
    "gpu-xid-hardware-twice",
    "gpu-xid-hardware-once",
    "gpu-cuda-out-of-memory",
    "tpu-hbm-out-of-memory",
    "gpu-xid79-node-stays-ready",
]


@pytest.mark.parametrize("name", GPU_SCENARIOS)
def test_a_gpu_fault_loop_through_the_pipeline_gets_the_offline_verdict(name: str) -> None:
    scenario = ROOT / "examples" / "telemetry" / name
    spec = json.loads((scenario / "scenario.json").read_text())
    ctx, expect = spec["context"], spec["expect"]
    result = replay_json(str(scenario / "logs.json"), "--telemetry", str(scenario))
    key = f"{ctx['project']}/{ctx['cluster']}/workload/{ctx['namespace']}/{ctx['workload']}"
    incidents = {i["key"]: i for i in result["incidents"]}
    assert key in incidents, sorted(incidents)
    incident = incidents[key]
    assert incident["root_cause"] == expect["root_cause"]
    assert incident["remediation_path"] == expect["remediation_path"]
    hosts = sorted(incident["suspect_hosts"])
    assert hosts == sorted(h["host"] for h in expect["suspect_hosts"])
    approvals = [i for i in result["incidents"] if i["requires_approval"]]
    if expect["root_cause"] == "faulty_host":
        # One failing host: one approval request in the whole replay, for that host.
        assert len(approvals) == 1, [(i["key"], i["root_cause"]) for i in approvals]
    else:
        # No GPU fault of the application (or a single one of a host) asks to delete a VM.
        assert approvals == [], [(i["key"], i["root_cause"]) for i in approvals]
