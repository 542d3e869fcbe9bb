"""One failure is counted once, however many lines restate it (issue 38, part 5).

A kernel OOM kill prints a burst of lines (the report header, the cgroup's usage, the victim
chosen, each process killed); a node that stops reporting gets one NodeNotReady Event on
the Node and one on each of its pods; a JobSet v0.12 restart writes its action's Event and
the RestartingJobSet condition's. The catalog makes exactly one line of each the signal;
these tests read bursts as GKE exports them, through the classifier and the diagnosis, and
through ``loopbreaker replay``'s incident counts.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from builders import CLUSTER, WORKLOAD, at, ctx, evidence, node

from loopbreaker.cli.main import main
from loopbreaker.diagnosis.engine import diagnose
from loopbreaker.model import PodInfo, RemediationPath, RootCause, Signal, SignalKind
from loopbreaker.signals.classify import classify

PROJECT = "proj"
NODE_1 = "gke-tpu-cluster-prod-a3-pool-3cb4b4b1-k2w8"
NODE_2 = "gke-tpu-cluster-prod-a3-pool-3cb4b4b1-f5n1"
HOST_A = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"
HOST_B = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
PODS = tuple(f"{WORKLOAD}-workers-0-{i}-abcde" for i in range(4))
UID = "0f6d3c1e-2b4a-4c5d-8e9f-a1b2c3d4e5f6"
CID = "5d2b7c0e9a8f4b1c3e6d7a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"

# --- bursts of one OOM kill each ---------------------------------------------------------

# cAdvisor's recorded /dev/kmsg of a container OOM (Linux 4.8) and of a node's own OOM
# (Linux 3.13): google/cadvisor 0dd40983 utils/oomparser/oomparser_test.go.
CADVISOR_MEMCG = [
    "gunpowder-memho invoked oom-killer: gfp_mask=0x24000c0(GFP_KERNEL), order=0, oom_score_adj=0",
    "Task in /docker/2e088fe462e25e60be1dafafe2c05c47bda1a97978648d10ad2b7484fc0b8f50 killed "
    "as a result of limit of /docker/2e088fe462e25e60be1dafafe2c05c47bda1a97978648d10ad2b7484fc"
    "0b8f50",
    "memory: usage 20480kB, limit 20480kB, failcnt 1204",
    "memory+swap: usage 40940kB, limit 40960kB, failcnt 6",
    "Memory cgroup out of memory: Kill process 1381 (gunpowder-memho) score 1046 or sacrifice "
    "child",
    "Killed process 1381 (gunpowder-memho) total-vm:2121528kB, anon-rss:18624kB, "
    "file-rss:2140kB, shmem-rss:0kB",
    "oom_reaper: reaped process 1381 (gunpowder-memho), now anon-rss:0kB, file-rss:0kB, "
    "shmem-rss:0kB",
]
CADVISOR_GLOBAL = [
    "badsysprogram invoked oom-killer: gfp_mask=0x280da, order=0, oom_score_adj=0",
    "Out of memory: Kill process 1532 (badsysprogram) score 919 or sacrifice child",
    "Killed process 1532 (badsysprogram) total-vm:1641388kB, anon-rss:1595164kB, file-rss:76kB",
]
# A pod's container at its limit, in the order and format strings of Linux v4.14.5
# (mm/oom_kill.c dump_header, oom_kill_process; mm/memcontrol.c mem_cgroup_print_oom_info).
V4_14_POD = [
    "python3 invoked oom-killer: gfp_mask=0x14000c0(GFP_KERNEL), nodemask=(null),  order=0, "
    "oom_score_adj=-998",
    f"Task in /kubepods/burstable/pod{UID}/{CID} killed as a result of limit of "
    f"/kubepods/burstable/pod{UID}",
    "memory: usage 167772160kB, limit 167772160kB, failcnt 3579",
    f"Memory cgroup stats for /kubepods/burstable/pod{UID}: cache:0KB rss:0KB rss_huge:0KB",
    "Memory cgroup out of memory: Kill process 29944 (python3) score 1999 or sacrifice child",
    "Killed process 29951 (pt_data_worker_) total-vm:8812651kB, anon-rss:7685578kB, "
    "file-rss:20980kB, shmem-rss:0kB",
    "oom_reaper: reaped process 29951 (pt_data_worker_), now anon-rss:0kB, file-rss:0kB, "
    "shmem-rss:0kB",
]
# The same pod on Linux v6.1.20 with memory.oom.group set (cgroup v2): one summary, then one
# 'Killed process' line per process of the container (mm/oom_kill.c dump_oom_summary,
# __oom_kill_process; mm/memcontrol.c mem_cgroup_print_oom_group).
_SLICE = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}"
V6_1_OOM_GROUP = [
    "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=999",
    "memory: usage 167772160kB, limit 167772160kB, failcnt 3579",
    f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-{CID}.scope,"
    f"mems_allowed=0-1,oom_memcg={_SLICE}.slice/cri-containerd-{CID}.scope,task_memcg="
    f"{_SLICE}.slice/cri-containerd-{CID}.scope,task=python3,pid=29944,uid=0",
    "Memory cgroup out of memory: Killed process 29944 (python3) total-vm:68280290kB, "
    "anon-rss:67043079kB, file-rss:86120kB, shmem-rss:0kB, UID:0 pgtables:226487kB "
    "oom_score_adj:999",
    f"Tasks in {_SLICE}.slice/cri-containerd-{CID}.scope are going to be killed due to "
    "memory.oom.group set",
    *(
        f"Memory cgroup out of memory: Killed process {pid} (pt_data_worker_) "
        "total-vm:8812651kB, anon-rss:7685578kB, file-rss:20980kB, shmem-rss:0kB, UID:0 "
        "pgtables:18044kB oom_score_adj:999"
        for pid in (29951, 29952, 29953, 29954)
    ),
    "oom_reaper: reaped process 29944 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
]
BURSTS = {
    "cadvisor-4.8-memcg": CADVISOR_MEMCG,
    "cadvisor-3.13-global": CADVISOR_GLOBAL,
    "v4.14-pod": V4_14_POD,
    "v6.1-oom-group": V6_1_OOM_GROUP,
}


def kernel_line(text: str, second: int = 24, minute: int = 15) -> dict[str, Any]:
    """A kernel line in a node's journal as the GKE log sink exports it."""
    stamp = f"2026-05-20T08:{minute:02d}:{second:02d}Z"
    return {
        "insertId": f"k-{minute}-{second}-{abs(hash(text)) % 10**8}",
        "logName": f"projects/{PROJECT}/logs/kernel",
        "resource": {
            "type": "k8s_node",
            "labels": {
                "project_id": PROJECT,
                "cluster_name": CLUSTER,
                "location": "us-east5",
                "node_name": NODE_1,
            },
        },
        "textPayload": f"May 20 08:{minute:02d}:{second:02d} {NODE_1} kernel: [52271.6334] {text}",
        "timestamp": stamp,
    }


