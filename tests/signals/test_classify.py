"""The LogEntry classifier: golden fixtures per signal kind, bad input, and properties."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import strategies
from hypothesis import given, settings
from hypothesis import strategies as st

from loopbreaker.errors import InvalidLogEntry
from loopbreaker.model import Signal, SignalKind
from loopbreaker.signals.classify import MAX_EXCERPT, classify
from loopbreaker.timeutil import format_rfc3339

GOLDEN = sorted((Path(__file__).parents[1] / "data" / "signals").glob("*.json"))


def test_every_kind_has_a_golden_fixture_or_a_cited_catalog_example() -> None:
    from loopbreaker.signals import catalog

    kinds = {json.loads(p.read_text())["expect"]["kind"] for p in GOLDEN}
    # tests/signals/test_catalog.py classifies every catalog example as its kind.
    kinds |= {(e.kind or s.kind).value for s in catalog.load().signatures for e in s.examples}
    # alert_resolved comes only from alert notifications, never from a LogEntry.
    assert kinds | {SignalKind.UNRECOGNIZED.value} == {
        k.value for k in SignalKind if k is not SignalKind.ALERT_RESOLVED
    }


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_signal(path: Path) -> None:
    case = json.loads(path.read_text())
    signal = classify(case["entry"])
    got = signal.to_dict()
    for key, value in case["expect"].items():
        assert got[key] == value, f"{path.name}: {key}"
    assert len(signal.excerpt) <= MAX_EXCERPT
    if "insertId" in case["entry"]:
        assert signal.insert_id == case["entry"]["insertId"]


def _entry(**overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "insertId": "abc",
        "logName": "projects/p/logs/kubelet",
        "resource": {"type": "k8s_node", "labels": {"cluster_name": "c", "node_name": "n1"}},
        "timestamp": "2026-05-20T08:12:15.123456789Z",
        "severity": "ERROR",
        "textPayload": "kernel panic - not syncing",
    }
    entry.update(overrides)
    return {k: v for k, v in entry.items() if v is not None}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ([1, 2], "JSON object"),
        ("text", "JSON object"),
        (None, "JSON object"),
        ({"foo": 1}, "neither 'resource' nor 'logName'"),
        (_entry(resource=[]), "'resource' must be an object"),
        (_entry(jsonPayload={"message": "x"}), "one payload"),
        (_entry(textPayload=5), "'textPayload' must be a string, got a number"),
        (_entry(textPayload={"a": 1}), "'textPayload' must be a string, got an object"),
        (_entry(insertId=["x"]), "'insertId' must be a string, got an array"),
        (_entry(timestamp="yesterday"), "timestamp"),
        (_entry(timestamp=12), "'timestamp' must be an RFC 3339 string"),
        (_entry(timestamp="9999-12-31T23:59:59Z"), "outside the years"),
        (_entry(timestamp="0001-01-01T00:00:00+01:00"), "timestamp"),
        (_entry(labels="x"), "'labels' must be an object"),
        (_entry(protoPayload="x", textPayload=None), "'protoPayload' must be an object"),
    ],
)
def test_not_a_log_entry_says_what_is_wrong(value: object, words: str) -> None:
    with pytest.raises(InvalidLogEntry, match=words):
        classify(value)


def test_valid_entry_that_matches_nothing_is_unrecognized() -> None:
    signal = classify(_entry(textPayload="step 1200 loss=1.93 tokens/s=41000"))
    assert signal.kind is SignalKind.UNRECOGNIZED
    assert signal.node == "n1"


def test_excerpt_is_capped_and_single_line() -> None:
    signal = classify(_entry(textPayload="kernel panic " + "x" * 5000 + "\nnext line"))
    assert signal.kind is SignalKind.KERNEL_PANIC
    assert len(signal.excerpt) <= MAX_EXCERPT
    assert "\n" not in signal.excerpt


def test_multi_line_payload_keeps_the_matching_line() -> None:
    text = "step 10 ok\n[rank3]: NCCL WARN Collective op timeout after 1800 seconds\nbye"
    entry = _entry(
        resource={
            "type": "k8s_container",
            "labels": {"cluster_name": "c", "pod_name": "j-w-1-0-aaaaa"},
        },
        textPayload=text,
    )
    signal = classify(entry)
    assert signal.kind is SignalKind.NCCL_TIMEOUT
    assert signal.excerpt.startswith("[rank3]: NCCL WARN")


def test_container_logs_do_not_raise_host_faults() -> None:
    entry = _entry(
        resource={"type": "k8s_container", "labels": {"cluster_name": "c"}},
        textPayload="printing the words kernel panic in a training log",
    )
    assert classify(entry).kind is SignalKind.UNRECOGNIZED


def test_signal_round_trips_through_dict() -> None:
    signal = classify(_entry())
    assert Signal.from_dict(json.loads(json.dumps(signal.to_dict()))) == signal


json_values = strategies.json_values(
    # NaN too: classify may be handed values no JSON decoder made.
    scalars=st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    keys=st.text(max_size=12),
    max_size=4,
    max_leaves=20,
)

entry_like = st.fixed_dictionaries(
    {},
    optional={
        "logName": json_values | st.just("projects/p/logs/events"),
        "resource": json_values
        | st.fixed_dictionaries(
            {"type": st.sampled_from(["k8s_node", "k8s_container", "gce_instance", "k8s_pod"])},
            optional={"labels": st.dictionaries(st.text(max_size=12), json_values, max_size=4)},
        ),
        "timestamp": json_values
        | st.datetimes(timezones=st.just(__import__("datetime").UTC)).map(format_rfc3339),
        "textPayload": json_values
        | st.sampled_from(["PreemptionEvent: Node 'n' in node pool 'p' was preempted.", "BUG: x"]),
        "jsonPayload": json_values
        | st.fixed_dictionaries(
            {"reason": json_values | st.sampled_from(["NodeNotReady", "FailedScheduling"])},
            optional={"involvedObject": json_values, "message": json_values},
        ),
        "protoPayload": json_values
        | st.fixed_dictionaries(
            {"methodName": json_values | st.just("compute.instances.hostError")},
            optional={"resourceName": json_values, "status": json_values},
        ),
        "labels": json_values,
        "severity": json_values,
        "insertId": json_values,
    },
)


@settings(max_examples=400, deadline=None)
@given(json_values | entry_like)
def test_classifier_never_crashes(value: object) -> None:
    try:
        signal = classify(value)
    except InvalidLogEntry as exc:
        assert str(exc)
        return
    assert isinstance(signal.kind, SignalKind)
    assert len(signal.excerpt) <= MAX_EXCERPT
    json.dumps(signal.to_dict())


def test_an_entry_without_resource_is_not_a_log_entry() -> None:
    entry = {
        "insertId": "x1",
        "logName": "projects/p/logs/events",
        "timestamp": "2026-05-20T08:00:00Z",
        "textPayload": "PreemptionEvent: Node 'gke-c-p-1a2b3c4d-0001' preempted.",
    }
    with pytest.raises(InvalidLogEntry, match="'resource' is missing"):
        classify(entry)


def _event(reason: str, kind: str, name: str = "resnet50-ps") -> dict[str, Any]:
    return {
        "logName": "projects/p/logs/events",
        "resource": {"type": "k8s_cluster", "labels": {"cluster_name": "c", "project_id": "p"}},
        "timestamp": "2026-05-20T08:10:00Z",
        "jsonPayload": {
            "reason": reason,
            "type": "Warning",
            "involvedObject": {"kind": kind, "name": name, "namespace": "ml"},
            "message": f"{kind} ml/{name} is restarting because 1 Worker replica(s) failed.",
        },
    }


@pytest.mark.parametrize(
    ("reason", "kind", "expected"),
    [
        ("TFJobRestarting", "TFJob", "tfjob"),
        ("PyTorchJobRestarting", "PyTorchJob", "pytorchjob"),
        # The operator's generic reason: the object kind still says which job it is.
        ("JobRestarting", "PyTorchJob", "pytorchjob"),
    ],
)
def test_kubeflow_restart_events_name_job_and_kind(reason: str, kind: str, expected: str) -> None:
    sig = classify(_event(reason, kind))
    assert sig.kind is SignalKind.JOB_RESTARTING
    assert (sig.workload, sig.namespace, sig.workload_kind) == ("resnet50-ps", "ml", expected)


def _container(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "logName": "projects/p/logs/stderr",
        "resource": {
            "type": "k8s_container",
            "labels": {"cluster_name": "c", "namespace_name": "ml", "pod_name": "j-worker-0"},
        },
        "timestamp": "2026-05-20T08:10:00Z",
        "severity": "ERROR",
        "textPayload": "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)",
        "labels": {f"k8s-pod/{k.replace('.', '_')}": v for k, v in labels.items()},
    }


@pytest.mark.parametrize(
    ("labels", "kind", "replica", "coordinator"),
    [
        (
            {
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-type": "master",
                "training.kubeflow.org/replica-index": "0",
            },
            "pytorchjob",
            "master",
            True,
        ),
        (
            {
                "training.kubeflow.org/operator-name": "tfjob-controller",
                "training.kubeflow.org/replica-type": "Worker",
                "training.kubeflow.org/replica-index": "1",
            },
            "tfjob",
            "worker",
            False,
        ),
        # No operator-name label: a Chief exists only in TFJobs.
        ({"training.kubeflow.org/replica-type": "chief"}, "tfjob", "chief", True),
        ({"jobset.sigs.k8s.io/jobset-name": "js"}, "jobset", None, None),
    ],
)
def test_pod_labels_give_workload_kind_and_replica(
    labels: dict[str, str], kind: str, replica: str | None, coordinator: bool | None
) -> None:
    labels = {"training.kubeflow.org/job-name": "j", **labels} if "jobset" not in kind else labels
    sig = classify(_container(labels))
    assert sig.kind is SignalKind.NCCL_TIMEOUT
    assert (sig.workload_kind, sig.replica_type) == (kind, replica)
    if coordinator is not None:
        assert sig.coordinator is coordinator


# --- issue 20: pods stopped by Kubernetes itself ----------------------------------------------


def _golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (Path(__file__).parents[1] / "data" / "signals" / f"{name}.json").read_text()
    )
    return data["entry"]


def test_a_systemd_memory_cgroup_names_the_pod_too() -> None:
    uid = "0b3e7a2c-5d41-4f6e-9a8b-1c2d3e4f5a6b"
    line = (
        "May 20 08:12:15 gke-c-p-1a2b3c4d-x7k2 kernel: [ 1.0] oom-kill:constraint=CONSTRAINT_MEMCG,"
        "nodemask=(null),cpuset=cri-containerd-ab.scope,mems_allowed=0,oom_memcg=/kubepods.slice/"
        f"kubepods-burstable.slice/kubepods-burstable-pod{uid.replace('-', '_')}.slice,"
        "task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
        f"{uid.replace('-', '_')}.slice/cri-containerd-ab.scope,task=python3,pid=9,uid=0"
    )
    sig = classify(_entry(textPayload=line))
    assert (sig.kind, sig.pod_uid, sig.reason) == (SignalKind.OOM_KILLED, uid, "oom-kill")


def test_oom_lines_in_a_containers_own_log_are_not_kernel_kills() -> None:
    entry = _entry(
        resource={"type": "k8s_container", "labels": {"cluster_name": "c", "pod_name": "p"}},
        textPayload="Memory cgroup out of memory: Killed process 9 (python3) — quoted by the app",
    )
    assert classify(entry).kind is SignalKind.UNRECOGNIZED


def test_an_audited_status_patch_without_oomkilled_is_not_an_oom_kill() -> None:
    entry = copy.deepcopy(_golden("oom_killed_audit_kubelet_patch"))
    status = entry["protoPayload"]["request"]["status"]["containerStatuses"][0]
    status["state"]["terminated"]["reason"] = "Error"  # exit code 137 stays: a SIGKILL
    assert classify(entry).kind is SignalKind.UNRECOGNIZED
    status["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    assert classify(entry).kind is SignalKind.OOM_KILLED


def test_the_deleted_pods_labels_name_the_workload_and_its_limit() -> None:
    sig = classify(_golden("oom_killed_audit_gc_delete"))
    assert sig.workload == "llama3-70b-training" and sig.workload_kind == "jobset"
    assert "(memory limit 64Gi)" not in sig.excerpt  # the signals scenario sets no limit
    entry = copy.deepcopy(_golden("oom_killed_audit_gc_delete"))
    container = entry["protoPayload"]["response"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"memory": "160Gi"}}
    assert "(memory limit 160Gi)" in classify(entry).excerpt


def test_a_preempted_event_of_the_older_form_still_names_the_node() -> None:
    entry = copy.deepcopy(_golden("priority_preempted_scheduler"))
    payload = entry["jsonPayload"]
    payload.pop("related")
    payload["message"] = "Preempted by serving/ranker-1 on node gke-c-p-1a2b3c4d-q9z1"
    sig = classify(entry)
    assert sig.kind is SignalKind.PRIORITY_PREEMPTED
    assert (sig.node, sig.related_pod, sig.related_uid) == ("gke-c-p-1a2b3c4d-q9z1", None, None)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ('Failed to pull image "i": rpc error: code = NotFound desc = i: not found', "NotFound"),
        (
            'Failed to pull image "i": unexpected status from GET ...: 401 Unauthorized',
            "401 Unauthorized",
        ),
        # No answer from the registry: the network's, or the kubelet's own throttle.
        (
            'Failed to pull image "i": rpc error: code = Unknown desc = dial tcp: i/o timeout',
            "i/o timeout",
        ),
        (
            'Failed to pull image "i": failed to pull and unpack image "i": failed to do '
            'request: Head "https://r/v2/i/manifests/1": dial tcp 10.0.0.1:443: connect: '
            "connection timed out",
            "connection timed out",
        ),
        (
            'Failed to pull image "i": rpc error: code = DeadlineExceeded desc = failed to '
            'pull and unpack image "i": dial tcp 10.0.0.1:443: i/o timeout',
            "DeadlineExceeded",
        ),
        ('Failed to pull image "i": pull QPS exceeded', "pull QPS exceeded"),
        ('Failed to pull image "i": rpc error: code = Unknown desc = context canceled', "Failed"),
        ("Error: InvalidImageName", "Failed"),
    ],
)
def test_image_pull_failures_keep_the_registrys_answer(message: str, reason: str) -> None:
    entry = copy.deepcopy(_golden("image_pull_failed_not_found"))
    entry["jsonPayload"]["message"] = message
    sig = classify(entry)
    assert (sig.kind, sig.reason) == (SignalKind.IMAGE_PULL_FAILED, reason)


def test_other_failed_and_backoff_events_are_not_image_pulls() -> None:
    entry = copy.deepcopy(_golden("image_pull_failed_not_found"))
    entry["jsonPayload"]["message"] = "Error: CreateContainerConfigError"
    assert classify(entry).kind is SignalKind.UNRECOGNIZED