def kinds_of(entries: list[dict[str, Any]]) -> Counter[SignalKind]:
    return Counter(classify(e).kind for e in entries)


@pytest.mark.parametrize("burst", BURSTS.values(), ids=BURSTS.keys())
def test_the_lines_of_one_oom_kill_are_one_oom_kill(burst: list[str]) -> None:
    kinds = kinds_of([kernel_line(line) for line in burst])
    assert kinds == {SignalKind.OOM_KILLED: 1, SignalKind.UNRECOGNIZED: len(burst) - 1}


@pytest.mark.parametrize("burst", [V4_14_POD, V6_1_OOM_GROUP], ids=["v4.14", "v6.1"])
def test_the_counted_line_names_the_pods_cgroup_on_old_and_new_kernels(burst: list[str]) -> None:
    [kill] = [s for s in map(classify, map(kernel_line, burst)) if s.kind is SignalKind.OOM_KILLED]
    assert (kill.pod_uid, kill.node, kill.reason) == (UID, NODE_1, "oom-kill")


def run(signals: list[Signal], pods: tuple[PodInfo, ...]) -> Any:
    nodes = (node(NODE_1, HOST_A, pool="a3-pool"), node(NODE_2, HOST_B, pool="a3-pool"))
    return diagnose(ctx(), evidence(signals=signals, nodes=nodes, pods=pods))


def test_two_legacy_kernel_oom_kills_of_a_pod_are_its_oom_and_no_host_fault() -> None:
    """Linux 4.14's burst names the pod only in 'Task in <cgroup>': read, it attributes the
    kill to the workload's pod, counts two kills as two, and repairs no host."""
    signals = [
        replace(s, timestamp=at(minute))
        for minute in (-14, 1)
        for s in map(classify, map(kernel_line, V4_14_POD))
        if s.kind is not SignalKind.UNRECOGNIZED
    ]
    assert [s.kind for s in signals] == [SignalKind.OOM_KILLED] * 2
    pods = (PodInfo(PODS[0], "default", "Running", NODE_1, WORKLOAD, uid=UID),)
    d = run(signals, pods)
    assert d.root_cause is RootCause.OUT_OF_MEMORY, d.summary
    assert d.remediation.path is RemediationPath.FIX_MEMORY
    assert d.suspect_hosts == ()
    [finding] = [f for f in d.evidence if "OOM-killed" in f.message]
    assert f"in 1 pod(s) ({PODS[0]})" in finding.message


def test_replay_counts_one_oom_kill_per_kill(tmp_path: Path, capsys: Any) -> None:
    """``loopbreaker replay``: two kills on Linux 4.14 and one on 6.1 with memory.oom.group
    (23 kernel lines) are three oom_killed signals of the node pool's incident."""
    entries = [
        kernel_line(line, second=i, minute=minute)
        for minute, burst in ((10, V4_14_POD), (30, V4_14_POD), (50, V6_1_OOM_GROUP))
        for i, line in enumerate(burst)
    ]
    path = tmp_path / "logs.json"
    path.write_text(json.dumps(entries))
    assert main(["replay", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [i["counts"] for i in out["incidents"]] == [{"oom_killed": 3}]


# --- a node that stops reporting --------------------------------------------------------


def event(reason: str, message: str, kind: str, name: str, minute: float) -> dict[str, Any]:
    """A v1 Event in the ``events`` log (k8s_node for a Node, k8s_pod for a Pod)."""
    labels: dict[str, str] = {"project_id": PROJECT, "cluster_name": CLUSTER}
    involved = {"kind": kind, "name": name}
    if kind == "Node":
        labels["node_name"] = name
    else:
        labels |= {"namespace_name": "default", "pod_name": name}
        involved["namespace"] = "default"
    return {
        "logName": f"projects/{PROJECT}/logs/events",
        "resource": {"type": "k8s_node" if kind == "Node" else "k8s_pod", "labels": labels},
        "jsonPayload": {
            "apiVersion": "v1",
            "kind": "Event",
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "source": {"component": "node-controller"},
        },
        "timestamp": at(minute).isoformat().replace("+00:00", "Z"),
    }


def node_down(minute: float) -> list[dict[str, Any]]:
    """What a node that stopped posting status leaves in the events log: the node lifecycle
    controller's NodeNotReady on the Node (controller_utils.go RecordNodeStatusChange), its
    NodeNotReady on each pod (MarkPodsNotReady), and the taint eviction controller's
    TaintManagerEviction on each pod (taint_eviction.go)."""
    entries = [
        event("NodeNotReady", f"Node {NODE_1} status is now: NodeNotReady", "Node", NODE_1, minute)
    ]
    for pod in PODS:
        entries.append(event("NodeNotReady", "Node is not ready", "Pod", pod, minute))
        entries.append(
            event(
                "TaintManagerEviction",
                f"Marking for deletion Pod default/{pod}",
                "Pod",
                pod,
                minute,
            )
        )
    return entries


def test_a_node_that_goes_not_ready_is_one_failure_however_many_pods_it_had() -> None:
    entries = node_down(-14) + node_down(1)
    signals = [s for s in map(classify, entries) if s.kind is not SignalKind.UNRECOGNIZED]
    assert [(s.kind, s.node) for s in signals] == [(SignalKind.NODE_NOT_READY, NODE_1)] * 2
    pods = tuple(PodInfo(p, "default", "Running", NODE_1, WORKLOAD) for p in PODS)
    d = run(signals, pods)
    assert d.root_cause is RootCause.FAULTY_HOST, d.summary
    [suspect] = d.suspect_hosts
    assert (suspect.host, suspect.failures) == (HOST_A, 2)


def test_replay_counts_a_not_ready_node_once_not_once_per_pod(tmp_path: Path, capsys: Any) -> None:
    """``loopbreaker replay``: two NotReady transitions of a node of four pods (18 Events)
    are two node_not_ready signals, none of them a pod's."""
    path = tmp_path / "events.json"
    path.write_text(json.dumps(node_down(-14) + node_down(1)))
    assert main(["replay", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [i["counts"] for i in out["incidents"]] == [{"node_not_ready": 2}]


# --- a JobSet restart ---------------------------------------------------------------------


def jobset_event(reason: str, message: str) -> dict[str, Any]:
    return {
        "logName": f"projects/{PROJECT}/logs/events",
        "resource": {
            "type": "k8s_cluster",
            "labels": {"project_id": PROJECT, "cluster_name": CLUSTER},
        },
        "jsonPayload": {
            "apiVersion": "v1",
            "kind": "Event",
            "involvedObject": {"kind": "JobSet", "name": WORKLOAD, "namespace": "default"},
            "reason": reason,
            "message": message,
            "type": "Warning",
        },
        "timestamp": "2026-05-20T08:15:00Z",
    }


def test_a_jobset_restart_is_one_restart_and_its_end_is_none() -> None:
    """JobSet v0.12.0 (failure_policy.go): a restart writes its action's Event and the
    RestartingJobSet condition's (DefaultFailurePolicy, or FailurePolicy_<rule>) with the
    same message; reaching max restarts, FailJobSet and FailedJobs end the JobSet."""
    first = f"(first failed job: {WORKLOAD}-workers-0)"
    restart = [
        jobset_event(
            "RestartJobSetFailurePolicyAction",
            f"applying RestartJobSet failure policy action {first}",
        ),
        jobset_event(
            "DefaultFailurePolicy", f"applying RestartJobSet failure policy action {first}"
        ),
    ]
    end = [
        jobset_event(
            "ReachedMaxRestarts", f"jobset failed due to reaching max number of restarts {first}"
        ),
        jobset_event(
            "FailJobSetFailurePolicyAction", f"applying FailJobSet failure policy action {first}"
        ),
        jobset_event("FailedJobs", f"jobset failed due to one or more job failures {first}"),
        jobset_event("JobSetFailed", "jobset failed"),
    ]
    assert kinds_of(restart) == {SignalKind.JOB_RESTARTING: 1, SignalKind.UNRECOGNIZED: 1}
    assert kinds_of(end) == {SignalKind.UNRECOGNIZED: 4}
