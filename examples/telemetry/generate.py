#!/usr/bin/env python3
"""Generate the offline telemetry scenarios and the golden signal fixtures.

Standard library only and fully deterministic: every "random" value (suffixes, ids,
sub-second offsets, loss values) is derived from a SHA-256 of fixed keys, so running the
script twice writes byte-identical files.

Writes, for each scenario, ``examples/telemetry/<scenario>/``::

    scenario.json  description, context and the expected diagnosis
    logs.json      Cloud Logging v2 LogEntry objects as ``gcloud logging read --format=json``
                   prints them (camelCase keys, sorted keys, newest entry first)
    metrics.om     OpenMetrics text, one sample a minute from T-90m to T+35m
    nodes.json     ``kubectl get nodes -o json`` (snapshot at T+35m)
    pods.json      ``kubectl get pods -A -o json`` for the workload's pods (snapshot at T+35m)

and one golden fixture per case under ``tests/data/signals/<name>.json``.

Usage: ``python examples/telemetry/generate.py [--scenarios-only | --signals-only]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SIGNALS_DIR = REPO / "tests" / "data" / "signals"

#: Log id used for GKE interruption notices (PreemptionEvent / MaintenanceEvent on
#: gke_nodepool, TerminationEvent on k8s_node). The real id is unverified; classify by
#: resource.type and payload text, never by this name.
INTERRUPTION_LOG = "container.googleapis.com/node-pool-events"
SYSTEM_EVENT_LOG = "cloudaudit.googleapis.com/system_event"
EVENTS_LOG = "events"

#: Metric sample range relative to the issue time, in minutes (inclusive).
FIRST_MINUTE, LAST_MINUTE = -90, 35
NS = 1_000_000_000

K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.String
LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
GKE_VERSION = "v1.32.4-gke.1767000"


# --- deterministic "randomness" -------------------------------------------------------


def _default_tolerations() -> list[dict[str, Any]]:
    """The two tolerations the DefaultTolerationSeconds admission plugin adds to a pod."""
    return [
        {
            "effect": "NoExecute",
            "key": f"node.kubernetes.io/{taint}",
            "operator": "Exists",
            "tolerationSeconds": 300,
        }
        for taint in ("not-ready", "unreachable")
    ]


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def rand_int(lo: int, hi: int, *parts: object) -> int:
    """An integer in [lo, hi) derived from ``parts``."""
    return lo + int.from_bytes(_digest(*parts)[:8], "big") % (hi - lo)


def rand_str(alphabet: str, n: int, *parts: object) -> str:
    out: list[str] = []
    block = _digest(*parts)
    while len(out) < n:
        for byte in block:
            out.append(alphabet[byte % len(alphabet)])
            if len(out) == n:
                break
        block = _digest(block.hex())
    return "".join(out)


def rand_hex(n: int, *parts: object) -> str:
    text = ""
    block = _digest(*parts)
    while len(text) < n:
        text += block.hex()
        block = _digest(block.hex())
    return text[:n]


def rand_uuid(*parts: object) -> str:
    h = rand_hex(32, "uuid", *parts)
    variant = "89ab"[int(h[16], 16) % 4]
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


def rand_float(lo: float, hi: float, *parts: object) -> float:
    return lo + (hi - lo) * (rand_int(0, 1_000_000, *parts) / 1_000_000)


# --- time formatting ------------------------------------------------------------------


def parse_time(text: str) -> int:
    """RFC 3339 (whole seconds, Z) to integer nanoseconds since the epoch."""
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return int(moment.timestamp()) * NS


def fmt_ts(ns: int, digits: int = 9) -> str:
    """RFC 3339 UTC with ``digits`` fractional digits (0 = whole seconds)."""
    sec, frac = divmod(ns, NS)
    base = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if digits == 0:
        return base + "Z"
    return f"{base}.{frac:09d}"[: len(base) + 1 + digits] + "Z"


def dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // NS, UTC)


def syslog_stamp(ns: int) -> str:
    d = dt(ns)
    return f"{d:%b} {d.day:>2} {d:%H:%M:%S}"


def glog_prefix(level: str, ns: int, tid: int, where: str) -> str:
    d = dt(ns)
    usec = (ns % NS) // 1000
    return f"{level}{d:%m%d} {d:%H:%M:%S}.{usec:06d} {tid:>7d} {where}]"


def c10_prefix(rank: int, level: str, ns: int, where: str) -> str:
    d = dt(ns)
    return f"[rank{rank}]:[{level}{d:%m%d} {d:%H:%M:%S}.{ns % NS:09d} {where}]"


def py_stamp(ns: int) -> str:
    d = dt(ns)
    return f"{d:%Y-%m-%d %H:%M:%S},{(ns % NS) // 1_000_000:03d}"


def insert_id(log_id: str, *parts: object) -> str:
    if log_id.startswith("cloudaudit"):
        return rand_str(LOWER_ALNUM, 12, "iid", *parts)
    if log_id == EVENTS_LOG:
        return rand_str(LOWER_ALNUM, 14, "iid", *parts)
    return rand_str(LOWER_ALNUM, 16, "iid", *parts)


# --- cluster model --------------------------------------------------------------------


@dataclass
class Node:
    name: str
    pool: str
    zone: str
    machine: str
    project: str
    instance_id: str
    ip: str
    pod_cidr: str
    created_ns: int
    boot_ns: int
    spot: bool = False
    host: str | None = None
    block: str | None = None
    subblock: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    #: minute -> "False" | "Unknown" for minutes where Ready is not True
    not_ready: dict[int, str] = field(default_factory=dict)
    ready_since_ns: int = 0


@dataclass
class JobSetSpec:
    name: str
    rjob: str
    replicas: int
    parallelism: int
    container: str
    image: str
    resources: dict[str, str]
    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]
    coordinator_label: bool = False
    priority_class: str | None = None
    #: The controller kind (``logging.gke.io/top_level_controller_type`` of its pods' logs).
    api_kind: ClassVar[str] = "JobSet"

    @property
    def size(self) -> int:
        return self.replicas * self.parallelism

    def job_name(self, j: int) -> str:
        return f"{self.name}-{self.rjob}-{j}"


class PodPhases:
    """Phase and schedulability of one pod object by minute (JobSet and Kubeflow pods)."""

    start_m: int
    end_m: int | None
    phases: list[tuple[int, str]]
    unsched: list[tuple[int, int]]

    def phase_at(self, m: int) -> str | None:
        if m < self.start_m or (self.end_m is not None and m >= self.end_m):
            return None
        current = None
        for start, phase in self.phases:
            if start <= m:
                current = phase
        return current

    def unsched_at(self, m: int) -> bool:
        return any(a <= m < b for a, b in self.unsched)


@dataclass
class Pod(PodPhases):
    spec: JobSetSpec
    namespace: str
    j: int
    p: int
    attempt: int
    name: str
    node: Node | None
    start_m: int
    created_ns: int
    phases: list[tuple[int, str]]
    end_m: int | None = None
    unsched: list[tuple[int, int]] = field(default_factory=list)
    sched_message: str | None = None
    ip: str = ""

    @property
    def coordinator(self) -> bool:
        return self.j == 0 and self.p == 0

    @property
    def job_uid(self) -> str:
        return rand_uuid("job", self.spec.name, self.j, self.attempt)

    @property
    def uid(self) -> str:
        return rand_uuid("pod", self.name)

    def labels(self, jobset_uid: str) -> dict[str, str]:
        s = self.spec
        out = {
            "batch.kubernetes.io/controller-uid": self.job_uid,
            "batch.kubernetes.io/job-completion-index": str(self.p),
            "batch.kubernetes.io/job-name": s.job_name(self.j),
            "controller-uid": self.job_uid,
            "job-name": s.job_name(self.j),
            "jobset.sigs.k8s.io/global-replicas": str(s.replicas),
            "jobset.sigs.k8s.io/job-global-index": str(self.j),
            "jobset.sigs.k8s.io/job-index": str(self.j),
            "jobset.sigs.k8s.io/job-key": hashlib.sha1(
                f"{self.namespace}/{s.job_name(self.j)}".encode()
            ).hexdigest(),
            "jobset.sigs.k8s.io/jobset-name": s.name,
            "jobset.sigs.k8s.io/jobset-uid": jobset_uid,
            "jobset.sigs.k8s.io/replicatedjob-name": s.rjob,
            "jobset.sigs.k8s.io/replicatedjob-replicas": str(s.replicas),
            "jobset.sigs.k8s.io/restart-attempt": str(self.attempt),
        }
        if s.coordinator_label:
            out["jobset.sigs.k8s.io/coordinator"] = f"{s.name}-{s.rjob}-0-0.{s.name}"
        return out


#: Kubeflow training operator: API kind -> (framework label, controller, container, port).
KUBEFLOW_KINDS: dict[str, tuple[str, str, str, tuple[str, int]]] = {
    "TFJob": ("tensorflow", "tfjob-controller", "tensorflow", ("tfjob-port", 2222)),
    "PyTorchJob": ("pytorch", "pytorchjob-controller", "pytorch", ("pytorchjob-port", 23456)),
}
#: Replica types that coordinate a Kubeflow job (Worker 0 does when there is none).
KUBEFLOW_CHIEFS = ("Chief", "Master")


@dataclass
class KubeflowSpec:
    """A TFJob or PyTorchJob: replica types in the operator's order, each with its count."""

    name: str
    api_kind: str
    replicas: dict[str, int]
    image: str
    #: replica type -> container resources (requests = limits)
    resources: dict[str, dict[str, str]]
    node_selector: dict[str, dict[str, str]]
    tolerations: dict[str, list[dict[str, str]]]
    env: list[dict[str, str]] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    restart_policy: str = "ExitCode"

    @property
    def framework(self) -> str:
        return KUBEFLOW_KINDS[self.api_kind][0]

    @property
    def operator(self) -> str:
        return KUBEFLOW_KINDS[self.api_kind][1]

    @property
    def container(self) -> str:
        return KUBEFLOW_KINDS[self.api_kind][2]

    @property
    def port(self) -> tuple[str, int]:
        return KUBEFLOW_KINDS[self.api_kind][3]

    @property
    def has_chief(self) -> bool:
        return any(r in self.replicas for r in KUBEFLOW_CHIEFS)

    def pod_name(self, rtype: str, index: int) -> str:
        return f"{self.name}-{rtype.lower()}-{index}"


@dataclass
class KfPod(PodPhases):
    """One pod object of a Kubeflow replica. With restartPolicy ExitCode the operator
    deletes a failed pod and creates it again under the same name (a new ``incarnation``,
    with a new uid)."""

    spec: KubeflowSpec
    namespace: str
    rtype: str
    index: int
    incarnation: int
    node: Node | None
    start_m: int
    created_ns: int
    phases: list[tuple[int, str]]
    end_m: int | None = None
    unsched: list[tuple[int, int]] = field(default_factory=list)
    sched_message: str | None = None
    ip: str = ""

    @property
    def name(self) -> str:
        return self.spec.pod_name(self.rtype, self.index)

    @property
    def coordinator(self) -> bool:
        if self.spec.has_chief:
            return self.rtype in KUBEFLOW_CHIEFS
        return self.rtype == "Worker" and self.index == 0

    @property
    def uid(self) -> str:
        return rand_uuid("kfpod", self.namespace, self.name, self.incarnation)

    def labels(self, job_uid: str = "") -> dict[str, str]:
        """The operator's pod labels (the job uid is in ownerReferences, not in labels)."""
        out = {
            "training.kubeflow.org/job-name": self.spec.name,
            "training.kubeflow.org/operator-name": self.spec.operator,
            "training.kubeflow.org/replica-index": str(self.index),
            "training.kubeflow.org/replica-type": self.rtype.lower(),
        }
        if self.coordinator:
            out["training.kubeflow.org/job-role"] = "master"
        return out


AnyPod = Pod | KfPod


@dataclass
class Context:
    project: str
    location: str
    zone: str
    cluster: str
    namespace: str
    workload: str
    issue_time: str
    #: ``loopbreaker diagnose --workload-kind``; None (JobSet) writes no key.
    workload_kind: str | None = None

    @property
    def t_ns(self) -> int:
        return parse_time(self.issue_time)

    def at(self, minutes: float, *key: object) -> int:
        """Issue time + ``minutes``; the sub-second part is derived from ``key``."""
        whole = self.t_ns + math.floor(minutes * 60) * NS
        return whole + rand_int(0, NS, "ns", self.cluster, minutes, *key)

    def sample_s(self, m: int) -> int:
        return self.t_ns // NS + m * 60


# --- log entries ----------------------------------------------------------------------


def make_entry(
    project: str,
    *,
    log_id: str,
    resource_type: str,
    resource_labels: dict[str, str],
    at_ns: int,
    severity: str,
    text: str | None = None,
    json_payload: dict[str, Any] | None = None,
    proto_payload: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    operation: dict[str, Any] | None = None,
    digits: int = 9,
) -> dict[str, Any]:
    key = (project, log_id, resource_type, sorted(resource_labels.items()), at_ns, text)
    delay = rand_int(60_000_000, 2_400_000_000, "recv", *key)
    entry: dict[str, Any] = {
        "insertId": insert_id(log_id, *key),
        "logName": f"projects/{project}/logs/{quote(log_id, safe='')}",
        "receiveTimestamp": fmt_ts(at_ns + delay, 9),
        "resource": {"type": resource_type, "labels": dict(resource_labels)},
        "severity": severity,
        "timestamp": fmt_ts(at_ns, digits),
    }
    if labels:
        entry["labels"] = dict(labels)
    if operation:
        entry["operation"] = operation
    if text is not None:
        entry["textPayload"] = text
    if json_payload is not None:
        entry["jsonPayload"] = json_payload
    if proto_payload is not None:
        entry["protoPayload"] = proto_payload
    return entry


def pod_log_labels(pod: AnyPod, jobset_uid: str) -> dict[str, str]:
    out = {"compute.googleapis.com/resource_name": pod.node.name if pod.node else ""}
    for k, v in pod.labels(jobset_uid).items():
        out["k8s-pod/" + k.replace(".", "_")] = v
    out["logging.gke.io/top_level_controller_name"] = pod.spec.name
    out["logging.gke.io/top_level_controller_type"] = pod.spec.api_kind
    return out


def k8s_event_payload(
    *,
    involved: dict[str, Any],
    reason: str,
    message: str,
    component: str,
    etype: str,
    first_ns: int,
    last_ns: int,
    count: int,
    host: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    name = f"{involved['name']}.{rand_hex(16, 'event', involved['name'], reason, first_ns)}"
    source: dict[str, str] = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "count": count,
        "eventTime": None,
        "firstTimestamp": fmt_ts(first_ns, 0),
        "involvedObject": involved,
        "kind": "Event",
        "lastTimestamp": fmt_ts(last_ns, 0),
        "message": message,
        "metadata": {
            "creationTimestamp": fmt_ts(first_ns, 0),
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(rand_int(10_000_000, 99_999_999, "rv", name, last_ns)),
            "uid": rand_uuid("event", name),
        },
        "reason": reason,
        "reportingComponent": component,
        "reportingInstance": host or "",
        "source": source,
        "type": etype,
    }


AUDIT_STATUS = {
    "compute.instances.preempted": "Instance was preempted.",
    "compute.instances.hostError": "Instance terminated by Compute Engine.",
    "compute.instances.automaticRestart": "Instance automatically restarted by Compute Engine.",
    "compute.instances.terminateOnHostMaintenance": (
        "Instance terminated during Compute Engine maintenance."
    ),
    "compute.instances.migrateOnHostMaintenance": (
        "Instance migrated during Compute Engine maintenance."
    ),
    "compute.instances.guestTerminate": "Instance stopped by guest OS shutdown.",
}


def audit_entry(
    project: str, zone: str, instance: str, instance_id: str, method: str, at_ns: int
) -> dict[str, Any]:
    ms = at_ns // 1_000_000
    op_id = (
        f"systemevent-{ms + rand_int(200, 900, 'op', instance, method, at_ns)}-"
        f"{rand_hex(13, 'op1', instance, at_ns)}-{rand_hex(8, 'op2', instance, at_ns)}-"
        f"{rand_hex(8, 'op3', instance, at_ns)}"
    )
    return make_entry(
        project,
        log_id=SYSTEM_EVENT_LOG,
        resource_type="gce_instance",
        resource_labels={"instance_id": instance_id, "project_id": project, "zone": zone},
        at_ns=at_ns,
        severity="INFO",
        proto_payload={
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "authenticationInfo": {"principalEmail": "system@google.com"},
            "methodName": method,
            "request": {"@type": f"type.googleapis.com/{method}"},
            "resourceName": f"projects/{project}/zones/{zone}/instances/{instance}",
            "serviceName": "compute.googleapis.com",
            "status": {"message": AUDIT_STATUS[method]},
        },
        operation={"first": True, "id": op_id, "last": True, "producer": method},
        digits=6,
    )


# --- scenario -------------------------------------------------------------------------


class Scenario:
    def __init__(self, slug: str, description: str, ctx: Context, expect: dict[str, Any]):
        self.slug = slug
        self.description = description
        self.ctx = ctx
        self.expect = expect
        self.nodes: list[Node] = []
        self.pods: list[AnyPod] = []
        self.entries: list[dict[str, Any]] = []
        self.jobsets: dict[str, JobSetSpec] = {}
        #: jobset name -> (value before the first sample, [minutes of +1 steps])
        self.restarts: dict[str, tuple[int, list[int]]] = {}
        #: Kubeflow training operator counter, (job_namespace, framework) ->
        #: (value before the first sample, or None if the series appears at its first step,
        #: [minutes of +1 steps]); one step per <Kind>Restarting event.
        self.operator_restarts: dict[tuple[str, str], tuple[int | None, list[int]]] = {}
        #: (pool, type, reason) -> (initial value or None, [minutes of +1 steps])
        self.interruptions: dict[tuple[str, str, str], tuple[int | None, list[int]]] = {}
        #: node name -> {minute: pressure condition type that is True then}
        self.node_pressure: dict[str, dict[int, str]] = {}
        #: Extra metric families after the standard ones: (name, help, kind, series).
        self.extra_families: list[
            tuple[str, str, str, list[tuple[dict[str, str], Callable[[int], Any]]]]
        ] = []
        #: pod uid -> edits of its pods.json item; node name -> edits of its nodes.json item.
        self.pod_hooks: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.node_hooks: dict[str, Callable[[dict[str, Any]], None]] = {}
        #: pods.json items of pods that are neither JobSet nor Kubeflow pods.
        self.extra_pod_items: list[dict[str, Any]] = []
        self._ip = 2

    # nodes -------------------------------------------------------------------------

    def add_pool(
        self,
        pool: str,
        machine: str,
        count: int,
        *,
        pool_hash: str | None = None,
        suffixes: list[str] | None = None,
        spot: bool = False,
        hosts: bool = False,
        host_ids: dict[int, str] | None = None,
        labels: dict[str, str] | None = None,
        capacity: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        created_days: int = 6,
    ) -> list[Node]:
        ctx = self.ctx
        pool_hash = pool_hash or rand_hex(8, "pool", ctx.cluster, pool)
        block = f"{rand_hex(16, 'block', ctx.cluster)}" if hosts else None
        out = []
        for i in range(count):
            suffix = (suffixes or [])[i] if suffixes else rand_str(LOWER_ALNUM, 4, pool, i)
            name = f"gke-{ctx.cluster}-{pool}-{pool_hash}-{suffix}"
            assert len(name) <= 63, name
            created = ctx.t_ns - created_days * 86400 * NS - rand_int(0, 3600, name) * NS
            node = Node(
                name=name,
                pool=pool,
                zone=ctx.zone,
                machine=machine,
                project=ctx.project,
                instance_id=str(rand_int(10**18, 9 * 10**18, "iid", name)),
                ip=f"10.{rand_int(0, 200, 'net', ctx.cluster)}.0.{self._ip}",
                pod_cidr=f"10.{rand_int(64, 120, 'pods', ctx.cluster)}.{self._ip}.0/24",
                created_ns=created,
                boot_ns=created + 95 * NS,
                spot=spot,
                labels=dict(labels or {}),
                capacity=dict(capacity or {}),
                taints=list(taints or []),
                ready_since_ns=created + 110 * NS,
            )
            self._ip += 1
            if hosts:
                node.block = block
                node.subblock = rand_hex(16, "subblock", ctx.cluster, pool, i // 8)
                node.host = (host_ids or {}).get(i) or rand_hex(32, "host", name)
            self.nodes.append(node)
            out.append(node)
        return out

    def outage(self, node: Node, start_m: int, unknown: int, false: int = 1) -> None:
        """Ready=Unknown for ``unknown`` samples from ``start_m``, then False for ``false``."""
        for m in range(start_m, start_m + unknown):
            node.not_ready[m] = "Unknown"
        for m in range(start_m + unknown, start_m + unknown + false):
            node.not_ready[m] = "False"
        recovered = start_m + unknown + false
        node.boot_ns = self.ctx.at(recovered - 1.6, "boot", node.name)
        node.ready_since_ns = self.ctx.at(recovered - 0.4, "ready", node.name)
        self.event_node(
            node,
            recovered - 0.35,
            "NodeReady",
            f"Node {node.name} status is now: NodeReady",
            component="kubelet",
        )

    # jobsets -----------------------------------------------------------------------

    def add_jobset(
        self, spec: JobSetSpec, restarts_before: int, restart_minutes: list[int]
    ) -> None:
        self.jobsets[spec.name] = spec
        self.restarts[spec.name] = (restarts_before, list(restart_minutes))

    def jobset_uid(self, name: str) -> str:
        return rand_uuid("jobset", self.ctx.cluster, name)

    def attempt(
        self,
        spec: JobSetSpec,
        attempt: int,
        start_m: int,
        end_m: int | None,
        placement: list[Node],
        *,
        run_delay: int = 1,
        running_from: dict[int, int | None] | None = None,
        failed_at: dict[int, int] | None = None,
        unsched: dict[int, tuple[int, int]] | None = None,
        sched_message: str | None = None,
        namespace: str | None = None,
    ) -> list[Pod]:
        """Create the pods of one JobSet attempt (all replicated jobs), started at ``start_m``.

        ``running_from[g]`` overrides the minute pod ``g`` turns Running (None = never).
        """
        pods = []
        for j in range(spec.replicas):
            for p in range(spec.parallelism):
                g = j * spec.parallelism + p
                name = (
                    f"{spec.job_name(j)}-{p}-"
                    f"{rand_str(K8S_ALPHABET, 5, self.ctx.cluster, spec.name, attempt, j, p)}"
                )
                run = (running_from or {}).get(g, start_m + run_delay)
                phases = [(start_m, "Pending")]
                if run is not None:
                    phases.append((run, "Running"))
                if failed_at and g in failed_at:
                    phases.append((failed_at[g], "Failed"))
                pod = Pod(
                    spec=spec,
                    namespace=namespace or self.ctx.namespace,
                    j=j,
                    p=p,
                    attempt=attempt,
                    name=name,
                    node=placement[g]
                    if (run is not None or unsched is None or g not in unsched)
                    else None,
                    start_m=start_m,
                    created_ns=self.ctx.at(start_m - 0.9, "created", name),
                    phases=phases,
                    end_m=end_m,
                    ip=f"10.{rand_int(64, 120, 'pods', self.ctx.cluster)}."
                    f"{rand_int(2, 250, 'pip', name)}.{rand_int(2, 250, 'pip2', name)}",
                )
                if unsched and g in unsched:
                    pod.unsched.append(unsched[g])
                    pod.sched_message = sched_message
                pods.append(pod)
                self.pods.append(pod)
                if (
                    FIRST_MINUTE <= start_m <= LAST_MINUTE
                    and pod.node
                    and run is not None
                    and not (unsched and g in unsched)
                ):
                    self.event_pod(
                        pod,
                        start_m - 0.85 + 0.01 * g,
                        "Scheduled",
                        f"Successfully assigned {pod.namespace}/{pod.name} to {pod.node.name}",
                        component="default-scheduler",
                    )
        return pods

    def coordinator_at(self, spec: JobSetSpec, m: float) -> Pod | None:
        for pod in self.pods:
            if pod.spec is spec and pod.coordinator and pod.phase_at(math.floor(m)) == "Running":
                return pod
        return None

    def pod(self, spec: JobSetSpec, attempt: int, g: int) -> Pod:
        for pod in self.pods:
            if (
                pod.spec is spec
                and pod.attempt == attempt
                and pod.j * spec.parallelism + pod.p == g
            ):
                return pod
        raise KeyError((spec.name, attempt, g))

    # kubeflow jobs -----------------------------------------------------------------

    def kubeflow_uid(self, spec: KubeflowSpec, namespace: str) -> str:
        return rand_uuid(spec.api_kind, self.ctx.cluster, namespace, spec.name)

    def operator_counter(
        self, namespace: str, framework: str, initial: int | None, steps: list[int]
    ) -> None:
        """``training_operator_jobs_restarted_total{job_namespace, framework}``: one +1 step
        per <Kind>Restarting event; ``initial`` None = the series appears at its first step."""
        self.operator_restarts[(namespace, framework)] = (initial, sorted(steps))

    def kf_pods(
        self,
        spec: KubeflowSpec,
        namespace: str,
        incarnation: int,
        start_m: int,
        end_m: int | None,
        placement: dict[tuple[str, int], Node],
        *,
        only: Iterable[tuple[str, int]] | None = None,
        failed_at: dict[tuple[str, int], int] | None = None,
        created_m: float | None = None,
        run_delay: int = 1,
    ) -> list[KfPod]:
        """Pod objects of the job's replicas (all, or ``only`` those re-created), existing
        from ``start_m`` to ``end_m``; ``failed_at[(type, index)]`` = minute it turns Failed."""
        wanted = set(only) if only is not None else None
        out: list[KfPod] = []
        for rtype, count in spec.replicas.items():
            for index in range(count):
                if wanted is not None and (rtype, index) not in wanted:
                    continue
                name = spec.pod_name(rtype, index)
                phases = [(start_m, "Pending"), (start_m + run_delay, "Running")]
                if failed_at and (rtype, index) in failed_at:
                    phases.append((failed_at[(rtype, index)], "Failed"))
                made = created_m if created_m is not None else start_m - 0.9
                pod = KfPod(
                    spec=spec,
                    namespace=namespace,
                    rtype=rtype,
                    index=index,
                    incarnation=incarnation,
                    node=placement[(rtype, index)],
                    start_m=start_m,
                    created_ns=self.ctx.at(made, "created", namespace, name, incarnation),
                    phases=phases,
                    end_m=end_m,
                    ip=f"10.{rand_int(64, 120, 'pods', self.ctx.cluster)}."
                    f"{rand_int(2, 250, 'pip', name, incarnation)}."
                    f"{rand_int(2, 250, 'pip2', name, incarnation)}",
                )
                out.append(pod)
                self.pods.append(pod)
                if FIRST_MINUTE <= start_m <= LAST_MINUTE and pod.node is not None:
                    self.event_pod(
                        pod,
                        made + 0.05 + 0.01 * len(out),
                        "Scheduled",
                        f"Successfully assigned {namespace}/{name} to {pod.node.name}",
                        component="default-scheduler",
                    )
        return out

    def kf_pod(self, spec: KubeflowSpec, rtype: str, index: int, incarnation: int) -> KfPod:
        for pod in self.pods:
            if (
                isinstance(pod, KfPod)
                and pod.spec is spec
                and (pod.rtype, pod.index, pod.incarnation) == (rtype, index, incarnation)
            ):
                return pod
        raise KeyError((spec.name, rtype, index, incarnation))

    def event_job(
        self,
        spec: KubeflowSpec,
        namespace: str,
        m: float,
        reason: str,
        message: str,
        *,
        etype: str = "Normal",
    ) -> dict[str, Any]:
        """An Event the training operator records on the job object (``k8s_cluster``)."""
        ctx = self.ctx
        at = ctx.at(m, "ev", namespace, spec.name, reason, message)
        payload = k8s_event_payload(
            involved={
                "apiVersion": "kubeflow.org/v1",
                "kind": spec.api_kind,
                "name": spec.name,
                "namespace": namespace,
                "uid": self.kubeflow_uid(spec, namespace),
                "resourceVersion": str(rand_int(10**7, 10**8, "jrv", spec.name, at)),
            },
            reason=reason,
            message=message,
            component=spec.operator,
            etype=etype,
            first_ns=at,
            last_ns=at,
            count=1,
            namespace=namespace,
        )
        payload["metadata"]["name"] = (
            f"{spec.name}.{rand_hex(16, 'event', spec.name, reason, message, at)}"
        )
        resource = {
            "cluster_name": ctx.cluster,
            "location": ctx.location,
            "project_id": ctx.project,
        }
        return self.event(
            "k8s_cluster", resource, m, payload, "WARNING" if etype == "Warning" else "INFO"
        )

    def kf_restart(self, failed: list[KfPod], m: float, exit_code: int) -> None:
        """What the operator records when it restarts failed replicas at T+m (restartPolicy
        ExitCode, retryable exit code): ExitedWithCode, the pod deleted, one
        <Kind>Restarting Warning per failed replica type, the pod created again."""
        spec, namespace = failed[0].spec, failed[0].namespace
        for i, pod in enumerate(failed):
            self.event_job(
                spec,
                namespace,
                m - 0.72 + 0.002 * i,
                "ExitedWithCode",
                f"Pod: {namespace}.{pod.name} exited with code {exit_code}",
            )
            self.event_job(
                spec,
                namespace,
                m - 0.7 + 0.002 * i,
                "SuccessfulDeletePod",
                f"Deleted pod: {pod.name}",
            )
        types = [r for r in spec.replicas if any(p.rtype == r for p in failed)]
        for k, rtype in enumerate(types):
            number = sum(1 for p in failed if p.rtype == rtype)
            self.event_job(
                spec,
                namespace,
                m - 0.66 + 0.004 * k,
                f"{spec.api_kind}Restarting",
                f"{spec.api_kind} {namespace}/{spec.name} is restarting because {number} "
                f"{rtype} replica(s) failed.",
                etype="Warning",
            )
        for i, pod in enumerate(failed):
            self.event_job(
                spec,
                namespace,
                m - 0.6 + 0.002 * i,
                "SuccessfulCreatePod",
                f"Created pod: {pod.name}",
            )

    # interruptions -----------------------------------------------------------------

    def interruption(self, pool: str, itype: str, reason: str, m: int) -> None:
        initial, steps = self.interruptions.get((pool, itype, reason), (None, []))
        self.interruptions[(pool, itype, reason)] = (initial, [*steps, m])

    def interruption_constant(self, pool: str, itype: str, reason: str, value: int) -> None:
        self.interruptions[(pool, itype, reason)] = (value, [])

    # log helpers -------------------------------------------------------------------

    def add(self, entry: dict[str, Any]) -> dict[str, Any]:
        self.entries.append(entry)
        return entry

    def container_log(
        self,
        pod: AnyPod,
        m: float,
        text: str,
        *,
        stderr: bool = False,
        key: object = "",
        at_ns: int | None = None,
    ) -> dict[str, Any]:
        """A container line; ``at_ns`` pins the entry timestamp (else derived from ``m``)."""
        ctx = self.ctx
        return self.add(
            make_entry(
                ctx.project,
                log_id="stderr" if stderr else "stdout",
                resource_type="k8s_container",
                resource_labels={
                    "cluster_name": ctx.cluster,
                    "container_name": pod.spec.container,
                    "location": ctx.location,
                    "namespace_name": pod.namespace,
                    "pod_name": pod.name,
                    "project_id": ctx.project,
                },
                at_ns=at_ns if at_ns is not None else ctx.at(m, pod.name, key, text[:40]),
                severity="ERROR" if stderr else "INFO",
                text=text,
                labels=pod_log_labels(pod, self.jobset_uid(pod.spec.name)),
            )
        )

    def node_resource(self, node: Node) -> dict[str, str]:
        ctx = self.ctx
        return {
            "cluster_name": ctx.cluster,
            "location": ctx.location,
            "node_name": node.name,
            "project_id": ctx.project,
        }

    def node_log(
        self,
        node: Node,
        at_ns: int,
        text: str,
        *,
        log_id: str = "node-journal",
        severity: str = "ERROR",
    ) -> dict[str, Any]:
        return self.add(
            make_entry(
                self.ctx.project,
                log_id=log_id,
                resource_type="k8s_node",
                resource_labels=self.node_resource(node),
                at_ns=at_ns,
                severity=severity,
                text=text,
                labels={"compute.googleapis.com/resource_name": node.name},
            )
        )

    def kernel_line(
        self, node: Node, m: float, message: str, key: object = "", ident: str = "kernel"
    ) -> dict[str, Any]:
        at = self.ctx.at(m, node.name, "kernel", key)
        if ident == "kernel":
            up = max(at - node.boot_ns, NS)
            body = f"kernel: [{up // NS:>5d}.{(up % NS) // 1000:06d}] {message}"
        else:
            body = f"{ident}: {message}"
        return self.node_log(node, at, f"{syslog_stamp(at)} {node.name} {body}")

    def kubelet_journal(self, node: Node, m: float, message: str, where: str) -> dict[str, Any]:
        """A kubelet journald record the way GKE ships it (jsonPayload, MESSAGE field)."""
        at = self.ctx.at(m, node.name, "kubelet", message[:30])
        pid = rand_int(1800, 3900, "kubelet-pid", node.name)
        return self.add(
            make_entry(
                self.ctx.project,
                log_id="kubelet",
                resource_type="k8s_node",
                resource_labels=self.node_resource(node),
                at_ns=at,
                severity="INFO",
                json_payload={
                    "MESSAGE": f"{glog_prefix('I', at, pid, where)} {message}",
                    "PRIORITY": "6",
                    "SYSLOG_FACILITY": "3",
                    "SYSLOG_IDENTIFIER": "kubelet",
                    "_BOOT_ID": rand_hex(32, "boot", node.name, node.boot_ns),
                    "_CMDLINE": "/home/kubernetes/bin/kubelet --v=2 --cloud-provider=external",
                    "_COMM": "kubelet",
                    "_EXE": "/home/kubernetes/bin/kubelet",
                    "_HOSTNAME": node.name,
                    "_MACHINE_ID": rand_hex(32, "machine", node.name),
                    "_PID": str(pid),
                    "_SYSTEMD_UNIT": "kubelet.service",
                    "_TRANSPORT": "stdout",
                    "_UID": "0",
                },
                labels={"compute.googleapis.com/resource_name": node.name},
            )
        )

    def event(
        self,
        resource_type: str,
        resource_labels: dict[str, str],
        m: float,
        payload: dict[str, Any],
        severity: str,
    ) -> dict[str, Any]:
        return self.add(
            make_entry(
                self.ctx.project,
                log_id=EVENTS_LOG,
                resource_type=resource_type,
                resource_labels=resource_labels,
                at_ns=self.ctx.at(m, "event", payload["metadata"]["name"], payload["count"]),
                severity=severity,
                json_payload=payload,
            )
        )

    def event_node(
        self,
        node: Node,
        m: float,
        reason: str,
        message: str,
        *,
        component: str = "node-controller",
        etype: str = "Normal",
    ) -> dict[str, Any]:
        at = self.ctx.at(m, "ev", node.name, reason)
        payload = k8s_event_payload(
            involved={
                "apiVersion": "v1",
                "kind": "Node",
                "name": node.name,
                "uid": rand_uuid("node", node.name),
            },
            reason=reason,
            message=message,
            component=component,
            etype=etype,
            first_ns=at,
            last_ns=at,
            count=1,
            host=node.name if component == "kubelet" else None,
        )
        return self.event(
            "k8s_node",
            self.node_resource(node),
            m,
            payload,
            "WARNING" if etype == "Warning" else "INFO",
        )

    def event_pod(
        self,
        pod: AnyPod,
        m: float,
        reason: str,
        message: str,
        *,
        component: str,
        etype: str = "Normal",
        count: int = 1,
        first_m: float | None = None,
    ) -> dict[str, Any]:
        ctx = self.ctx
        at = ctx.at(m, "ev", pod.name, reason, count)
        first = ctx.at(first_m, "ev", pod.name, reason, 1) if first_m is not None else at
        payload = k8s_event_payload(
            involved={
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
                "resourceVersion": str(rand_int(10**7, 10**8, "prv", pod.name)),
            },
            reason=reason,
            message=message,
            component=component,
            etype=etype,
            first_ns=first,
            last_ns=at,
            count=count,
            host=pod.node.name if component == "kubelet" and pod.node else None,
            namespace=pod.namespace,
        )
        payload["metadata"]["name"] = f"{pod.name}.{rand_hex(16, 'event', pod.name, reason, first)}"
        res = {
            "cluster_name": ctx.cluster,
            "location": ctx.location,
            "namespace_name": pod.namespace,
            "pod_name": pod.name,
            "project_id": ctx.project,
        }
        return self.event("k8s_pod", res, m, payload, "WARNING" if etype == "Warning" else "INFO")

    def audit(self, node: Node, m: float, method: str) -> dict[str, Any]:
        at = self.ctx.at(m, "audit", node.name, method)
        return self.add(
            audit_entry(self.ctx.project, node.zone, node.name, node.instance_id, method, at)
        )

    def pool_log(self, node: Node, m: float, text: str, severity: str = "INFO") -> dict[str, Any]:
        ctx = self.ctx
        return self.add(
            make_entry(
                ctx.project,
                log_id=INTERRUPTION_LOG,
                resource_type="gke_nodepool",
                resource_labels={
                    "cluster_name": ctx.cluster,
                    "location": ctx.location,
                    "node_pool_name": node.pool,
                    "project_id": ctx.project,
                },
                at_ns=ctx.at(m, "pool", node.name, text[:20]),
                severity=severity,
                text=text,
            )
        )

    def termination_log(self, node: Node, m: float, reason: str = "Host Error") -> dict[str, Any]:
        return self.node_log(
            node,
            self.ctx.at(m, "termination", node.name),
            f"TerminationEvent: Node '{node.name}' was terminated due to: {reason}",
            log_id=INTERRUPTION_LOG,
            severity="ERROR",
        )

    # compound episodes -------------------------------------------------------------

    def host_failure(
        self,
        node: Node,
        m0: float,
        kernel: list[tuple[str, str]],
        *,
        unknown: int = 4,
        false: int = 1,
        auto_restart: bool = True,
    ) -> None:
        """One host-error episode of ``node`` starting at T+m0 minutes.

        ``kernel`` = [(ident, message)] node-journal lines logged just before the crash.
        """
        for i, (ident, message) in enumerate(kernel):
            self.kernel_line(node, m0 - 0.45 + 0.02 * i, message, key=i, ident=ident)
        self.audit(node, m0 - 0.05, "compute.instances.hostError")
        self.termination_log(node, m0 + 0.08)
        down = math.ceil(m0 + 0.1)
        self.outage(node, down, unknown, false)
        self.event_node(
            node, m0 + 0.62, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady"
        )
        if auto_restart:
            self.audit(node, m0 + 1.3, "compute.instances.automaticRestart")
        self.interruption(node.pool, "TerminationEvent", "HostError", down)

    def preemption(self, node: Node, m0: float, reason: str = "Eviction") -> None:
        self.audit(node, m0, "compute.instances.preempted")
        self.pool_log(
            node,
            m0 + 0.07,
            f"PreemptionEvent: Node '{node.name}' in node pool '{node.pool}' was preempted.",
        )
        down = math.ceil(m0 + 0.1)
        self.outage(node, down, 3, 1)
        self.event_node(
            node, m0 + 0.7, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady"
        )
        self.interruption(node.pool, "PreemptionEvent", reason, down)

    def maintenance(self, node: Node, m0: float) -> None:
        self.pool_log(
            node,
            m0,
            f"MaintenanceEvent: Node '{node.name}' in node pool "
            f"'{node.pool}' is undergoing host maintenance.",
        )
        self.audit(node, m0 + 0.1, "compute.instances.terminateOnHostMaintenance")
        down = math.ceil(m0 + 0.2)
        self.outage(node, down, 4, 1)
        self.event_node(
            node, m0 + 0.75, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady"
        )
        self.interruption(node.pool, "MaintenanceEvent", "HW/SW Maintenance", down)

    # noise -------------------------------------------------------------------------

    def training_noise(
        self,
        spec: JobSetSpec,
        style: str,
        *,
        every: int = 4,
        checkpoint_every: int = 20,
        workers: bool = True,
        quiet: Iterable[tuple[int, int]] = (),
    ) -> None:
        """Ordinary INFO lines from the coordinator (and a few from other workers).

        Nothing is logged in the ``quiet`` minute ranges [a, b) (a hung job) nor while a pod
        of the attempt has failed or sits on a node that is not Ready. Each attempt resumes
        from the last checkpoint the previous one saved.
        """
        quiet = list(quiet)
        steps_per_min = {"maxtext": 27, "megatron": 14, "hf": 9, "diffusion": 130, "jax": 22}[style]
        last_ckpt: int | None = None
        for attempt in sorted({p.attempt for p in self.pods if p.spec is spec}):
            group = [p for p in self.pods if p.spec is spec and p.attempt == attempt]
            coord = next(p for p in group if p.coordinator)
            first_run = next((s for s, ph in coord.phases if ph == "Running"), None)
            if first_run is None:
                continue
            resume = last_ckpt if last_ckpt is not None else 1000 * (40 + attempt)
            if first_run >= FIRST_MINUTE:
                self.startup_lines(coord, first_run + 0.2, style, resume)

            def disturbed(m: int, group: list[Pod] = group) -> bool:
                for x in (m, m + 1):
                    if any(a <= x < b for a, b in quiet):
                        return True
                    for p in group:
                        if p.phase_at(x) not in ("Running", None if x == m + 1 else "-"):
                            return True
                        if p.node is not None and p.node.not_ready.get(x):
                            return True
                return False

            last = coord.end_m if coord.end_m is not None else LAST_MINUTE + 1
            for m in range(first_run, min(last, LAST_MINUTE + 1)):
                if coord.phase_at(m) != "Running" or disturbed(m):
                    continue
                k = m - first_run
                step = resume + k * steps_per_min
                if k % checkpoint_every == checkpoint_every - 1:
                    last_ckpt = step
                    if m >= FIRST_MINUTE:
                        self.container_log(
                            coord,
                            m + 0.8,
                            checkpoint_line(style, step, spec, self.ctx),
                            key=("ckpt", m),
                        )
                if m < FIRST_MINUTE or k % every != 1:
                    continue
                self.container_log(
                    coord, m + 0.55, train_line(style, step, coord, self.ctx), key=("train", m)
                )
                if workers and k % (every * 4) == 1:
                    for other in group:
                        if (
                            not other.coordinator
                            and other.p == 1
                            and other.phase_at(m) == "Running"
                        ):
                            self.container_log(
                                other, m + 0.58, worker_line(style, step, other), key=("worker", m)
                            )

    def startup_lines(self, pod: Pod, m: float, style: str, resume: int) -> None:
        spec = pod.spec
        lines = {
            "maxtext": [
                f"Num_devices: {4 * spec.size}, shape (1, {spec.replicas}, {4 * spec.parallelism},"
                " 1, 1, 1, 1, 1)",
                "Setting up checkpoint logger...",
                f"restoring from this run's directory step {resume}",
                "Memstats: After params initialized:",
            ],
            "jax": [
                f"JAX distributed initialized: process 0 of {spec.size}",
                f"Restored checkpoint step {resume}",
            ],
            "megatron": [
                "> initializing torch distributed ...",
                "NCCL version 2.21.5+cuda12.4",
                f"  loading checkpoint from /ckpt/{spec.name} at iteration {resume}",
                "> building train, validation, and test datasets ...",
            ],
            "hf": [
                "***** Running training *****",
                f"  Resuming from checkpoint-{resume}",
                "  Num examples = 1,804,211",
            ],
            "diffusion": [
                f"[rank0] world size {8 * spec.size}, resuming from step {resume}",
                "[rank0] EMA weights loaded",
            ],
        }[style]
        for i, line in enumerate(lines):
            self.container_log(pod, m + 0.03 * i, line, key=("startup", i))
        if style in ("megatron", "hf", "diffusion"):
            ip = pod.ip
            self.container_log(
                pod,
                m + 0.15,
                f"{pod.name}:{rand_int(100, 999, 'pid', pod.name)}:"
                f"{rand_int(100, 999, 'pid2', pod.name)} [0] NCCL INFO Bootstrap : "
                f"Using eth0:{ip}<0>",
                key="nccl-info",
            )
            self.container_log(
                pod,
                m + 0.16,
                f"{pod.name}:{rand_int(100, 999, 'pid', pod.name)}:"
                f"{rand_int(100, 999, 'pid2', pod.name)} [0] NCCL INFO comm 0x5589a2c0 "
                f"rank 0 nranks {8 * spec.size} cudaDev 0 nvmlDev 0 busId 4000 - Init COMPLETE",
                key="nccl-info2",
            )

    def kubelet_noise(self, every: int = 29) -> None:
        for i, node in enumerate(self.nodes):
            for m in range(FIRST_MINUTE + 3 + 5 * i, LAST_MINUTE, every):
                if node.not_ready.get(m):
                    continue
                if (m + i) % 2:
                    self.kubelet_journal(
                        node, m + 0.3, "SyncLoop (PLEG): event for pod", "kubelet.go:2462"
                    )
                else:
                    self.kubelet_journal(
                        node,
                        m + 0.3,
                        '"Image garbage collection succeeded" freedBytes=0',
                        "image_gc_manager.go:392",
                    )

    # output ------------------------------------------------------------------------

    def metrics_text(self) -> str:
        ctx = self.ctx
        minutes = range(FIRST_MINUTE, LAST_MINUTE + 1)
        out: list[str] = []

        def family(
            name: str,
            series: Iterable[tuple[dict[str, str], Callable[[int], Any]]],
            help_text: str,
            kind: str = "gauge",
        ) -> None:
            # An OpenMetrics counter family drops the _total its samples carry.
            family_name = name.removesuffix("_total") if kind == "counter" else name
            out.append(f"# HELP {family_name} {help_text}")
            out.append(f"# TYPE {family_name} {kind}")
            for labels, value_at in series:
                lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
                for m in minutes:
                    v = value_at(m)
                    if v is None:
                        continue
                    out.append(f"{name}{{{lab}}} {v} {ctx.sample_s(m)}")

        def restarts_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
            for name, (before, steps) in sorted(self.restarts.items()):
                yield (
                    {"cluster": ctx.cluster, "namespace": ctx.namespace, "jobset_name": name},
                    lambda m, b=before, s=steps: b + sum(1 for x in s if x <= m),
                )

        if self.restarts or not self.operator_restarts:
            family(
                "kube_jobset_restarts",
                restarts_series(),
                "JobSet status.restarts (lifetime total).",
            )

        def operator_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
            for (namespace, framework), (initial, steps) in sorted(self.operator_restarts.items()):
                first = FIRST_MINUTE if initial is not None else min(steps)

                def value(
                    m: int, i: int | None = initial, s: list[int] = steps, f: int = first
                ) -> int | None:
                    if m < f:
                        return None
                    return (i or 0) + sum(1 for x in s if x <= m)

                yield (
                    {"cluster": ctx.cluster, "job_namespace": namespace, "framework": framework},
                    value,
                )

        if self.operator_restarts:
            family(
                "training_operator_jobs_restarted_total",
                operator_series(),
                "Counts number of jobs restarted",
                kind="counter",
            )

        def interruption_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
            for (pool, itype, reason), (initial, steps) in sorted(self.interruptions.items()):
                first = FIRST_MINUTE if initial is not None else min(steps)

                def value(
                    m: int, i: int | None = initial, s: list[int] = steps, f: int = first
                ) -> int | None:
                    if m < f:
                        return None
                    return (i or 0) + sum(1 for x in s if x <= m)

                yield (
                    {
                        "cluster_name": ctx.cluster,
                        "node_pool_name": pool,
                        "interruption_type": itype,
                        "interruption_reason": reason,
                    },
                    value,
                )

        if self.interruptions:
            family(
                "kubernetes_io:node_pool_interruption_count",
                interruption_series(),
                "Node pool interruptions (cumulative per label set).",
            )

        def node_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
            for node in sorted(self.nodes, key=lambda n: n.name):
                for status in ("False", "True", "Unknown"):
                    yield (
                        {
                            "cluster_name": ctx.cluster,
                            "node_name": node.name,
                            "node_pool_name": node.pool,
                            "condition": "Ready",
                            "status": status,
                        },
                        lambda m, n=node, st=status: int(n.not_ready.get(m, "True") == st),
                    )
                pressure = self.node_pressure.get(node.name)
                for condition in sorted(set((pressure or {}).values())):
                    for status in ("False", "True"):
                        yield (
                            {
                                "cluster_name": ctx.cluster,
                                "node_name": node.name,
                                "node_pool_name": node.pool,
                                "condition": condition,
                                "status": status,
                            },
                            lambda m, p=pressure, c=condition, st=status: int(
                                ((p or {}).get(m) == c) == (st == "True")
                            ),
                        )

        family(
            "kubernetes_io:node_status_condition",
            node_series(),
            "Node conditions (Ready, MemoryPressure, DiskPressure), 1 for the current status."
            if self.node_pressure
            else "Node Ready condition, 1 for the current status.",
        )

        # Pod metrics cover the workload's pods only, as the workflow's pod=~"<workload>.*"
        # queries return them.
        pods = sorted(
            (p for p in self.pods if p.name.startswith(ctx.workload + "-")), key=lambda p: p.name
        )
        # A Kubeflow pod re-created under the same name continues the same series.
        by_name: dict[tuple[str, str], list[AnyPod]] = {}
        for pod in pods:
            by_name.setdefault((pod.namespace, pod.name), []).append(pod)

        def phase_of(m: int, objects: list[AnyPod]) -> str | None:
            return next((ph for ph in (o.phase_at(m) for o in objects) if ph is not None), None)

        def phase_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
            for (namespace, name), objects in by_name.items():
                for phase in PHASES:
                    yield (
                        {
                            "cluster": ctx.cluster,
                            "namespace": namespace,
                            "pod": name,
                            "phase": phase,
                        },
                        lambda m, o=objects, ph=phase: (
                            None if phase_of(m, o) is None else int(phase_of(m, o) == ph)
                        ),
                    )

        family("kube_pod_status_phase", phase_series(), "Pod phase, 1 for the current phase.")

        def unsched_series() -> Iterable[tuple[dict[str, str], Callable[[int], Any]]]:
            for (namespace, name), objects in by_name.items():
                if not any(o.unsched for o in objects):
                    continue
                yield (
                    {
                        "cluster_name": ctx.cluster,
                        "namespace_name": namespace,
                        "pod_name": name,
                    },
                    lambda m, o=objects: (
                        None
                        if phase_of(m, o) is None
                        else int(any(x.unsched_at(m) for x in o if x.phase_at(m) is not None))
                    ),
                )

        # Only pods that are unschedulable at some point get a series (0/1 over their
        # lifetime); a missing series means the pod was never unschedulable.
        if any(p.unsched for p in pods):
            family(
                "kubernetes_io:pod_status_unschedulable",
                unsched_series(),
                "1 while the pod is unschedulable.",
            )
        for name, help_text, kind, extra in self.extra_families:
            family(name, extra, help_text, kind)
        out.append("# EOF")
        return "\n".join(out) + "\n"

    def nodes_json(self) -> dict[str, Any]:
        ctx = self.ctx
        region = ctx.zone.rsplit("-", 1)[0]
        items = []
        for node in self.nodes:
            labels = {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": node.machine,
                "beta.kubernetes.io/os": "linux",
                "cloud.google.com/gke-boot-disk": "hyperdisk-balanced"
                if node.machine.startswith(("a3", "ct6e", "ct5p"))
                else "pd-balanced",
                "cloud.google.com/gke-container-runtime": "containerd",
                "cloud.google.com/gke-cpu-scaling-level": "4",
                "cloud.google.com/gke-logging-variant": "DEFAULT",
                "cloud.google.com/gke-max-pods-per-node": "110",
                "cloud.google.com/gke-nodepool": node.pool,
                "cloud.google.com/gke-os-distribution": "cos",
                "cloud.google.com/gke-provisioning": "spot" if node.spot else "standard",
                "cloud.google.com/gke-stack-type": "IPV4",
                "cloud.google.com/machine-family": node.machine.split("-")[0],
                "cloud.google.com/private-node": "false",
                "failure-domain.beta.kubernetes.io/region": region,
                "failure-domain.beta.kubernetes.io/zone": node.zone,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": node.machine,
                "topology.gke.io/zone": node.zone,
                "topology.kubernetes.io/region": region,
                "topology.kubernetes.io/zone": node.zone,
            }
            if node.spot:
                labels["cloud.google.com/gke-spot"] = "true"
            if node.host:
                labels["cloud.google.com/gce-topology-block"] = node.block or ""
                labels["cloud.google.com/gce-topology-subblock"] = node.subblock or ""
                labels["cloud.google.com/gce-topology-host"] = node.host
            labels.update(node.labels)
            status = node.not_ready.get(LAST_MINUTE, "True")
            hb = ctx.at(LAST_MINUTE - 0.2, "hb", node.name)
            cpu = node.capacity.get("cpu", "8")
            capacity = {
                "cpu": cpu,
                "ephemeral-storage": "98831908Ki",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": node.capacity.get("memory", "32876680Ki"),
                "pods": "110",
            }
            capacity.update({k: v for k, v in node.capacity.items() if k not in capacity})
            allocatable = dict(capacity)
            allocatable["cpu"] = f"{int(cpu) * 1000 - 200 - int(cpu) * 10}m"
            items.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "annotations": {
                            "container.googleapis.com/instance_id": node.instance_id,
                            "node.alpha.kubernetes.io/ttl": "0",
                            "node.gke.io/last-applied-node-labels": ",".join(
                                f"{k}={v}"
                                for k, v in sorted(labels.items())
                                if k.startswith("cloud.google.com/gke-")
                            ),
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                        },
                        "creationTimestamp": fmt_ts(node.created_ns, 0),
                        "labels": labels,
                        "name": node.name,
                        "resourceVersion": str(rand_int(10**7, 10**8, "nrv", node.name)),
                        "uid": rand_uuid("node", node.name),
                    },
                    "spec": {
                        "podCIDR": node.pod_cidr,
                        "podCIDRs": [node.pod_cidr],
                        "providerID": f"gce://{node.project}/{node.zone}/{node.name}",
                        **({"taints": node.taints} if node.taints else {}),
                    },
                    "status": {
                        "addresses": [
                            {"address": node.ip, "type": "InternalIP"},
                            {"address": "", "type": "ExternalIP"},
                            {"address": node.name, "type": "Hostname"},
                        ],
                        "allocatable": allocatable,
                        "capacity": capacity,
                        "conditions": node_conditions(node, status, hb),
                        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                        "nodeInfo": {
                            "architecture": "amd64",
                            "bootID": rand_uuid("boot", node.name, node.boot_ns),
                            "containerRuntimeVersion": "containerd://1.7.24",
                            "kernelVersion": "6.6.72+",
                            "kubeProxyVersion": GKE_VERSION,
                            "kubeletVersion": GKE_VERSION,
                            "machineID": rand_hex(32, "machine", node.name),
                            "operatingSystem": "linux",
                            "osImage": "Container-Optimized OS from Google",
                            "systemUUID": rand_uuid("sys", node.name),
                        },
                    },
                }
            )
        for item in items:
            hook = self.node_hooks.get(item["metadata"]["name"])
            if hook is not None:
                hook(item)
        return {
            "apiVersion": "v1",
            "items": items,
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }

    def pods_json(self) -> dict[str, Any]:
        items = [
            pod_item(self, p) if isinstance(p, Pod) else kf_pod_item(self, p)
            for p in self.pods
            if p.end_m is None
        ]
        for item in items:
            hook = self.pod_hooks.get(item["metadata"]["uid"])
            if hook is not None:
                hook(item)
        items += self.extra_pod_items
        items.sort(key=lambda i: (i["metadata"]["namespace"], i["metadata"]["name"]))
        return {
            "apiVersion": "v1",
            "items": items,
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }

    def scenario_json(self) -> dict[str, Any]:
        c = self.ctx
        return {
            "description": self.description,
            "context": {
                "project": c.project,
                "location": c.location,
                "cluster": c.cluster,
                "namespace": c.namespace,
                "workload": c.workload,
                "issue_time": c.issue_time,
                **({"workload_kind": c.workload_kind} if c.workload_kind else {}),
            },
            "expect": self.expect,
        }

    def write(self, root: Path) -> dict[str, int]:
        out_dir = root / self.slug
        out_dir.mkdir(parents=True, exist_ok=True)
        entries = sorted(self.entries, key=lambda e: (e["timestamp"], e["insertId"]), reverse=True)
        files = {
            "scenario.json": dump(self.scenario_json()),
            "logs.json": dump(entries),
            "metrics.om": self.metrics_text(),
            "nodes.json": dump(self.nodes_json()),
            "pods.json": dump(self.pods_json()),
        }
        sizes = {}
        for name, text in files.items():
            (out_dir / name).write_text(text, encoding="utf-8")
            sizes[name] = len(text.encode())
        return sizes


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def node_conditions(node: Node, status: str, hb: int) -> list[dict[str, str]]:
    since = fmt_ts(node.ready_since_ns, 0)
    booted = fmt_ts(node.boot_ns + 40 * NS, 0)
    hbs = fmt_ts(hb, 0)
    npd = [
        (
            "FrequentContainerdRestart",
            "NoFrequentContainerdRestart",
            "containerd is functioning properly",
        ),
        ("KernelDeadlock", "KernelHasNoDeadlock", "kernel has no deadlock"),
        ("ReadonlyFilesystem", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
        ("FrequentKubeletRestart", "NoFrequentKubeletRestart", "kubelet is functioning properly"),
        (
            "CorruptDockerOverlay2",
            "NoCorruptDockerOverlay2",
            "docker overlay2 is functioning properly",
        ),
        (
            "FrequentUnregisterNetDevice",
            "NoFrequentUnregisterNetDevice",
            "node is functioning properly",
        ),
    ]
    out = [
        {
            "lastHeartbeatTime": hbs,
            "lastTransitionTime": booted,
            "message": msg,
            "reason": reason,
            "status": "False",
            "type": ctype,
        }
        for ctype, reason, msg in npd
    ]
    out.append(
        {
            "lastHeartbeatTime": hbs,
            "lastTransitionTime": fmt_ts(node.created_ns, 0),
            "message": "NodeController create implicit route",
            "reason": "RouteCreated",
            "status": "False",
            "type": "NetworkUnavailable",
        }
    )
    for ctype, reason, msg in [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]:
        out.append(
            {
                "lastHeartbeatTime": hbs,
                "lastTransitionTime": booted,
                "message": msg,
                "reason": reason,
                "status": "False",
                "type": ctype,
            }
        )
    if status == "True":
        out.append(
            {
                "lastHeartbeatTime": hbs,
                "lastTransitionTime": since,
                "message": "kubelet is posting ready status",
                "reason": "KubeletReady",
                "status": "True",
                "type": "Ready",
            }
        )
    else:
        out.append(
            {
                "lastHeartbeatTime": hbs,
                "lastTransitionTime": hbs,
                "message": "Kubelet stopped posting node status.",
                "reason": "NodeStatusUnknown",
                "status": status,
                "type": "Ready",
            }
        )
    return out


def pod_item(sc: Scenario, pod: Pod) -> dict[str, Any]:
    spec = pod.spec
    labels = pod.labels(sc.jobset_uid(spec.name))
    created = fmt_ts(pod.created_ns, 0)
    annotations = {k: v for k, v in labels.items() if k.startswith("jobset.sigs.k8s.io/")}
    annotations["batch.kubernetes.io/job-completion-index"] = str(pod.p)
    if spec.resources.get("google.com/tpu"):
        annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] = "cloud.google.com/gke-nodepool"
    container: dict[str, Any] = {
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "name": spec.container,
        "ports": [{"containerPort": 8471, "protocol": "TCP"}]
        if "google.com/tpu" in spec.resources
        else [{"containerPort": 29500, "protocol": "TCP"}],
        "resources": {"limits": dict(spec.resources), "requests": dict(spec.resources)},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "hostname": f"{spec.job_name(pod.j)}-{pod.p}",
        "nodeSelector": dict(spec.node_selector),
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 1000 if spec.priority_class else 0,
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "subdomain": spec.name,
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            *spec.tolerations,
            *_default_tolerations(),
        ],
    }
    if spec.priority_class:
        pod_spec["priorityClassName"] = spec.priority_class
    status = pod_status(sc, pod, pod_spec, spec.image, spec.container)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": annotations,
            "creationTimestamp": created,
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "generateName": f"{spec.job_name(pod.j)}-{pod.p}-",
            "labels": labels,
            "name": pod.name,
            "namespace": pod.namespace,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Job",
                    "name": spec.job_name(pod.j),
                    "uid": pod.job_uid,
                }
            ],
            "resourceVersion": str(rand_int(10**7, 10**8, "prv", pod.name)),
            "uid": pod.uid,
        },
        "spec": pod_spec,
        "status": status,
    }


def pod_status(
    sc: Scenario, pod: AnyPod, pod_spec: dict[str, Any], image: str, container: str
) -> dict[str, Any]:
    """The status of a pod at T+35m; sets ``nodeName`` in ``pod_spec`` once it is bound."""
    ctx = sc.ctx
    phase = pod.phase_at(LAST_MINUTE) or "Pending"
    created = fmt_ts(pod.created_ns, 0)
    run_m = next((s for s, ph in pod.phases if ph == "Running"), None)
    started = fmt_ts(ctx.at(run_m - 0.3, "started", pod.name), 0) if run_m is not None else None
    status: dict[str, Any] = {"phase": phase, "qosClass": "Guaranteed"}
    if pod.node is not None and phase != "Pending":
        pod_spec["nodeName"] = pod.node.name
        ready_at = fmt_ts(ctx.at((run_m or 0) + 0.1, "ready", pod.name), 0)
        status.update(
            {
                "conditions": [
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": started,
                        "status": "True",
                        "type": "PodReadyToStartContainers",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "True",
                        "type": "Initialized",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": ready_at,
                        "status": "True",
                        "type": "Ready",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": ready_at,
                        "status": "True",
                        "type": "ContainersReady",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "True",
                        "type": "PodScheduled",
                    },
                ],
                "containerStatuses": [
                    {
                        "containerID": "containerd://" + rand_hex(64, "cid", pod.name),
                        "image": image,
                        "imageID": image.split(":")[0] + "@sha256:" + rand_hex(64, "img", image),
                        "lastState": {},
                        "name": container,
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "state": {"running": {"startedAt": started}},
                    }
                ],
                "hostIP": pod.node.ip,
                "hostIPs": [{"ip": pod.node.ip}],
                "podIP": pod.ip,
                "podIPs": [{"ip": pod.ip}],
                "startTime": created,
            }
        )
    else:
        status["conditions"] = [
            {
                "lastProbeTime": None,
                "lastTransitionTime": created,
                "message": pod.sched_message or "",
                "reason": "Unschedulable",
                "status": "False",
                "type": "PodScheduled",
            }
        ]
    return status


def kf_pod_item(sc: Scenario, pod: KfPod) -> dict[str, Any]:
    """A pod as the Kubeflow training operator creates it (owner: the TFJob/PyTorchJob)."""
    spec = pod.spec
    port_name, port = spec.port
    container: dict[str, Any] = {
        "env": [*spec.env, *kf_env(sc, pod)],
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "name": spec.container,
        "ports": [{"containerPort": port, "name": port_name, "protocol": "TCP"}],
        "resources": {
            "limits": dict(spec.resources[pod.rtype]),
            "requests": dict(spec.resources[pod.rtype]),
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if spec.command:
        container["command"] = list(spec.command)
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "nodeSelector": dict(spec.node_selector.get(pod.rtype, {})),
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        # restartPolicy ExitCode: the pod itself never restarts; the operator re-creates it.
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            *spec.tolerations.get(pod.rtype, []),
            *_default_tolerations(),
        ],
    }
    status = pod_status(sc, pod, pod_spec, spec.image, spec.container)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": fmt_ts(pod.created_ns, 0),
            "labels": pod.labels(),
            "name": pod.name,
            "namespace": pod.namespace,
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": spec.api_kind,
                    "name": spec.name,
                    "uid": sc.kubeflow_uid(spec, pod.namespace),
                }
            ],
            "resourceVersion": str(rand_int(10**7, 10**8, "prv", pod.uid)),
            "uid": pod.uid,
        },
        "spec": pod_spec,
        "status": status,
    }


def kf_env(sc: Scenario, pod: KfPod) -> list[dict[str, str]]:
    """What the operator adds to the framework's container: TF_CONFIG for TFJob, the
    torch.distributed rendezvous variables for PyTorchJob."""
    spec = pod.spec
    _, port = spec.port
    if spec.api_kind == "TFJob":
        cluster = {
            rtype.lower(): [
                f"{spec.pod_name(rtype, i)}.{pod.namespace}.svc:{port}" for i in range(count)
            ]
            for rtype, count in spec.replicas.items()
        }
        config = {
            "cluster": cluster,
            "task": {"type": pod.rtype.lower(), "index": pod.index},
            "environment": "cloud",
        }
        return [{"name": "TF_CONFIG", "value": json.dumps(config, separators=(",", ":"))}]
    world = sum(spec.replicas.values())
    rank = 0 if pod.rtype == "Master" else pod.index + int(spec.has_chief)
    return [
        {"name": "MASTER_PORT", "value": str(port)},
        {"name": "MASTER_ADDR", "value": spec.pod_name("Master", 0)},
        {"name": "WORLD_SIZE", "value": str(world)},
        {"name": "RANK", "value": str(rank)},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]


# --- training log lines ---------------------------------------------------------------


def train_line(style: str, step: int, pod: Pod, ctx: Context) -> str:
    loss = 2.9 * math.exp(-step / 90000) + 1.35 + rand_float(-0.03, 0.03, "loss", step)
    if style == "maxtext":
        return (
            f"completed step: {step}, seconds: {rand_float(2.18, 2.26, 's', step):.3f}, "
            f"TFLOP/s/device: {rand_float(318, 324, 'tf', step):.3f}, "
            f"Tokens/s/device: {rand_float(3700, 3760, 'tok', step):.3f}, "
            f"total_weights: 2097152, loss: {loss:.3f}"
        )
    if style == "jax":
        return (
            f"step={step} loss={loss:.4f} grad_norm={rand_float(0.2, 0.5, 'gn', step):.3f} "
            f"examples/s={rand_float(880, 905, 'ex', step):.1f}"
        )
    if style == "megatron":
        return (
            f" iteration {step:>8d}/  320000 | consumed samples: {step * 1024:>12d} | "
            f"elapsed time per iteration (ms): {rand_float(4180, 4260, 'it', step):.1f} | "
            f"learning rate: {rand_float(5.9, 6.0, 'lr', step):.3f}E-05 | "
            f"global batch size:  1024 | lm loss: {loss:.6E} | loss scale: 1.0 | "
            f"grad norm: {rand_float(0.3, 0.5, 'gn', step):.3f} | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
    if style == "hf":
        return (
            f"{{'loss': {loss - 0.6:.4f}, 'grad_norm': {rand_float(0.5, 1.2, 'gn', step):.4f}, "
            f"'learning_rate': {rand_float(1.5, 2.0, 'lr', step):.4e}, "
            f"'epoch': {step / 40000:.2f}}}"
        )
    return (
        f"[rank0] step {step} | loss {loss / 12:.4f} | lr 1.00e-04 | "
        f"it/s {rand_float(2.2, 2.4, 'its', step):.2f}"
    )


def worker_line(style: str, step: int, pod: Pod) -> str:
    if style in ("maxtext", "jax"):
        worker = pod.j * pod.spec.parallelism + pod.p
        return f"Worker {worker}: per-host data iterator at step {step}"
    rank = 8 * (pod.j * pod.spec.parallelism + pod.p)
    return f"[rank{rank}] dataloader: prefetch queue depth 8, step {step}"


def checkpoint_line(style: str, step: int, spec: JobSetSpec, ctx: Context) -> str:
    bucket = f"gs://{ctx.project}-ckpt/{spec.name}"
    if style in ("maxtext", "jax"):
        return f"Saving checkpoint for step {step} to {bucket}/checkpoints/{step}"
    if style == "hf":
        return f"Saving model checkpoint to /ckpt/{spec.name}/checkpoint-{step}"
    return f"saving checkpoint at iteration {step:>8d} to {bucket}"


# --- node / jobset templates ----------------------------------------------------------


TPU_TOLERATION = [{"effect": "NoSchedule", "key": "google.com/tpu", "operator": "Exists"}]
GPU_TOLERATION = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]
TPU_TAINT = [{"effect": "NoSchedule", "key": "google.com/tpu", "value": "present"}]
GPU_TAINT = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]


def tpu_labels(accel: str, topology: str) -> dict[str, str]:
    return {
        "cloud.google.com/gke-tpu-accelerator": accel,
        "cloud.google.com/gke-tpu-topology": topology,
        "cloud.google.com/gke-accelerator-count": "4",
    }


def gpu_labels(accel: str, count: int = 8) -> dict[str, str]:
    return {
        "cloud.google.com/gke-accelerator": accel,
        "cloud.google.com/gke-accelerator-count": str(count),
        "cloud.google.com/gke-gpu": "true",
        "cloud.google.com/gke-gpu-driver-version": "latest",
    }


def tpu_capacity(cpu: int, mem_ki: int) -> dict[str, str]:
    return {"cpu": str(cpu), "memory": f"{mem_ki}Ki", "google.com/tpu": "4"}


def gpu_capacity(cpu: int, mem_ki: int, gpus: int = 8) -> dict[str, str]:
    return {"cpu": str(cpu), "memory": f"{mem_ki}Ki", "nvidia.com/gpu": str(gpus)}


def expect(
    root: str, path: str, suspects: list[dict[str, Any]] | None = None, loop: bool = True
) -> dict[str, Any]:
    return {
        "restart_loop": loop,
        "root_cause": root,
        "remediation_path": path,
        "suspect_hosts": suspects or [],
    }


# --- scenarios ------------------------------------------------------------------------


def scenario_spot_preemption() -> Scenario:
    ctx = Context(
        project="acme-ml-spot",
        location="us-west4",
        zone="us-west4-a",
        cluster="tpu-spot-cluster",
        namespace="training",
        workload="gemma-7b-finetune",
        issue_time="2026-03-11T14:42:00Z",
    )
    sc = Scenario(
        "spot-preemption",
        "Two-slice TPU v5e JobSet on Spot node pools (one pool per slice). Spot VMs are "
        "preempted at T-22m, T-9m (Eviction) and T+6m (Defragmentation); each preemption is "
        "followed by a JobSet restart (restarts 2 -> 5 inside the window). An older preemption "
        "at T-70m (restart 1 -> 2) lies before the window and must not be counted. Spot nodes "
        "carry no gce-topology-host label; their brief NotReady runs are explained by the "
        "preemptions.",
        ctx,
        expect("spot_preemption", "avoid_preemption"),
    )
    common = dict(
        spot=True,
        labels=tpu_labels("tpu-v5-lite-podslice", "2x4"),
        capacity=tpu_capacity(112, 197990396),
        taints=TPU_TAINT,
    )
    pool0 = sc.add_pool("v5e-spot-0", "ct5lp-hightpu-4t", 2, **common)  # type: ignore[arg-type]
    pool1 = sc.add_pool("v5e-spot-1", "ct5lp-hightpu-4t", 2, **common)  # type: ignore[arg-type]
    placement = pool0 + pool1
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="slice",
        replicas=2,
        parallelism=2,
        container="jax-tpu",
        image="us-docker.pkg.dev/acme-ml-spot/train/gemma-ft:2026.03.02",
        resources={"google.com/tpu": "4"},
        node_selector={
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
            "cloud.google.com/gke-tpu-topology": "2x4",
            "cloud.google.com/gke-spot": "true",
        },
        tolerations=TPU_TOLERATION,
    )
    # (preemption minute, node, reason, restart minute)
    events = [
        (-70.4, pool1[0], "Eviction", -68),
        (-22.3, pool0[0], "Eviction", -20),
        (-8.7, pool1[1], "Eviction", -7),
        (5.6, pool0[1], "Defragmentation", 7),
    ]
    sc.add_jobset(spec, 1, [r for *_, r in events])
    for m0, node, reason, _ in events:
        sc.preemption(node, m0, reason)
    starts = [-400] + [r for *_, r in events]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        running: dict[int, int | None] = {}
        failed: dict[int, int] = {}
        if k > 0:
            _, node, _, r = events[k - 1]
            g = placement.index(node)
            back = max(n for n in node.not_ready) + 1  # node Ready again
            running[g] = max(back, r + 1)
        if end is not None:
            m0, node, _, r = events[k]
            failed[placement.index(node)] = math.ceil(m0)
        sc.attempt(spec, 1 + k, start, end, placement, running_from=running, failed_at=failed)
    for m0, node, _, _ in events:
        coord = sc.coordinator_at(spec, m0)
        if coord and coord.node is not node:
            sc.container_log(
                coord,
                m0 + 0.5,
                "Received SIGTERM from the job controller, stopping training loop "
                "after the current step",
                key="sigterm",
            )
    sc.training_noise(spec, "jax")
    sc.kubelet_noise()
    return sc


FAULTY_HOST = "b7a3c1e2f4d5a6b7c8d9e0f1a2b3c4d5"


def scenario_faulty_host() -> Scenario:
    ctx = Context(
        project="customer-ai-project-123",
        location="us-east5",
        zone="us-east5-a",
        cluster="tpu-cluster-prod",
        namespace="default",
        workload="llama3-70b-training",
        issue_time="2026-05-20T08:15:00Z",
    )
    sc = Scenario(
        "faulty-host",
        "TPU v5p slice (4 hosts, reserved block) running a JobSet. Node "
        "gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2 on physical host "
        f"{FAULTY_HOST} fails twice inside the window: at T-20m (kernel BUG, "
        "node-problem-detector exit, hostError, TerminationEvent, NodeNotReady, Ready=Unknown "
        "for 4 min, automaticRestart) and again at T+5m (APEI/MCE hardware errors, kernel "
        "panic, same chain). Each failure triggers one JobSet restart (6 -> 8) and the new "
        "pod waits on the recovering node (a FailedScheduling for the unreachable taint). "
        "The other three TPU nodes sit on other hosts and stay healthy.",
        ctx,
        expect(
            "faulty_host",
            "isolate_host",
            [
                {
                    "host": FAULTY_HOST,
                    "nodes": ["gke-tpu-cluster-prod-tpu-pool-3f9a2b1c-x7k2"],
                    "failures": 2,
                }
            ],
        ),
    )
    tpu = sc.add_pool(
        "tpu-pool",
        "ct5p-hightpu-4t",
        4,
        pool_hash="3f9a2b1c",
        suffixes=["m4p8", "r2d6", "x7k2", "w9c3"],
        hosts=True,
        host_ids={2: FAULTY_HOST},
        labels=tpu_labels("tpu-v5p-slice", "2x2x4"),
        capacity=tpu_capacity(208, 463475916),
        taints=TPU_TAINT,
    )
    bad = tpu[2]
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="slice",
        replicas=1,
        parallelism=4,
        container="maxtext",
        image="us-docker.pkg.dev/customer-ai-project-123/maxtext/maxtext-runner:2026-05-12",
        resources={"google.com/tpu": "4"},
        node_selector={
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
            "cloud.google.com/gke-tpu-topology": "2x2x4",
        },
        tolerations=TPU_TOLERATION,
    )
    ep1, ep2 = -20.3, 4.8
    r1, r2 = -18, 7
    sc.add_jobset(spec, 6, [r1, r2])
    sc.host_failure(
        bad,
        ep1,
        [
            ("kernel", "BUG: unable to handle kernel paging request at 0000000000002008"),
            ("kernel", "#PF: supervisor read access in kernel mode"),
            ("kernel", "Oops: 0000 [#1] PREEMPT SMP NOPTI"),
            (
                "systemd[1]",
                "node-problem-detector.service: Main process exited, code=exited, status=1/FAILURE",
            ),
        ],
    )
    back1 = max(bad.not_ready) + 1
    sc.host_failure(
        bad,
        ep2,
        [
            (
                "kernel",
                "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
            ),
            ("kernel", "{1}[Hardware Error]: event severity: fatal"),
            (
                "kernel",
                "mce: [Hardware Error]: CPU 47: Machine Check Exception: 5 Bank 12: "
                "be00000000800400",
            ),
            ("kernel", "Kernel panic - not syncing: Fatal machine check"),
        ],
    )
    back2 = max(bad.not_ready) + 1
    msg = (
        "0/4 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }, 3 Insufficient google.com/tpu. preemption: "
        "0/4 nodes are available: 1 Preemption is not helpful for scheduling, 3 No "
        "preemption victims found for incoming pod."
    )
    sc.attempt(spec, 6, -500, r1, tpu, failed_at={2: math.ceil(ep1)})
    sc.attempt(
        spec,
        7,
        r1,
        r2,
        tpu,
        running_from={2: back1 + 1},
        failed_at={2: math.ceil(ep2)},
        unsched={2: (r1, back1)},
        sched_message=msg,
    )
    sc.attempt(
        spec,
        8,
        r2,
        None,
        tpu,
        running_from={2: back2 + 1},
        unsched={2: (r2, back2)},
        sched_message=msg,
    )
    for attempt, r, back in ((7, r1, back1), (8, r2, back2)):
        pod = sc.pod(spec, attempt, 2)
        sc.event_pod(
            pod, r - 0.84, "FailedScheduling", msg, component="default-scheduler", etype="Warning"
        )
        sc.event_pod(
            pod,
            back - 0.2,
            "Scheduled",
            f"Successfully assigned {pod.namespace}/{pod.name} to {bad.name}",
            component="default-scheduler",
        )
    for m0 in (ep1, ep2):
        coord = sc.coordinator_at(spec, m0)
        if coord:
            sc.container_log(
                coord,
                m0 + 1.1,
                "Terminating: job controller requested shutdown (SIGTERM)",
                key="sigterm",
            )
    sc.kubelet_journal(
        bad,
        back1 - 0.6,
        f'"Successfully registered node" node="{bad.name}"',
        "kubelet_node_status.go:79",
    )
    sc.training_noise(spec, "maxtext")
    sc.kubelet_noise()
    return sc


def scenario_single_node_failure() -> Scenario:
    ctx = Context(
        project="quanta-genai-prod",
        location="europe-west4",
        zone="europe-west4-b",
        cluster="a3-mega-eu",
        namespace="ml-jobs",
        workload="mixtral-8x7b-sft",
        issue_time="2026-04-02T21:37:30Z",
    )
    sc = Scenario(
        "single-node-failure",
        "A3 Mega GPU JobSet (4 nodes, reserved block, one host each). One node fails once "
        "inside the window at T-6m (GPU Xid 79, kernel panic, hostError, TerminationEvent, "
        "NodeNotReady, Ready=Unknown/False for 5 min) and the JobSet restarts (2 -> 3). A "
        "different node had a similar failure at T-75m, before the window: it must not be "
        "counted. Issue time is not on a whole minute (21:37:30).",
        ctx,
        {},
    )
    nodes = sc.add_pool(
        "a3mega-pool",
        "a3-megagpu-8g",
        4,
        hosts=True,
        labels=gpu_labels("nvidia-h100-mega-80gb"),
        capacity=gpu_capacity(208, 1918952244),
        taints=GPU_TAINT,
    )
    old_bad, bad = nodes[3], nodes[1]
    sc.expect = expect(
        "host_error", "watch_host", [{"host": bad.host, "nodes": [bad.name], "failures": 1}]
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="trainer",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="europe-west4-docker.pkg.dev/quanta-genai-prod/llm/sft-trainer:v0.14.2",
        resources={"nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"},
        tolerations=GPU_TOLERATION,
    )
    ep0, ep1 = -75.2, -6.2
    r0, r1 = -73, -4
    sc.add_jobset(spec, 1, [r0, r1])
    sc.host_failure(
        old_bad,
        ep0,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:c8:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                "fallen off the bus.",
            ),
        ],
        unknown=3,
    )
    sc.host_failure(
        bad,
        ep1,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:97:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                "fallen off the bus.",
            ),
            ("kernel", "NVRM: GPU 0000:97:00.0: GPU has fallen off the bus."),
            ("kernel", "Kernel panic - not syncing: Fatal exception in interrupt"),
        ],
        unknown=4,
        false=1,
    )
    back0 = max(m for m in old_bad.not_ready) + 1
    back1 = max(m for m in bad.not_ready) + 1
    sc.attempt(spec, 1, -600, r0, nodes, failed_at={3: math.ceil(ep0)})
    sc.attempt(spec, 2, r0, r1, nodes, running_from={3: back0}, failed_at={1: math.ceil(ep1)})
    sc.attempt(spec, 3, r1, None, nodes, running_from={1: back1})
    sc.training_noise(spec, "hf")
    sc.kubelet_noise()
    return sc


def scenario_maintenance() -> Scenario:
    ctx = Context(
        project="northwind-ai",
        location="us-east4",
        zone="us-east4-a",
        cluster="h100-train-east",
        namespace="research",
        workload="dit-xl-diffusion",
        issue_time="2026-06-08T03:05:00Z",
    )
    sc = Scenario(
        "maintenance",
        "A3 High GPU JobSet (2 replicated jobs x 2 pods) on a reserved block. Two different "
        "nodes go through Compute Engine host maintenance (MaintenanceEvent 'HW/SW "
        "Maintenance', compute.instances.terminateOnHostMaintenance) at T-17m and T+4m; each "
        "node is NotReady for ~5 min and each maintenance triggers a JobSet restart (3 -> 5). "
        "The NotReady runs and NodeNotReady events are explained by the maintenance, so no "
        "host is suspect. A third node carries an upcoming scheduled-maintenance-time label.",
        ctx,
        expect("maintenance", "plan_maintenance"),
    )
    nodes = sc.add_pool(
        "a3-pool",
        "a3-highgpu-8g",
        4,
        hosts=True,
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    nodes[2].labels["cloud.google.com/scheduled-maintenance-time"] = str(
        ctx.t_ns // NS + 5 * 86400 + 7200
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=2,
        parallelism=2,
        container="dit",
        image="us-east4-docker.pkg.dev/northwind-ai/vision/dit-train:1.8.0",
        resources={"nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    m1, m2 = -17.4, 3.7
    r1, r2 = -15, 6
    sc.add_jobset(spec, 3, [r1, r2])
    sc.maintenance(nodes[1], m1)
    sc.maintenance(nodes[3], m2)
    back1 = max(nodes[1].not_ready) + 1
    back2 = max(nodes[3].not_ready) + 1
    sc.attempt(spec, 3, -900, r1, nodes, failed_at={1: math.ceil(m1 + 0.2)})
    sc.attempt(spec, 4, r1, r2, nodes, running_from={1: back1}, failed_at={3: math.ceil(m2 + 0.2)})
    sc.attempt(spec, 5, r2, None, nodes, running_from={3: back2})
    sc.interruption_constant("a3-pool", "MaintenanceEvent", "AutoUpgrade", 4)
    sc.training_noise(spec, "diffusion")
    sc.kubelet_noise()
    return sc


def scenario_capacity() -> Scenario:
    ctx = Context(
        project="acme-ml-platform",
        location="us-east5",
        zone="us-east5-b",
        cluster="tpu-v6e-cluster",
        namespace="default",
        workload="maxtext-v6e-pretrain",
        issue_time="2026-02-14T11:20:00Z",
    )
    sc = Scenario(
        "capacity",
        "TPU v6e JobSet (one 4x4 slice = 4 hosts). The JobSet restarts at T-41m (before the "
        "window, rescheduled at once) and at T-27m (10 -> 11 in the window). A higher-priority "
        "JobSet (priority-eval) submitted at T-28m takes the freed slice, so from T-27m all "
        "four new pods stay Pending/Unschedulable with FailedScheduling 'Insufficient "
        "google.com/tpu'. All nodes stay Ready and no interruption increases (only an old "
        "constant AutoUpgrade series).",
        ctx,
        expect("capacity", "add_capacity"),
    )
    tpu = sc.add_pool(
        "v6e-pool",
        "ct6e-standard-4t",
        4,
        hosts=True,
        labels=tpu_labels("tpu-v6e-slice", "4x4"),
        capacity=tpu_capacity(180, 739695076),
        taints=TPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="slice",
        replicas=1,
        parallelism=4,
        container="maxtext",
        image="us-docker.pkg.dev/acme-ml-platform/maxtext/runner:2026.02.10",
        resources={"google.com/tpu": "4"},
        node_selector={
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        },
        tolerations=TPU_TOLERATION,
    )
    other = JobSetSpec(
        name="priority-eval",
        rjob="eval",
        replicas=1,
        parallelism=4,
        container="eval",
        image="us-docker.pkg.dev/acme-ml-platform/eval/harness:3.2.1",
        resources={"google.com/tpu": "4"},
        node_selector=dict(spec.node_selector),
        tolerations=TPU_TOLERATION,
        priority_class="high-priority-eval",
    )
    r0, r1 = -41, -27
    sc.add_jobset(spec, 9, [r0, r1])
    sc.add_jobset(other, 0, [])
    msg = (
        "0/4 nodes are available: 4 Insufficient google.com/tpu. preemption: 0/4 nodes "
        "are available: 4 No preemption victims found for incoming pod."
    )
    sc.attempt(spec, 9, -700, r0, tpu, failed_at={3: r0 - 1})
    sc.attempt(spec, 10, r0, r1, tpu, failed_at={2: r1 - 1})
    pending = sc.attempt(
        spec,
        11,
        r1,
        None,
        tpu,
        running_from={g: None for g in range(4)},
        unsched={g: (r1, LAST_MINUTE + 1) for g in range(4)},
        sched_message=msg,
    )
    evals = sc.attempt(
        other,
        0,
        -28,
        None,
        tpu,
        running_from={g: -26 for g in range(4)},
        unsched={g: (-28, -27) for g in range(4)},
        sched_message=msg,
    )
    for g, pod in enumerate(evals):
        sc.event_pod(
            pod,
            -27.8 + 0.01 * g,
            "FailedScheduling",
            msg,
            component="default-scheduler",
            etype="Warning",
        )
        sc.event_pod(
            pod,
            -26.6 + 0.01 * g,
            "Scheduled",
            f"Successfully assigned {pod.namespace}/{pod.name} to {tpu[g].name}",
            component="default-scheduler",
        )
    for g, pod in enumerate(pending):
        first = r1 + 0.08 + 0.01 * g
        times = [first, first + 1.0, first + 3.1, first + 8.2, first + 18.4, first + 38.6]
        for count, m in enumerate(times, start=1):
            if m > LAST_MINUTE:
                break
            sc.event_pod(
                pod,
                m,
                "FailedScheduling",
                msg,
                component="default-scheduler",
                etype="Warning",
                count=count,
                first_m=first,
            )
    sc.training_noise(spec, "maxtext")
    sc.kubelet_noise()
    return sc


def nccl_failure_lines(ctx: Context, pod: AnyPod, m: float, seq: int) -> list[tuple[int, str]]:
    """(entry time ns, text) of what a torchrun rank-0 container prints on a watchdog timeout.

    The time printed inside a line is a few milliseconds before the entry's timestamp.
    """
    t = ctx.at(m, "nccl", pod.name)
    pid = rand_int(2000, 9000, "pid", pod.name)
    ms = 1_000_000
    raw: list[tuple[int, str]] = [
        (
            t,
            f"{c10_prefix(0, 'E', t, 'ProcessGroupNCCL.cpp:629')} [Rank 0] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
            "NumelIn=268435456, NumelOut=268435456, Timeout(ms)=600000) ran for "
            f"{600000 + rand_int(20, 120, 'ran', seq)} milliseconds before timing out.",
        ),
        (
            t + 2 * ms,
            f"{c10_prefix(0, 'E', t + 2 * ms, 'ProcessGroupNCCL.cpp:1664')} "
            f"[PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or "
            f"timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: "
            f"{seq}, last completed NCCL work: {seq - 1}.",
        ),
        (
            t + 3 * ms,
            f"{c10_prefix(0, 'E', t + 3 * ms, 'ProcessGroupNCCL.cpp:1709')} "
            "Some NCCL operations have failed or timed out. Due to the asynchronous "
            "nature of CUDA kernels, subsequent GPU operations might run on "
            "corrupted/incomplete data.",
        ),
        (
            t + 4 * ms,
            f"{c10_prefix(0, 'E', t + 4 * ms, 'ProcessGroupNCCL.cpp:1715')} To "
            "avoid data inconsistency, we are taking the entire process down.",
        ),
        (t + 9 * ms, "terminate called after throwing an instance of 'c10::DistBackendError'"),
        (
            t + 6812 * ms,
            f"[{py_stamp(t + 6812 * ms)}] "
            "torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
            f"(exitcode: -6) local_rank: 0 (pid: {pid}) of binary: "
            "/usr/bin/python3",
        ),
        (t + 7390 * ms, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "),
        (
            t + 7391 * ms,
            f"train.py FAILED\n  time      : {dt(t):%Y-%m-%d_%H:%M:%S}\n"
            f"  host      : {pod.name}\n"
            f"  rank      : 0 (local_rank: 0)\n  exitcode  : -6 (pid: {pid})\n"
            f"  error_file: <N/A>\n  traceback : Signal 6 (SIGABRT) received by "
            f"PID {pid}",
        ),
    ]
    return [(at + rand_int(400_000, 3_000_000, "lag", at), text) for at, text in raw]


def scenario_nccl_hang() -> Scenario:
    ctx = Context(
        project="neox-research-7781",
        location="us-central1-a",
        zone="us-central1-a",
        cluster="a100-cluster",
        namespace="llm",
        workload="gpt-neox-pretrain",
        issue_time="2026-01-27T16:48:00Z",
    )
    sc = Scenario(
        "nccl-application-hang",
        "A2 Ultra (A100 80GB) JobSet, 4 pods x 8 GPUs (32 ranks), zonal cluster. The "
        "training hangs in an all-reduce about 8 minutes after every (re)start; the NCCL "
        "watchdog fires after 600 s on the coordinator (worker 0 of job 0) with "
        "ProcessGroupNCCL timeout, DistBackendError and torchrun ChildFailedError, and "
        "the JobSet restarts (2 -> 5, at T-19m, T+1m, T+21m). A non-coordinator worker logs "
        "NCCL WARN connection reset / collective timeout lines. Nodes are healthy (no "
        "NotReady, no interruptions); A2 nodes carry no gce-topology-host label. Pods carry "
        "the jobset.sigs.k8s.io/coordinator label (value names worker 0 for every pod).",
        ctx,
        expect("application", "inspect_application"),
    )
    nodes = sc.add_pool(
        "a100-pool",
        "a2-ultragpu-8g",
        4,
        labels=gpu_labels("nvidia-a100-80gb"),
        capacity=gpu_capacity(96, 1391821596),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="pytorch",
        image="us-central1-docker.pkg.dev/neox-research-7781/neox/gpt-neox:2.0-cu124",
        resources={"nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
        tolerations=GPU_TOLERATION,
        coordinator_label=True,
    )
    restarts = [-39, -19, 1, 21]  # -39 is before the window
    sc.add_jobset(spec, 1, restarts)
    starts = [-300, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = {g: end - 1 for g in range(4)} if end is not None else None
        sc.attempt(spec, 1 + k, start, end, nodes, failed_at=failed)
    sc.training_noise(spec, "megatron", every=3, quiet=[(r - 12, r) for r in restarts])
    for k, r in enumerate(restarts):
        fail_m = r - 1.6
        pod = sc.coordinator_at(spec, fail_m)
        assert pod is not None
        seq = 48000 + 213 * k
        for at, text in nccl_failure_lines(ctx, pod, fail_m, seq):
            sc.container_log(pod, fail_m, text, stderr=True, at_ns=at)
        worker = next(p for p in sc.pods if p.attempt == pod.attempt and p.p == 2)
        tw = ctx.at(fail_m - 0.05, "wk", worker.name)
        rank = 16
        for offset, text in (
            (
                0,
                f"[rank{rank}]:[{py_stamp(tw)}] NCCL WARN : [Proxy Service {rank}] Failed to "
                "send, connection reset by peer",
            ),
            (
                4,
                f"[rank{rank}]:[{py_stamp(tw + 4 * NS)}] NCCL WARN: Collective "
                f"allreduce/{seq} timeout after 600 seconds",
            ),
            (
                9,
                f"[{py_stamp(tw + 9 * NS)}] torch.distributed.elastic.multiprocessing.api: "
                f"[ERROR] Child process {rand_int(2000, 9000, 'cp', worker.name)} died with "
                "exit code 1",
            ),
        ):
            at = tw + offset * NS + rand_int(400_000, 3_000_000, "lag", tw, offset)
            sc.container_log(worker, fail_m, text, stderr=True, at_ns=at)
    sc.kubelet_noise()
    return sc


def scenario_no_restarts() -> Scenario:
    ctx = Context(
        project="acme-ml-platform",
        location="us-central2-b",
        zone="us-central2-b",
        cluster="tpu-v4-research",
        namespace="team-nlp",
        workload="t5-xxl-pretrain",
        issue_time="2026-07-03T09:00:00Z",
    )
    sc = Scenario(
        "no-restarts",
        "TPU v4 JobSet (one 2x2x4 slice = 4 hosts). kube_jobset_restarts for the workload is "
        "4 from T-62m on (the last restart happened before the window) and flat through the "
        "window, so there is no restart loop. Another JobSet in the same namespace "
        "(data-prep-sharder) does restart inside the window and must be ignored.",
        ctx,
        expect("no_restart_loop", "none", loop=False),
    )
    tpu = sc.add_pool(
        "v4-pool",
        "ct4p-hightpu-4t",
        4,
        labels=tpu_labels("tpu-v4-podslice", "2x2x4"),
        capacity=tpu_capacity(240, 421573588),
        taints=TPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="slice",
        replicas=1,
        parallelism=4,
        container="t5x",
        image="us-docker.pkg.dev/acme-ml-platform/t5x/t5x-runner:0.9.3",
        resources={"google.com/tpu": "4"},
        node_selector={
            "cloud.google.com/gke-tpu-accelerator": "tpu-v4-podslice",
            "cloud.google.com/gke-tpu-topology": "2x2x4",
        },
        tolerations=TPU_TOLERATION,
    )
    sc.add_jobset(spec, 3, [-62])
    sc.restarts["data-prep-sharder"] = (0, [-12, 9])
    sc.attempt(spec, 3, -800, -62, tpu, failed_at={1: -63})
    sc.attempt(spec, 4, -62, None, tpu)
    sc.interruption_constant("v4-pool", "MaintenanceEvent", "AutoUpgrade", 1)
    sc.training_noise(spec, "jax")
    sc.kubelet_noise()
    return sc


def scenario_unknown() -> Scenario:
    ctx = Context(
        project="orbital-ml-dev",
        location="asia-southeast1",
        zone="asia-southeast1-b",
        cluster="l4-dev-cluster",
        namespace="default",
        workload="whisper-large-ft",
        issue_time="2026-09-15T23:55:00Z",
    )
    sc = Scenario(
        "unknown",
        "L4 GPU JobSet (4 pods x 4 GPUs) restarts twice inside the window (T-14m, T+12m; "
        "0 -> 2). Nodes stay Ready, there are no interruptions, no pending pods and the "
        "worker logs hold only ordinary or unrecognized lines. Nothing explains the restarts. "
        "The data crosses midnight UTC.",
        ctx,
        expect("unknown", "inspect_application"),
    )
    nodes = sc.add_pool(
        "l4-pool",
        "g2-standard-48",
        4,
        labels=gpu_labels("nvidia-l4", 4),
        capacity=gpu_capacity(48, 197972452, 4),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="asia-southeast1-docker.pkg.dev/orbital-ml-dev/asr/whisper-ft:0.3.1",
        resources={"nvidia.com/gpu": "4"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-l4"},
        tolerations=GPU_TOLERATION,
    )
    r1, r2 = -14, 12
    sc.add_jobset(spec, 0, [r1, r2])
    sc.attempt(spec, 0, -200, r1, nodes, failed_at={3: r1 - 1})
    sc.attempt(spec, 1, r1, r2, nodes, failed_at={0: r2 - 1})
    sc.attempt(spec, 2, r2, None, nodes)
    sc.training_noise(spec, "hf", every=3)
    for k, r in enumerate((r1, r2)):
        pod = next(p for p in sc.pods if p.attempt == k and p.p == (3 if k == 0 else 0))
        sc.container_log(
            pod,
            r - 1.4,
            "UserWarning: torch.utils.checkpoint: the use_reentrant parameter "
            "should be passed explicitly.",
            stderr=True,
            key="warn",
        )
        sc.container_log(
            pod,
            r - 1.2,
            "audio shard gs://orbital-ml-dev-asr/shards/train-00417.tar: 3 "
            "samples skipped (empty transcript)",
            key="skip",
        )
        sc.event_pod(
            pod, r - 0.6, "Killing", f"Stopping container {spec.container}", component="kubelet"
        )
    sc.kubelet_noise(every=13)
    return sc


TF_FAULTY_HOST = "4e1f9a07c3b2d5e6f7a8091b2c3d4e5f"


def scenario_tfjob_faulty_host() -> Scenario:
    ctx = Context(
        project="lumen-vision-prod",
        location="us-central1",
        zone="us-central1-c",
        cluster="a3-vision-usc1",
        namespace="ml-jobs",
        workload="resnet50-ps",
        issue_time="2026-10-06T13:40:00Z",
        workload_kind="tfjob",
    )
    sc = Scenario(
        "tfjob-faulty-host",
        "Kubeflow TFJob (ParameterServerStrategy: Chief + PS on CPU nodes, 4 GPU Workers on "
        "A3 High H100 reserved-block nodes, restartPolicy ExitCode). Worker 2's node "
        "gke-a3-vision-usc1-a3-res-pool-5c2e8d1a-q8v3 sits on physical host "
        f"{TF_FAULTY_HOST}, which fails twice inside the window: at T-16m (Xid 48 DBE, Xid "
        "79, APEI hardware error, kernel panic, hostError, TerminationEvent, NodeNotReady, "
        "Ready=Unknown for 4 min, automaticRestart) and at T+9m (machine check, Xid 79, "
        "kernel panic, same chain). Each time the pod fails (exit code 137) and the operator "
        "re-creates resnet50-ps-worker-2 under the same name (TFJobRestarting, "
        "training_operator_jobs_restarted_total{job_namespace=ml-jobs,framework=tensorflow} "
        "3 -> 6, of which +2 inside the window). The counter has no job label: its earlier "
        "step at T-50m belongs to another TFJob of the namespace (wide-deep-ctr). The Chief "
        "(the coordinator) logs the worker's UnavailableError and keeps training.",
        ctx,
        {},
    )
    gpus = sc.add_pool(
        "a3-res-pool",
        "a3-highgpu-8g",
        4,
        pool_hash="5c2e8d1a",
        suffixes=["h2m7", "t6w4", "q8v3", "b3n9"],
        hosts=True,
        host_ids={2: TF_FAULTY_HOST},
        labels={
            **gpu_labels("nvidia-h100-80gb"),
            "cloud.google.com/reservation-name": "a3-vision-usc1-block",
            "cloud.google.com/reservation-affinity": "specific",
        },
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    cpus = sc.add_pool(
        "cpu-pool", "n2-highmem-32", 3, capacity={"cpu": "32", "memory": "263965424Ki"}
    )
    bad = gpus[2]
    sc.expect = expect(
        "faulty_host",
        "isolate_host",
        [{"host": TF_FAULTY_HOST, "nodes": [bad.name], "failures": 2}],
    )
    gpu_select = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    cpu_select = {"cloud.google.com/gke-nodepool": "cpu-pool"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "PS": 1, "Worker": 4},
        image="us-central1-docker.pkg.dev/lumen-vision-prod/vision/resnet-ps:tf2.17-cu12",
        resources={
            "Chief": {"cpu": "8", "memory": "32Gi"},
            "PS": {"cpu": "16", "memory": "96Gi"},
            "Worker": {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": "8"},
        },
        node_selector={"Chief": cpu_select, "PS": cpu_select, "Worker": gpu_select},
        tolerations={"Worker": GPU_TOLERATION},
        command=["python3", "-m", "official.vision.train", "--experiment=resnet_imagenet"],
    )
    other = KubeflowSpec(
        name="wide-deep-ctr",
        api_kind="TFJob",
        replicas={"Chief": 1, "PS": 1, "Worker": 2},
        image="us-central1-docker.pkg.dev/lumen-vision-prod/recsys/wide-deep:tf2.17",
        resources={
            "Chief": {"cpu": "4", "memory": "16Gi"},
            "PS": {"cpu": "4", "memory": "32Gi"},
            "Worker": {"cpu": "8", "memory": "48Gi"},
        },
        node_selector={"Chief": cpu_select, "PS": cpu_select, "Worker": cpu_select},
        tolerations={},
    )
    placement = {("Chief", 0): cpus[0], ("PS", 0): cpus[1]}
    placement.update({("Worker", i): gpus[i] for i in range(4)})
    other_placement = {
        ("Chief", 0): cpus[2],
        ("PS", 0): cpus[2],
        ("Worker", 0): cpus[0],
        ("Worker", 1): cpus[1],
    }

    # wide-deep-ctr: Worker 1 is OOM-killed at T-51m and re-created at T-50m.
    other_r = -50
    sc.kf_pods(other, ctx.namespace, 0, -900, None, other_placement, only=[("Chief", 0)])
    sc.kf_pods(other, ctx.namespace, 0, -900, None, other_placement, only=[("PS", 0)])
    sc.kf_pods(other, ctx.namespace, 0, -900, None, other_placement, only=[("Worker", 0)])
    (oom,) = sc.kf_pods(
        other,
        ctx.namespace,
        0,
        -900,
        other_r,
        other_placement,
        only=[("Worker", 1)],
        failed_at={("Worker", 1): other_r - 1},
    )
    sc.kf_restart([oom], other_r, 137)
    sc.kf_pods(
        other,
        ctx.namespace,
        1,
        other_r,
        None,
        other_placement,
        only=[("Worker", 1)],
        created_m=other_r - 0.58,
    )

    ep1, ep2 = -16.4, 9.2
    sc.host_failure(
        bad,
        ep1,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:a8:00): 48, pid=21544, name=python3, An uncorrectable "
                "double bit error (DBE) has been detected on GPU in the framebuffer at "
                "partition 0, subpartition 0.",
            ),
            (
                "kernel",
                "NVRM: Xid (PCI:0000:a8:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                "fallen off the bus.",
            ),
            (
                "kernel",
                "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1",
            ),
            ("kernel", "Kernel panic - not syncing: Fatal exception in interrupt"),
        ],
    )
    back1 = max(bad.not_ready) + 1
    sc.host_failure(
        bad,
        ep2,
        [
            (
                "kernel",
                "mce: [Hardware Error]: CPU 71: Machine Check Exception: 5 Bank 5: "
                "bea0000000000108",
            ),
            (
                "kernel",
                "NVRM: Xid (PCI:0000:c6:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                "fallen off the bus.",
            ),
            ("kernel", "Kernel panic - not syncing: Fatal machine check"),
        ],
    )
    back2 = max(bad.not_ready) + 1
    # The pod turns Failed when the rebooted kubelet reports it (the Ready=False sample);
    # the operator re-creates it within the minute, on the recovered node.
    r1, r2 = back1, back2
    worker2 = ("Worker", 2)
    for rtype, count in spec.replicas.items():
        for i in range(count):
            if (rtype, i) != worker2:
                sc.kf_pods(spec, ctx.namespace, 0, -600, None, placement, only=[(rtype, i)])
    first = sc.kf_pods(
        spec, ctx.namespace, 0, -600, r1, placement, only=[worker2], failed_at={worker2: r1 - 1}
    )
    sc.kf_restart(first, r1, 137)
    second = sc.kf_pods(
        spec,
        ctx.namespace,
        1,
        r1,
        r2,
        placement,
        only=[worker2],
        failed_at={worker2: r2 - 1},
        created_m=r1 - 0.58,
    )
    sc.kf_restart(second, r2, 137)
    sc.kf_pods(spec, ctx.namespace, 2, r2, None, placement, only=[worker2], created_m=r2 - 0.58)
    sc.operator_counter(ctx.namespace, "tensorflow", 3, [other_r, r1, r2])
    for back in (back1, back2):
        sc.kubelet_journal(
            bad,
            back - 0.6,
            f'"Successfully registered node" node="{bad.name}"',
            "kubelet_node_status.go:79",
        )

    chief = sc.kf_pod(spec, "Chief", 0, 0)
    tid = rand_int(130_000, 140_000, "tid", chief.name)
    step0 = 318_000
    for m in range(FIRST_MINUTE + 1, LAST_MINUTE + 1, 3):
        step = step0 + (m - FIRST_MINUTE) * 96
        at = ctx.at(m + 0.4, "tf-step", step)
        down = any(bad.not_ready.get(x) for x in (m, m - 1))
        loss = 2.1 * math.exp(-step / 400_000) + 0.95 + rand_float(-0.02, 0.02, "tl", step)
        rate = rand_float(7400, 7600, "ips", step) if down else rand_float(9900, 10150, "ips", step)
        sc.container_log(
            chief,
            m + 0.4,
            f"{glog_prefix('I', at, tid, 'controller.py:495')} train | step: {step:>7d} | "
            f"steps per second: {rate / 4096:.2f} | training metrics: {{'training_loss': "
            f"{loss:.4f}, 'accuracy': {rand_float(0.71, 0.73, 'acc', step):.4f}, "
            f"'examples/sec': {rate:.1f}}}",
            stderr=True,
            at_ns=at,
        )
        if (m - FIRST_MINUTE) % 21 == 19:
            sc.container_log(
                chief,
                m + 0.7,
                f"{glog_prefix('I', at + 18 * NS, tid, 'controller.py:528')} saved "
                f"checkpoint to gs://{ctx.project}-ckpt/{spec.name}/ckpt-{step}.",
                stderr=True,
                at_ns=at + 18 * NS,
            )
    w = "/job:worker/replica:0/task:2"
    for m0, pod in ((ep1, first[0]), (ep2, second[0])):
        at = ctx.at(m0 + 0.35, "tf-unavailable", pod.name)
        # gRPC stamps the error when the channel broke, a few seconds after the host died.
        broke = at - 8 * NS
        created = f"{broke // NS}.{broke % NS:09d}"
        sc.container_log(
            chief,
            m0 + 0.35,
            f"{glog_prefix('W', at, tid, 'cluster_coordinator.py:793')} Worker {w} failed "
            "with UnavailableError: Socket closed. Additional GRPC error information from "
            f"remote target {w} while calling /tensorflow.eager.EagerService/"
            f'RunComponentFunction: :{{"created":"@{created}","description":"Error '
            f'received from peer ipv4:{pod.ip}:2222","grpc_status":14}}',
            stderr=True,
            at_ns=at,
        )
        sc.container_log(
            chief,
            m0 + 0.36,
            f"{glog_prefix('I', at + NS // 50, tid, 'cluster_coordinator.py:812')} Waiting "
            f"for worker {w} to come back; its closures are rescheduled on the other workers.",
            stderr=True,
            at_ns=at + NS // 50,
        )
    for incarnation, r in ((1, r1), (2, r2)):
        pod = sc.kf_pod(spec, "Worker", 2, incarnation)
        at = ctx.at(r + 1.2, "tf-start", pod.name)
        ptid = rand_int(200, 900, "ptid", pod.name, incarnation)
        for gpu, bus in enumerate(("04", "05", "0a", "0b", "84", "85", "8a", "8b")):
            t = at + gpu * 3_000_000
            sc.container_log(
                pod,
                r + 1.2,
                f"{glog_prefix('I', t, ptid, 'gpu_device.cc:2019')} Created device "
                f"{w}/device:GPU:{gpu} with 78938 MB memory:  -> device: {gpu}, name: NVIDIA "
                f"H100 80GB HBM3, pci bus id: 0000:{bus}:00.0, compute capability: 9.0",
                stderr=True,
                at_ns=t,
            )
        t = at + 90_000_000
        sc.container_log(
            pod,
            r + 1.21,
            f"{glog_prefix('I', t, ptid, 'grpc_server_lib.cc:467')} Started server with "
            f"target: grpc://{pod.name}.{ctx.namespace}.svc:2222",
            stderr=True,
            at_ns=t,
        )
        t = at + 4 * NS
        sc.container_log(
            chief,
            r + 1.25,
            f"{glog_prefix('I', t, tid, 'cluster_coordinator.py:901')} Worker {w} has been "
            "recovered.",
            stderr=True,
            at_ns=t,
        )
    sc.kubelet_noise()
    return sc


def scenario_pytorchjob_nccl_timeout() -> Scenario:
    ctx = Context(
        project="sable-nlp-lab",
        location="europe-west4",
        zone="europe-west4-a",
        cluster="a100-nlp-euw4",
        namespace="nlp-train",
        workload="bert-ddp",
        issue_time="2026-11-23T07:10:00Z",
        workload_kind="pytorchjob",
    )
    sc = Scenario(
        "pytorchjob-nccl-timeout",
        "Kubeflow PyTorchJob (Master + 7 Workers, one A100 each on A2 nodes, restartPolicy "
        "ExitCode, plain python launcher so an abort exits 134). Training hangs in an "
        "all-reduce about 8 minutes after every (re)start; after 600 s every rank's NCCL "
        "watchdog fires (the Master, rank 0, logs Watchdog caught collective operation "
        "timeout and the DistBackendError abort), all 8 pods exit 134 and the operator "
        "re-creates them under the same names at T-21m, T-1m and T+19m (T-41m is before the "
        "window). Each restart records two PyTorchJobRestarting events (1 Master, 7 Worker "
        "replica(s)) and two counter steps, so "
        "training_operator_jobs_restarted_total{job_namespace=nlp-train,framework=pytorch} "
        "rises by 6 for 3 restarts. Worker 0 logs its own watchdog line first; the Master "
        "is the coordinator. Another PyTorchJob (roberta-sweep-3, namespace nlp-eval) "
        "restarts at T+5m and T+24m: its counter series (first sample inside the window) "
        "and events must be ignored. Nodes are healthy; A2 nodes carry no topology labels.",
        ctx,
        expect("application", "inspect_application"),
    )
    a100 = sc.add_pool(
        "a100-pool",
        "a2-highgpu-1g",
        8,
        labels=gpu_labels("nvidia-tesla-a100", 1),
        capacity=gpu_capacity(12, 87553420, 1),
        taints=GPU_TAINT,
    )
    l4 = sc.add_pool(
        "l4-pool",
        "g2-standard-12",
        2,
        labels=gpu_labels("nvidia-l4", 1),
        capacity=gpu_capacity(12, 49330012, 1),
        taints=GPU_TAINT,
    )
    gpu_res = {"cpu": "10", "memory": "72Gi", "nvidia.com/gpu": "1"}
    select = {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="PyTorchJob",
        replicas={"Master": 1, "Worker": 7},
        image="europe-west4-docker.pkg.dev/sable-nlp-lab/nlp/bert-pretrain:2.4.1-cu124",
        resources={"Master": gpu_res, "Worker": gpu_res},
        node_selector={"Master": select, "Worker": select},
        tolerations={"Master": GPU_TOLERATION, "Worker": GPU_TOLERATION},
        env=[
            {"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "1"},
        ],
        command=["python3", "/workspace/run_pretraining.py", "--config=bert_large_phase2.yaml"],
    )
    l4_res = {"cpu": "10", "memory": "40Gi", "nvidia.com/gpu": "1"}
    l4_select = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    other = KubeflowSpec(
        name="roberta-sweep-3",
        api_kind="PyTorchJob",
        replicas={"Master": 1, "Worker": 1},
        image="europe-west4-docker.pkg.dev/sable-nlp-lab/nlp/roberta-eval:1.2.0",
        resources={"Master": l4_res, "Worker": l4_res},
        node_selector={"Master": l4_select, "Worker": l4_select},
        tolerations={"Master": GPU_TOLERATION, "Worker": GPU_TOLERATION},
    )
    placement = {("Master", 0): a100[0]}
    placement.update({("Worker", i): a100[i + 1] for i in range(7)})

    restarts = [-41, -21, -1, 19]  # -41 is before the window
    starts = [-300, *restarts]
    kf_attempts(sc, spec, ctx.namespace, placement, starts, lambda k, end: end - 1, 134)
    sc.operator_counter(ctx.namespace, "pytorch", 6, [r for r in restarts for _ in range(2)])

    # The other namespace's job: its Worker is OOM-killed twice.
    other_ns = "nlp-eval"
    other_place = {("Master", 0): l4[0], ("Worker", 0): l4[1]}
    sc.kf_pods(other, other_ns, 0, -200, None, other_place, only=[("Master", 0)])
    other_starts = [-200, 5, 24]
    for k, start in enumerate(other_starts):
        end = other_starts[k + 1] if k + 1 < len(other_starts) else None
        pods = sc.kf_pods(
            other,
            other_ns,
            k,
            start,
            end,
            other_place,
            only=[("Worker", 0)],
            failed_at={("Worker", 0): end - 1} if end is not None else None,
            created_m=start - 0.58 if k else None,
        )
        if end is not None:
            sc.kf_restart(pods, end, 137)
    sc.operator_counter(other_ns, "pytorch", None, other_starts[1:])

    # The Master's log: start-up, steps every 3 minutes until the hang, checkpoints.
    quiet = [(r - 12, r) for r in restarts]
    last_ckpt = 152_000
    for k, start in enumerate(starts):
        master = sc.kf_pod(spec, "Master", 0, k)
        run = start + 1
        end = starts[k + 1] if k + 1 < len(starts) else LAST_MINUTE + 1
        resume = last_ckpt
        if run >= FIRST_MINUTE:
            t = ctx.at(run + 0.2, "pt-start", master.name, k)
            pid = rand_int(100, 999, "pid", master.name, k)
            for i, line in enumerate(
                (
                    f"{master.name}:{pid}:{pid} [0] NCCL INFO Bootstrap : Using "
                    f"eth0:{master.ip}<0>",
                    "NCCL version 2.21.5+cuda12.4",
                    f"{master.name}:{pid}:{pid + 17} [0] NCCL INFO comm 0x55d0c4a2f1e0 rank 0 "
                    "nranks 8 cudaDev 0 nvmlDev 0 busId 4000 commId 0x3f6e1b9d2c4a8e17 - Init "
                    "COMPLETE",
                    f"[rank0] resuming from gs://{ctx.project}-ckpt/{spec.name}/step_{resume}",
                )
            ):
                sc.container_log(master, run + 0.2, line, at_ns=t + i * 40_000_000)
        for m in range(max(run, FIRST_MINUTE), min(end, LAST_MINUTE + 1)):
            if any(a <= m < b for a, b in quiet) or m >= end - 1:
                continue
            step = resume + (m - run) * 55
            if (m - run) % 5 == 4:
                last_ckpt = step
                sc.container_log(
                    master,
                    m + 0.8,
                    f"[rank0] saved checkpoint gs://{ctx.project}-ckpt/{spec.name}/step_{step}",
                    key=("ckpt", m),
                )
            if (m - run) % 3 != 1:
                continue
            loss = 1.9 * math.exp(-step / 250_000) + 1.1 + rand_float(-0.02, 0.02, "bl", step)
            sc.container_log(
                master,
                m + 0.5,
                f"[rank0] step {step} | mlm_loss {loss:.4f} | nsp_loss "
                f"{rand_float(0.015, 0.03, 'nsp', step):.4f} | lr 8.72e-05 | "
                f"{rand_float(410, 425, 'sps', step):.1f} seq/s",
                key=("train", m),
            )

    # The hang: every rank's watchdog fires; Worker 0 first, the Master's abort chain.
    for k, r in enumerate(restarts):
        fail_m = r - 1.6
        seq = 91_000 + 377 * k
        master = sc.kf_pod(spec, "Master", 0, k)
        lines = nccl_failure_lines(ctx, master, fail_m, seq)[:5]
        t_last = lines[-1][0]
        ran = 600000 + rand_int(20, 120, "ran", seq)
        lines += [
            (
                t_last + 150_000,
                "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog "
                f"thread terminated with exception: [Rank 0] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                f"NumelIn=335544320, NumelOut=335544320, Timeout(ms)=600000) ran for {ran} "
                "milliseconds before timing out.",
            ),
            (t_last + 2_400_000, "Fatal Python error: Aborted"),
        ]
        for at, text in lines:
            sc.container_log(master, fail_m, text, stderr=True, at_ns=at)
        for i in range(7):
            worker = sc.kf_pod(spec, "Worker", i, k)
            rank = i + 1
            # The Master's watchdog time; Worker 0's fires 2 s before it, the others after.
            t = ctx.at(fail_m, "nccl", master.name)
            if i == 0:
                t -= 2 * NS
            else:
                t += rand_int(10_000_000, 900_000_000, "wd", worker.name, k)
            sc.container_log(
                worker,
                fail_m,
                f"{c10_prefix(rank, 'E', t, 'ProcessGroupNCCL.cpp:629')} [Rank {rank}] "
                f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
                "OpType=ALLREDUCE, NumelIn=335544320, NumelOut=335544320, Timeout(ms)=600000) "
                f"ran for {600000 + rand_int(5, 90, 'ranw', seq, rank)} milliseconds before "
                "timing out.",
                stderr=True,
                at_ns=t + rand_int(400_000, 3_000_000, "lag", t),
            )
    sc.kubelet_noise()
    return sc


# --- workload faults: OOM kills, priority preemption, evictions, image pulls ----------------

GIB = 2**30
AUDIT_ACTIVITY_LOG = "cloudaudit.googleapis.com/activity"
KUBELET_AGENT = f"kubelet/{GKE_VERSION} (linux/amd64) kubernetes/5b6a4ea"
GC_PRINCIPAL = "system:serviceaccount:kube-system:generic-garbage-collector"


def metric_family(
    sc: Scenario, name: str, help_text: str, kind: str = "gauge"
) -> list[tuple[dict[str, str], Callable[[int], Any]]]:
    """The series list of one extra metric family (created on first use)."""
    for family_name, _, _, series in sc.extra_families:
        if family_name == name:
            return series
    series = []
    sc.extra_families.append((name, help_text, kind, series))
    return series


def pod_labels_ksm(sc: Scenario, pod: AnyPod) -> dict[str, str]:
    """The labels kube-state-metrics puts on a container series of ``pod``."""
    return {
        "cluster": sc.ctx.cluster,
        "namespace": pod.namespace,
        "pod": pod.name,
        "uid": pod.uid,
    }


def container_of(pod: AnyPod) -> str:
    return pod.spec.container


def since(minute: int) -> Callable[[int], bool]:
    return lambda m: m >= minute


def present(
    alive: Callable[[int], bool], value: Callable[[int], int]
) -> Callable[[int], int | None]:
    """``value(m)`` while the object exists, no sample (None) otherwise."""
    return lambda m: value(m) if alive(m) else None


def lifetime(pod: AnyPod) -> Callable[[int], bool]:
    """Minutes the pod object exists (kube-state-metrics reports it)."""
    return lambda m: m >= pod.start_m and (pod.end_m is None or m < pod.end_m)


def memory_limit(pod: AnyPod, default: str = "64Gi") -> int:
    """The container's memory limit in bytes (requests = limits in these pods)."""
    if isinstance(pod, KfPod):
        text = pod.spec.resources[pod.rtype].get("memory", default)
    else:
        text = pod.spec.resources.get("memory", default)
    return int(text.removesuffix("Gi")) * GIB


def add_memory(
    sc: Scenario, pod: AnyPod, usage: Callable[[int], float], *, with_limit: bool = True
) -> None:
    """cAdvisor's working set of the pod's container (``usage(m)`` a share of its limit)
    and the limit kube-state-metrics reports."""
    limit = memory_limit(pod)
    alive = lifetime(pod)
    node = pod.node.name if pod.node else ""
    labels = {
        "cluster": sc.ctx.cluster,
        "namespace": pod.namespace,
        "pod": pod.name,
        "container": container_of(pod),
        "node": node,
    }
    metric_family(
        sc, "container_memory_working_set_bytes", "Current working set of the container."
    ).append(
        (
            labels,
            lambda m, a=alive, u=usage, lim=limit: (
                int(min(u(m), 1.0) * lim) if a(m) and pod.phase_at(m) == "Running" else None
            ),
        )
    )
    if with_limit:
        metric_family(
            sc, "kube_pod_container_resource_limits", "The container's resource limits."
        ).append(
            (
                {
                    **pod_labels_ksm(sc, pod),
                    "container": container_of(pod),
                    "node": node,
                    "resource": "memory",
                    "unit": "byte",
                },
                lambda m, a=alive, lim=limit: lim if a(m) else None,
            )
        )


def add_reason(
    sc: Scenario,
    metric: str,
    pod: AnyPod,
    reason: str,
    minutes: Callable[[int], bool],
    **labels: str,
) -> None:
    """A kube-state-metrics reason series of ``pod``: 1 while ``minutes(m)``, absent else."""
    helps = {
        "kube_pod_container_status_last_terminated_reason": "Describes the last reason the "
        "container was in terminated state.",
        "kube_pod_container_status_terminated_reason": "Describes the reason the container "
        "is currently in terminated state.",
        "kube_pod_container_status_waiting_reason": "Describes the reason the container is "
        "currently in waiting state.",
        "kube_pod_status_reason": "The pod status reasons.",
    }
    metric_family(sc, metric, helps[metric]).append(
        (
            {**pod_labels_ksm(sc, pod), **labels, "reason": reason},
            present(lifetime(pod), lambda m, f=minutes: 1 if f(m) else 0),
        )
    )


def add_pod_info(
    sc: Scenario,
    pod: AnyPod,
    priority_class: str,
    created_by: tuple[str, str],
) -> None:
    node = pod.node
    metric_family(sc, "kube_pod_info", "Information about pod.").append(
        (
            {
                **pod_labels_ksm(sc, pod),
                "host_ip": node.ip if node else "",
                "pod_ip": pod.ip,
                "node": node.name if node else "",
                "created_by_kind": created_by[0],
                "created_by_name": created_by[1],
                "priority_class": priority_class,
                "host_network": "false",
            },
            present(lifetime(pod), lambda m: 1),
        )
    )


def pod_event_ex(
    sc: Scenario,
    pod: AnyPod,
    m: float,
    reason: str,
    message: str,
    *,
    component: str,
    etype: str = "Normal",
    related: dict[str, Any] | None = None,
    action: str | None = None,
    annotations: dict[str, str] | None = None,
    count: int = 1,
    first_m: float | None = None,
) -> dict[str, Any]:
    """A Pod Event with the fields of the events.k8s.io API where its recorder sets them:
    the scheduler's ``related`` preemptor and ``action``, the kubelet's annotations."""
    entry = sc.event_pod(
        pod, m, reason, message, component=component, etype=etype, count=count, first_m=first_m
    )
    payload = entry["jsonPayload"]
    if related is not None:
        # The scheduler records through events.k8s.io/v1: eventTime, no first/last time.
        payload["related"] = related
        payload["action"] = action
        payload["eventTime"] = payload["lastTimestamp"].replace("Z", ".000000Z")
        payload["firstTimestamp"] = None
        payload["lastTimestamp"] = None
        payload["reportingComponent"] = component
        payload["reportingInstance"] = f"{component}-gke-{sc.ctx.cluster[:20]}"
        payload["source"] = {}
    if annotations:
        payload["metadata"]["annotations"] = dict(annotations)
    return entry


def pod_ref(pod: AnyPod) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod.name,
        "namespace": pod.namespace,
        "resourceVersion": str(rand_int(10**7, 10**8, "ref", pod.uid)),
        "uid": pod.uid,
    }


def jobset_event(
    sc: Scenario, spec: JobSetSpec, m: float, reason: str, message: str, etype: str = "Warning"
) -> dict[str, Any]:
    """An Event the JobSet controller records on the JobSet (``Restarting``...)."""
    ctx = sc.ctx
    at = ctx.at(m, "jsev", spec.name, reason, message)
    payload = k8s_event_payload(
        involved={
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": spec.name,
            "namespace": ctx.namespace,
            "resourceVersion": str(rand_int(10**7, 10**8, "jsrv", spec.name, at)),
            "uid": sc.jobset_uid(spec.name),
        },
        reason=reason,
        message=message,
        component="jobset",
        etype=etype,
        first_ns=at,
        last_ns=at,
        count=1,
        namespace=ctx.namespace,
    )
    resource = {"cluster_name": ctx.cluster, "location": ctx.location, "project_id": ctx.project}
    return sc.event(
        "k8s_cluster", resource, m, payload, "WARNING" if etype == "Warning" else "INFO"
    )


def kernel_oom(
    sc: Scenario, pod: AnyPod, m: float, *, qos: str = "burstable", task: str = "python3"
) -> list[dict[str, Any]]:
    """What the kernel logs when a container's memory cgroup hits its limit: the
    ``oom-kill:`` line names the pod's cgroup (hence its uid)."""
    node = pod.node
    assert node is not None
    limit_kb = memory_limit(pod) // 1024
    cid = rand_hex(64, "cid", pod.uid, m)
    pid = rand_int(2000, 60000, "oompid", pod.uid, m)
    qos_path = "" if qos == "guaranteed" else f"/{qos}"
    memcg = f"/kubepods{qos_path}/pod{pod.uid}/{cid}"
    anon = limit_kb - rand_int(4000, 90000, "anon", pod.uid, m)
    lines = [
        f"{task} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=-997",
        f"memory: usage {limit_kb}kB, limit {limit_kb}kB, failcnt {rand_int(20, 4000, 'fc', m)}",
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),"
        f"cpuset={cid},mems_allowed=0-1,oom_memcg={memcg},task_memcg={memcg},"
        f"task={task},pid={pid},uid=0",
        f"Memory cgroup out of memory: Killed process {pid} ({task}) "
        f"total-vm:{anon + rand_int(10**6, 4 * 10**6, 'vm', m)}kB, anon-rss:{anon}kB, "
        f"file-rss:{rand_int(20000, 90000, 'frss', m)}kB, shmem-rss:0kB, UID:0 "
        f"pgtables:{rand_int(90000, 300000, 'pgt', m)}kB oom_score_adj:-997",
    ]
    out = [
        sc.kernel_line(node, m + 0.0002 * i, line, key=("oom", pod.uid, i))
        for i, line in enumerate(lines)
    ]
    # node-problem-detector's kernel monitor turns the kill into a Node Event.
    entry = sc.event_node(node, m + 0.02, "OOMKilling", lines[-1], etype="Warning")
    entry["jsonPayload"]["source"] = {"component": "kernel-monitor", "host": node.name}
    entry["jsonPayload"]["reportingComponent"] = "kernel-monitor"
    entry["jsonPayload"]["reportingInstance"] = node.name
    return [*out, entry]


def terminated_status(
    sc: Scenario, pod: AnyPod, m: float, *, reason: str, code: int, started_m: float
) -> dict[str, Any]:
    """A container status that ended at T+m."""
    return {
        "containerID": "containerd://" + rand_hex(64, "cid", pod.uid, "term"),
        "image": pod.spec.image,
        "imageID": pod.spec.image.split(":")[0] + "@sha256:" + rand_hex(64, "img", pod.spec.image),
        "lastState": {},
        "name": container_of(pod),
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {
            "terminated": {
                "containerID": "containerd://" + rand_hex(64, "cid", pod.uid, "term"),
                "exitCode": code,
                "finishedAt": fmt_ts(sc.ctx.at(m, "fin", pod.uid), 0),
                "reason": reason,
                "startedAt": fmt_ts(sc.ctx.at(started_m, "st", pod.uid), 0),
            }
        },
    }


def audit_entry_k8s(
    sc: Scenario,
    m: float,
    *,
    method: str,
    resource: str,
    principal: str,
    agent: str,
    caller_ip: str,
    request: dict[str, Any] | None = None,
    response: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Kubernetes audit entry as GKE writes it to the Admin Activity log."""
    ctx = sc.ctx
    proto: dict[str, Any] = {
        "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
        "authenticationInfo": {"principalEmail": principal},
        "authorizationInfo": [{"granted": True, "permission": method, "resource": resource}],
        "methodName": method,
        "requestMetadata": {"callerIp": caller_ip, "callerSuppliedUserAgent": agent},
        "resourceName": resource,
        "serviceName": "k8s.io",
        "status": {"code": 0},
    }
    if request is not None:
        proto["request"] = request
    if response is not None:
        proto["response"] = response
    return sc.add(
        make_entry(
            ctx.project,
            log_id=AUDIT_ACTIVITY_LOG,
            resource_type="k8s_cluster",
            resource_labels={
                "cluster_name": ctx.cluster,
                "location": ctx.location,
                "project_id": ctx.project,
            },
            at_ns=ctx.at(m, "audit-k8s", method, resource),
            severity="NOTICE",
            proto_payload=proto,
            labels={"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""},
            digits=6,
        )
    )


def audit_oom_patch(sc: Scenario, pod: AnyPod, m: float, started_m: float) -> dict[str, Any]:
    """The kubelet's status patch that reports the container ``OOMKilled``."""
    node = pod.node
    assert node is not None
    status = terminated_status(sc, pod, m - 0.01, reason="OOMKilled", code=137, started_m=started_m)
    return audit_entry_k8s(
        sc,
        m,
        method="io.k8s.core.v1.pods.status.patch",
        resource=f"core/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
        principal=f"system:node:{node.name}",
        agent=KUBELET_AGENT,
        caller_ip=node.ip,
        request={
            "@type": "k8s.io/Patch",
            "metadata": {"uid": pod.uid},
            "status": {
                "$setElementOrder/conditions": [
                    {"type": t}
                    for t in (
                        "PodReadyToStartContainers",
                        "Initialized",
                        "Ready",
                        "ContainersReady",
                        "PodScheduled",
                    )
                ],
                "containerStatuses": [status],
                "phase": "Failed",
            },
        },
    )


def audit_gc_delete(sc: Scenario, pod: Pod, m: float, status: dict[str, Any]) -> dict[str, Any]:
    """The garbage collector deleting a pod of a restarted JobSet; the response is the pod,
    with its labels and its last status."""
    item = pod_item(sc, pod)
    item["status"] = status
    item["metadata"]["deletionTimestamp"] = fmt_ts(sc.ctx.at(m, "del", pod.uid), 0)
    item["metadata"]["deletionGracePeriodSeconds"] = 0
    return audit_entry_k8s(
        sc,
        m,
        method="io.k8s.core.v1.pods.delete",
        resource=f"core/v1/namespaces/{pod.namespace}/pods/{pod.name}",
        principal=GC_PRINCIPAL,
        agent=f"kube-controller-manager/{GKE_VERSION} (linux/amd64) kubernetes/5b6a4ea/"
        "system:serviceaccount:kube-system:generic-garbage-collector",
        caller_ip="::1",
        request={
            "@type": "core.k8s.io/v1.DeleteOptions",
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": pod.uid},
            "propagationPolicy": "Background",
        },
        response={"@type": "core.k8s.io/v1.Pod", **item},
    )


def failed_status(
    sc: Scenario, pod: AnyPod, m: float, started_m: float, *, reason: str, code: int
) -> dict[str, Any]:
    node = pod.node
    return {
        "conditions": [
            {
                "lastProbeTime": None,
                "lastTransitionTime": fmt_ts(sc.ctx.at(m, "c", pod.uid), 0),
                "status": "False",
                "type": t,
            }
            for t in ("Ready", "ContainersReady")
        ],
        "containerStatuses": [
            terminated_status(sc, pod, m, reason=reason, code=code, started_m=started_m)
        ],
        "hostIP": node.ip if node else "",
        "phase": "Failed",
        "podIP": pod.ip,
        "qosClass": "Burstable",
        "startTime": fmt_ts(pod.created_ns, 0),
    }


def waiting_on_image(
    sc: Scenario, pod: AnyPod, reason: str, message: str
) -> Callable[[dict[str, Any]], None]:
    """A pods.json hook: the pod is bound to its node and its container waits on a pull."""

    def hook(item: dict[str, Any]) -> None:
        node = pod.node
        assert node is not None
        created = fmt_ts(pod.created_ns, 0)
        bound = fmt_ts(sc.ctx.at(pod.start_m - 0.8, "bound", pod.uid), 0)
        item["spec"]["nodeName"] = node.name
        item["status"] = {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "status": "True",
                    "type": "PodReadyToStartContainers",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "status": "True",
                    "type": "Initialized",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "message": f"containers with unready status: [{container_of(pod)}]",
                    "reason": "ContainersNotReady",
                    "status": "False",
                    "type": "Ready",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "message": f"containers with unready status: [{container_of(pod)}]",
                    "reason": "ContainersNotReady",
                    "status": "False",
                    "type": "ContainersReady",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": bound,
                    "status": "True",
                    "type": "PodScheduled",
                },
            ],
            "containerStatuses": [
                {
                    "image": pod.spec.image,
                    "imageID": "",
                    "lastState": {},
                    "name": container_of(pod),
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"waiting": {"message": message, "reason": reason}},
                }
            ],
            "hostIP": node.ip,
            "hostIPs": [{"ip": node.ip}],
            "phase": "Pending",
            "podIP": pod.ip,
            "podIPs": [{"ip": pod.ip}],
            "qosClass": "Guaranteed",
            "startTime": created,
        }

    return hook


def priority_hook(priority_class: str, value: int) -> Callable[[dict[str, Any]], None]:
    def hook(item: dict[str, Any]) -> None:
        item["spec"]["priorityClassName"] = priority_class
        item["spec"]["priority"] = value

    return hook


def pressure_until(
    node: Node, condition: str, reason: str, message: str, since_ns: int, *, status: str = "False"
) -> Callable[[dict[str, Any]], None]:
    """A nodes.json hook: ``condition`` last changed at ``since_ns`` (pressure relieved)."""

    def hook(item: dict[str, Any]) -> None:
        for cond in item["status"]["conditions"]:
            if cond["type"] == condition:
                cond.update(
                    {
                        "lastTransitionTime": fmt_ts(since_ns, 0),
                        "message": message,
                        "reason": reason,
                        "status": status,
                    }
                )

    return hook


def _oom_usage(fail_minutes: list[int], ramp: int = 9) -> Callable[[int], float]:
    """Working set (share of the limit) that climbs to the limit before each OOM kill."""

    def usage(m: int) -> float:
        for f in fail_minutes:
            if f - ramp <= m <= f:
                return 0.62 + 0.38 * (m - (f - ramp)) / ramp
        return 0.6 + rand_float(-0.02, 0.02, "mem", m)

    return usage


def scenario_jobset_oom() -> Scenario:
    ctx = Context(
        project="helios-ml-prod",
        location="us-central1",
        zone="us-central1-b",
        cluster="a3-train-usc1",
        namespace="llm",
        workload="mistral-7b-sft",
        issue_time="2026-08-12T10:30:00Z",
    )
    sc = Scenario(
        "jobset-oom-killed",
        "A3 High GPU JobSet (1 x 4 pods, container trainer, memory limit 160Gi). The "
        "packed-sequence data loader of worker 2 leaks host memory: its working set climbs "
        "to the limit and the kernel OOM-kills the container at T-21.6m, T-2.6m and T+17.4m "
        "(oom-kill line naming the pod's memory cgroup, node-problem-detector OOMKilling, "
        "the kubelet's status patch OOMKilled in the audit log). Each time the Job fails and "
        "the JobSet restarts (Restarting event, kube_jobset_restarts 3 -> 6); the garbage "
        "collector deletes the old pods, the OOM-killed one with its OOMKilled status. "
        "Nodes stay Ready, no interruption; the other workers are terminated by the restart "
        "(exit code 143), not OOM-killed.",
        ctx,
        expect("out_of_memory", "fix_memory"),
    )
    nodes = sc.add_pool(
        "a3-pool",
        "a3-highgpu-8g",
        4,
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="us-central1-docker.pkg.dev/helios-ml-prod/llm/sft-trainer:2026.08.05",
        resources={"cpu": "96", "memory": "160Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    fails = [-21.6, -2.6, 17.4]
    restarts = [math.ceil(f) + 1 for f in fails]
    sc.add_jobset(spec, 3, restarts)
    starts = [-400, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = {2: math.ceil(fails[k])} if end is not None else None
        sc.attempt(spec, 3 + k, start, end, nodes, failed_at=failed)
    for k, m0 in enumerate(fails):
        pod = sc.pod(spec, 3 + k, 2)
        kernel_oom(sc, pod, m0)
        audit_oom_patch(sc, pod, m0 + 0.03, started_m=starts[k] + 0.7)
        jobset_event(
            sc, spec, restarts[k] - 0.55, "Restarting", f"restarting jobset, attempt {4 + k}"
        )
        status = failed_status(sc, pod, m0, starts[k] + 0.7, reason="OOMKilled", code=137)
        audit_gc_delete(sc, pod, restarts[k] - 0.5, status)
        add_reason(
            sc,
            "kube_pod_container_status_terminated_reason",
            pod,
            "OOMKilled",
            since(math.ceil(m0)),
            container="trainer",
        )
    usage = _oom_usage([math.ceil(f) - 1 for f in fails])
    for pod in sc.pods:
        if (pod.end_m or LAST_MINUTE) >= FIRST_MINUTE and (
            pod.end_m is None or pod.end_m > FIRST_MINUTE
        ):
            if isinstance(pod, Pod) and pod.p == 2:
                add_memory(sc, pod, usage)
            else:
                add_memory(sc, pod, lambda m, p=pod: 0.55 + rand_float(-0.03, 0.03, "m", p.name, m))
    sc.training_noise(spec, "hf")
    sc.kubelet_noise()
    return sc


@dataclass
class PlainPod:
    """A pod of neither a JobSet nor a Kubeflow job (a Deployment's), for metrics."""

    name: str
    namespace: str
    node: Node | None
    start_m: int
    end_m: int | None
    ip: str

    @property
    def uid(self) -> str:
        return rand_uuid("plainpod", self.namespace, self.name)


def deployment_pod(
    sc: Scenario,
    name: str,
    namespace: str,
    node: Node,
    start_m: int,
    end_m: int | None,
    *,
    app: str,
    image: str,
    resources: dict[str, str],
    priority_class: str,
    priority: int,
) -> PlainPod:
    """A Deployment's pod (an online service sharing the cluster): pods.json while it
    exists at T+35m, kube_pod_info with its PriorityClass, its Scheduled event."""
    ip = f"10.{rand_int(64, 120, 'pods', sc.ctx.cluster)}.{rand_int(2, 250, 'dip', name)}.9"
    pod = PlainPod(name, namespace, node, start_m, end_m, ip)
    replicaset = name.rsplit("-", 1)[0]
    metric_family(sc, "kube_pod_info", "Information about pod.").append(
        (
            {
                "cluster": sc.ctx.cluster,
                "namespace": namespace,
                "pod": name,
                "uid": pod.uid,
                "host_ip": node.ip,
                "pod_ip": ip,
                "node": node.name,
                "created_by_kind": "ReplicaSet",
                "created_by_name": replicaset,
                "priority_class": priority_class,
                "host_network": "false",
            },
            lambda m, a=start_m, b=end_m: 1 if m >= a and (b is None or m < b) else None,
        )
    )
    created = sc.ctx.at(start_m - 0.3, "dcreated", name)
    if end_m is None:
        sc.extra_pod_items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "creationTimestamp": fmt_ts(created, 0),
                    "generateName": f"{replicaset}-",
                    "labels": {"app": app, "pod-template-hash": replicaset.rsplit("-", 1)[-1]},
                    "name": name,
                    "namespace": namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "blockOwnerDeletion": True,
                            "controller": True,
                            "kind": "ReplicaSet",
                            "name": replicaset,
                            "uid": rand_uuid("rs", namespace, replicaset),
                        }
                    ],
                    "resourceVersion": str(rand_int(10**7, 10**8, "drv", name)),
                    "uid": pod.uid,
                },
                "spec": {
                    "containers": [
                        {
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "name": app,
                            "resources": {"limits": dict(resources), "requests": dict(resources)},
                        }
                    ],
                    "nodeName": node.name,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "priority": priority,
                    "priorityClassName": priority_class,
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "tolerations": [*GPU_TOLERATION, *_default_tolerations()],
                },
                "status": {
                    "conditions": [
                        {
                            "lastProbeTime": None,
                            "lastTransitionTime": fmt_ts(created, 0),
                            "status": "True",
                            "type": t,
                        }
                        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                    ],
                    "hostIP": node.ip,
                    "phase": "Running",
                    "podIP": ip,
                    "qosClass": "Guaranteed",
                    "startTime": fmt_ts(created, 0),
                },
            }
        )
    return pod


def plain_ref(pod: PlainPod) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod.name,
        "namespace": pod.namespace,
        "resourceVersion": str(rand_int(10**7, 10**8, "ref", pod.uid)),
        "uid": pod.uid,
    }


def preempted(sc: Scenario, victim: AnyPod, m: float, preemptor: PlainPod) -> dict[str, Any]:
    """The scheduler preempts ``victim`` for ``preemptor`` (Event, DisruptionTarget)."""
    node = victim.node
    assert node is not None
    entry = pod_event_ex(
        sc,
        victim,
        m,
        "Preempted",
        f"Preempted by pod {preemptor.uid} on node {node.name}",
        component="default-scheduler",
        related=plain_ref(preemptor),
        action="Preempting",
    )
    pod_event_ex(
        sc,
        victim,
        m + 0.01,
        "Killing",
        f"Stopping container {container_of(victim)}",
        component="kubelet",
    )
    return entry


def evicted(
    sc: Scenario, pod: AnyPod, m: float, resource: str, using_ki: int, request: str, available: str
) -> dict[str, Any]:
    """The kubelet's eviction manager evicts ``pod`` from its node, low on ``resource``."""
    threshold = "100Mi" if resource == "memory" else "10Gi"
    container = container_of(pod)
    entry = pod_event_ex(
        sc,
        pod,
        m,
        "Evicted",
        f"The node was low on resource: {resource}. Threshold quantity: {threshold}, "
        f"available: {available}. Container {container} was using {using_ki}Ki, request is "
        f"{request}, has larger consumption of {resource}. ",
        component="kubelet",
        etype="Warning",
        annotations={
            "offending_containers": container,
            "offending_containers_usage": f"{using_ki}Ki",
            "starved_resource": resource,
        },
    )
    pod_event_ex(
        sc, pod, m + 0.01, "Killing", f"Stopping container {container}", component="kubelet"
    )
    return entry


def node_pressure_events(sc: Scenario, node: Node, m: float, condition: str, until: float) -> None:
    """The kubelet's own Events while ``node`` is under pressure, and its condition."""
    resource, bad, good = {
        "MemoryPressure": ("memory", "NodeHasInsufficientMemory", "NodeHasSufficientMemory"),
        "DiskPressure": ("ephemeral-storage", "NodeHasDiskPressure", "NodeHasNoDiskPressure"),
    }[condition]
    sc.event_node(node, m, bad, f"Node {node.name} status is now: {bad}", component="kubelet")
    sc.event_node(
        node,
        m + 0.05,
        "EvictionThresholdMet",
        f"Attempting to reclaim {resource}",
        component="kubelet",
        etype="Warning",
    )
    sc.event_node(node, until, good, f"Node {node.name} status is now: {good}", component="kubelet")
    minutes = sc.node_pressure.setdefault(node.name, {})
    for minute in range(math.ceil(m), math.ceil(until)):
        minutes[minute] = condition


def image_pull_events(
    sc: Scenario, pod: AnyPod, m: float, until: float, image: str, error: str
) -> None:
    """The kubelet's pull attempts of ``image`` for ``pod`` from T+m: each fails with
    ``error``, then backs off (10s, 20s, 40s ... 5m, as the kubelet does)."""
    backoff = [0.0, 0.2, 0.55, 1.25, 2.6, 5.3]
    while m + backoff[-1] < until:
        backoff.append(backoff[-1] + 5.1)
    for count, delay in enumerate(backoff, start=1):
        at = m + delay
        if at >= until or at > LAST_MINUTE:
            break
        pod_event_ex(
            sc,
            pod,
            at,
            "Pulling",
            f'Pulling image "{image}"',
            component="kubelet",
            count=count,
            first_m=m,
        )
        pod_event_ex(
            sc,
            pod,
            at + 0.02,
            "Failed",
            f'Failed to pull image "{image}": {error}',
            component="kubelet",
            etype="Warning",
            count=count,
            first_m=m + 0.02,
        )
        pod_event_ex(
            sc,
            pod,
            at + 0.021,
            "Failed",
            "Error: ErrImagePull",
            component="kubelet",
            etype="Warning",
            count=count,
            first_m=m + 0.021,
        )
        pod_event_ex(
            sc,
            pod,
            at + 0.05,
            "BackOff",
            f'Back-off pulling image "{image}"',
            component="kubelet",
            count=count,
            first_m=m + 0.05,
        )
        pod_event_ex(
            sc,
            pod,
            at + 0.051,
            "Failed",
            "Error: ImagePullBackOff",
            component="kubelet",
            etype="Warning",
            count=count,
            first_m=m + 0.051,
        )


def image_waiting_series(sc: Scenario, pod: AnyPod, m: float, until: float) -> None:
    first, last = math.ceil(m), math.ceil(until)
    pulling = lambda x: x == first  # noqa: E731
    backing = lambda x: first < x < last  # noqa: E731
    add_reason(
        sc,
        "kube_pod_container_status_waiting_reason",
        pod,
        "ErrImagePull",
        pulling,
        container=container_of(pod),
    )
    add_reason(
        sc,
        "kube_pod_container_status_waiting_reason",
        pod,
        "ImagePullBackOff",
        backing,
        container=container_of(pod),
    )


def scenario_tfjob_oom() -> Scenario:
    ctx = Context(
        project="corvid-recsys",
        location="europe-west1",
        zone="europe-west1-c",
        cluster="recsys-gpu-euw1",
        namespace="ranking",
        workload="dlrm-ps",
        issue_time="2026-09-03T18:20:00Z",
        workload_kind="tfjob",
    )
    sc = Scenario(
        "tfjob-oom-killed",
        "Kubeflow TFJob (ParameterServerStrategy: Chief, 2 PS on CPU nodes, 4 GPU Workers, "
        "restartPolicy ExitCode). Parameter server PS 1 holds the growing embedding tables: "
        "its working set climbs to its 96Gi limit and the kernel OOM-kills it at T-17.4m "
        "and T+6.6m (oom-kill line naming the pod's memory cgroup, OOMKilling event, "
        "kube_pod_container_status_terminated_reason OOMKilled: the pod runs with "
        "restartPolicy Never, so there is no last-terminated state). The operator sees exit "
        "code 137 (ExitedWithCode; 137 alone would prove nothing), re-creates dlrm-ps-ps-1 "
        "and records TFJobRestarting (counter 0 -> 2).",
        ctx,
        expect("out_of_memory", "fix_memory"),
    )
    cpus = sc.add_pool(
        "cpu-pool", "n2-highmem-32", 3, capacity={"cpu": "32", "memory": "263965424Ki"}
    )
    gpus = sc.add_pool(
        "l4-pool",
        "g2-standard-48",
        4,
        labels=gpu_labels("nvidia-l4", 4),
        capacity=gpu_capacity(48, 197972452, 4),
        taints=GPU_TAINT,
    )
    cpu_select = {"cloud.google.com/gke-nodepool": "cpu-pool"}
    gpu_select = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "PS": 2, "Worker": 4},
        image="europe-west1-docker.pkg.dev/corvid-recsys/ranking/dlrm-tf:2.17.1",
        resources={
            "Chief": {"cpu": "8", "memory": "32Gi"},
            "PS": {"cpu": "24", "memory": "96Gi"},
            "Worker": {"cpu": "40", "memory": "160Gi", "nvidia.com/gpu": "4"},
        },
        node_selector={"Chief": cpu_select, "PS": cpu_select, "Worker": gpu_select},
        tolerations={"Worker": GPU_TOLERATION},
        command=["python3", "-m", "dlrm.train", "--strategy=parameter_server"],
    )
    placement = {("Chief", 0): cpus[0], ("PS", 0): cpus[1], ("PS", 1): cpus[2]}
    placement.update({("Worker", i): gpus[i] for i in range(4)})
    ps1 = ("PS", 1)
    fails = [-17.4, 6.6]
    restarts = [math.ceil(f) + 1 for f in fails]
    for rtype, count in spec.replicas.items():
        for i in range(count):
            if (rtype, i) != ps1:
                sc.kf_pods(spec, ctx.namespace, 0, -500, None, placement, only=[(rtype, i)])
    starts = [-500, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        (pod,) = sc.kf_pods(
            spec,
            ctx.namespace,
            k,
            start,
            end,
            placement,
            only=[ps1],
            failed_at={ps1: end - 1} if end is not None else None,
            created_m=start - 0.58 if k else None,
        )
        if end is not None:
            kernel_oom(sc, pod, fails[k], qos="guaranteed")
            add_reason(
                sc,
                "kube_pod_container_status_terminated_reason",
                pod,
                "OOMKilled",
                lambda m, f=end - 1: m >= f,
                container="tensorflow",
            )
            sc.kf_restart([pod], end, 137)
    sc.operator_counter(ctx.namespace, "tensorflow", None, restarts)
    usage = _oom_usage([r - 2 for r in restarts], ramp=12)
    for pod in sc.pods:
        if isinstance(pod, KfPod) and (pod.rtype, pod.index) == ps1:
            add_memory(sc, pod, usage)
        elif isinstance(pod, KfPod):
            add_memory(sc, pod, lambda m, p=pod: 0.48 + rand_float(-0.04, 0.04, "m", p.name, m))
    chief = sc.kf_pod(spec, "Chief", 0, 0)
    tid = rand_int(130_000, 140_000, "tid", chief.name)
    for m in range(FIRST_MINUTE + 1, LAST_MINUTE + 1, 3):
        at = ctx.at(m + 0.4, "tf-step", m)
        step = 812_000 + (m - FIRST_MINUTE) * 140
        sc.container_log(
            chief,
            m + 0.4,
            f"{glog_prefix('I', at, tid, 'controller.py:495')} train | step: {step:>7d} | "
            f"training metrics: {{'loss': {0.44 + rand_float(-0.01, 0.01, 'l', m):.4f}, "
            f"'auc': {rand_float(0.801, 0.806, 'auc', m):.4f}}}",
            stderr=True,
            at_ns=at,
        )
    for m0 in fails:
        at = ctx.at(m0 + 0.2, "tf-ps-lost", m0)
        sc.container_log(
            chief,
            m0 + 0.2,
            f"{glog_prefix('W', at, tid, 'cluster_coordinator.py:793')} PS "
            "/job:ps/replica:0/task:1 failed with UnavailableError: Socket closed; "
            "the coordinator waits for it to come back.",
            stderr=True,
            at_ns=at,
        )
    sc.kubelet_noise()
    return sc


def scenario_jobset_priority_preemption() -> Scenario:
    ctx = Context(
        project="orbit-ai-shared",
        location="us-east4",
        zone="us-east4-c",
        cluster="shared-gpu-use4",
        namespace="research",
        workload="vit-pretrain",
        issue_time="2026-04-21T15:05:00Z",
    )
    sc = Scenario(
        "jobset-preempted-by-priority",
        "A JobSet (1 x 4 pods, PriorityClass offline-low, value 1000) shares an A2 GPU pool "
        "with the online ranker (namespace serving, PriorityClass online-critical, value "
        "100000). The ranker's autoscaler adds a GPU pod at T-12.3m and at T+19.2m: the "
        "scheduler preempts the training pod on node ...-k4d8 (Preempted, related = the "
        "ranker pod; DisruptionTarget PreemptionByScheduler), the Job fails and the JobSet "
        "restarts (2 -> 4). Until the ranker scales in at T+2m the re-created pod 3 is "
        "unschedulable (FailedScheduling Insufficient nvidia.com/gpu): a consequence, not "
        "missing capacity. Nodes stay Ready, no interruption.",
        ctx,
        expect("priority_preemption", "protect_priority"),
    )
    nodes = sc.add_pool(
        "a2-pool",
        "a2-highgpu-8g",
        4,
        suffixes=["b2n7", "f6q1", "m9x3", "k4d8"],
        labels=gpu_labels("nvidia-tesla-a100"),
        capacity=gpu_capacity(96, 696267776),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="us-east4-docker.pkg.dev/orbit-ai-shared/vision/vit-train:4.2.0",
        resources={"cpu": "80", "memory": "600Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"},
        tolerations=GPU_TOLERATION,
        priority_class="offline-low",
    )
    hits = [-12.3, 19.2]
    restarts = [math.ceil(h) + 1 for h in hits]
    sc.add_jobset(spec, 2, restarts)
    msg = (
        "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) didn't match pod "
        "anti-affinity rules. preemption: 0/4 nodes are available: 1 No preemption victims "
        "found for incoming pod, 3 Preemption is not helpful for scheduling."
    )
    sc.attempt(spec, 2, -600, restarts[0], nodes, failed_at={3: math.ceil(hits[0])})
    second = sc.attempt(
        spec,
        3,
        restarts[0],
        restarts[1],
        nodes,
        running_from={3: 3},
        failed_at={3: math.ceil(hits[1])},
        unsched={3: (restarts[0], 2)},
        sched_message=msg,
    )
    third = sc.attempt(
        spec,
        4,
        restarts[1],
        None,
        nodes,
        running_from={3: None},
        unsched={3: (restarts[1], LAST_MINUTE + 1)},
        sched_message=msg,
    )
    ranker = "us-east4-docker.pkg.dev/orbit-ai-shared/serving/ranker:8.14.2"
    first_pod = deployment_pod(
        sc,
        "ranker-gpu-7c9d6f5b8-xq2lp",
        "serving",
        nodes[3],
        math.ceil(hits[0]),
        2,
        app="ranker",
        image=ranker,
        resources={"cpu": "40", "memory": "300Gi", "nvidia.com/gpu": "8"},
        priority_class="online-critical",
        priority=100000,
    )
    second_pod = deployment_pod(
        sc,
        "ranker-gpu-7c9d6f5b8-r8vtn",
        "serving",
        nodes[3],
        math.ceil(hits[1]),
        None,
        app="ranker",
        image=ranker,
        resources={"cpu": "40", "memory": "300Gi", "nvidia.com/gpu": "8"},
        priority_class="online-critical",
        priority=100000,
    )
    preempted(sc, sc.pod(spec, 2, 3), hits[0], first_pod)
    preempted(sc, sc.pod(spec, 3, 3), hits[1], second_pod)
    for k, r in enumerate(restarts):
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {3 + k}")
    for pod, first in ((second[3], restarts[0]), (third[3], restarts[1])):
        for count, m in enumerate((first + 0.1, first + 1.1, first + 3.2, first + 8.3), 1):
            if m < (2 if pod is second[3] else LAST_MINUTE):
                sc.event_pod(
                    pod,
                    m,
                    "FailedScheduling",
                    msg,
                    component="default-scheduler",
                    etype="Warning",
                    count=count,
                    first_m=first + 0.1,
                )
    sc.event_pod(
        second[3],
        2.4,
        "Scheduled",
        f"Successfully assigned research/{second[3].name} to {nodes[3].name}",
        component="default-scheduler",
    )
    for pod in sc.pods:
        add_pod_info(sc, pod, "offline-low", ("Job", spec.job_name(0)))
    sc.training_noise(spec, "hf")
    sc.kubelet_noise()
    return sc


def scenario_tfjob_priority_preemption() -> Scenario:
    ctx = Context(
        project="nimbus-adtech",
        location="asia-northeast1",
        zone="asia-northeast1-a",
        cluster="mixed-prod-ane1",
        namespace="kubeflow",
        workload="ctr-wide-deep",
        issue_time="2026-12-08T02:15:00Z",
        workload_kind="tfjob",
    )
    sc = Scenario(
        "tfjob-preempted-by-priority",
        "Kubeflow TFJob on shared CPU nodes (Chief, PS, 3 Workers, PriorityClass "
        "offline-low value 1000, the low tier of an online/offline co-location). The online "
        "search-frontend Deployment (namespace online, PriorityClass online-high value "
        "1000000) scales out at T-9.5m and T+14.5m; the scheduler preempts Worker 1 each "
        "time (Preempted, related = the frontend pod). The worker exits 143, the operator "
        "re-creates it (ExitedWithCode, TFJobRestarting; counter 4 -> 6).",
        ctx,
        expect("priority_preemption", "protect_priority"),
    )
    cpus = sc.add_pool(
        "shared-pool", "n2-standard-64", 5, capacity={"cpu": "64", "memory": "263965424Ki"}
    )
    select = {"cloud.google.com/gke-nodepool": "shared-pool"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "PS": 1, "Worker": 3},
        image="asia-northeast1-docker.pkg.dev/nimbus-adtech/ml/wide-deep:2.16.2",
        resources={
            "Chief": {"cpu": "8", "memory": "32Gi"},
            "PS": {"cpu": "16", "memory": "64Gi"},
            "Worker": {"cpu": "48", "memory": "96Gi"},
        },
        node_selector={"Chief": select, "PS": select, "Worker": select},
        tolerations={},
        command=["python3", "/app/train.py"],
    )
    placement = {("Chief", 0): cpus[0], ("PS", 0): cpus[0]}
    placement.update({("Worker", i): cpus[i + 1] for i in range(3)})
    w1 = ("Worker", 1)
    hits = [-9.5, 14.5]
    restarts = [math.ceil(h) + 1 for h in hits]
    for rtype, count in spec.replicas.items():
        for i in range(count):
            if (rtype, i) != w1:
                sc.kf_pods(spec, ctx.namespace, 0, -400, None, placement, only=[(rtype, i)])
    starts = [-400, *restarts]
    victims = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        spot = dict(placement)
        spot[w1] = cpus[2] if k % 2 == 0 else cpus[4]
        (pod,) = sc.kf_pods(
            spec,
            ctx.namespace,
            k,
            start,
            end,
            spot,
            only=[w1],
            failed_at={w1: end - 1} if end is not None else None,
            created_m=start - 0.58 if k else None,
        )
        victims.append(pod)
    frontend = "asia-northeast1-docker.pkg.dev/nimbus-adtech/online/search-frontend:5.2.9"
    for k, hit in enumerate(hits):
        preemptor = deployment_pod(
            sc,
            f"search-frontend-6d8f7b9c4-{rand_str(K8S_ALPHABET, 5, 'sf', k)}",
            "online",
            victims[k].node or cpus[2],
            math.ceil(hit),
            None,
            app="search-frontend",
            image=frontend,
            resources={"cpu": "56", "memory": "96Gi"},
            priority_class="online-high",
            priority=1000000,
        )
        preempted(sc, victims[k], hit, preemptor)
        sc.kf_restart([victims[k]], restarts[k], 143)
    sc.operator_counter(ctx.namespace, "tensorflow", 4, restarts)
    for pod in sc.pods:
        if isinstance(pod, KfPod):
            sc.pod_hooks[pod.uid] = priority_hook("offline-low", 1000)
            add_pod_info(sc, pod, "offline-low", ("TFJob", spec.name))
    chief = sc.kf_pod(spec, "Chief", 0, 0)
    tid = rand_int(130_000, 140_000, "tid", chief.name)
    for m in range(FIRST_MINUTE + 2, LAST_MINUTE + 1, 4):
        at = ctx.at(m + 0.3, "wd-step", m)
        sc.container_log(
            chief,
            m + 0.3,
            f"{glog_prefix('I', at, tid, 'estimator.py:2297')} loss = "
            f"{0.39 + rand_float(-0.01, 0.01, 'l', m):.5f}, step = {50_000 + 90 * (m + 90)}",
            stderr=True,
            at_ns=at,
        )
    sc.kubelet_noise()
    return sc


def scenario_jobset_eviction() -> Scenario:
    ctx = Context(
        project="quarry-analytics",
        location="us-west1",
        zone="us-west1-b",
        cluster="batch-cpu-usw1",
        namespace="ml-batch",
        workload="xgb-ranker-train",
        issue_time="2026-10-14T06:40:00Z",
    )
    sc = Scenario(
        "jobset-node-pressure-eviction",
        "CPU JobSet (1 x 4 pods, XGBoost workers, memory request 32Gi) on n2-highmem-32 "
        "nodes shared with an ETL backfill that sets no memory limit. The backfill grows on "
        "node ...-p7c2 and later on ...-v3k8: the node runs low on memory (MemoryPressure, "
        "NodeHasInsufficientMemory, EvictionThresholdMet) and the kubelet evicts the "
        "training pod, the pod furthest above its request (Evicted, kube_pod_status_reason "
        "Evicted) at T-18.4m and T+8.3m. The Job fails and the JobSet restarts (5 -> 7). "
        "The nodes stay Ready; the pressure ends minutes later.",
        ctx,
        expect("node_pressure_eviction", "relieve_node_pressure"),
    )
    nodes = sc.add_pool(
        "highmem-pool",
        "n2-highmem-32",
        4,
        suffixes=["h1m4", "p7c2", "v3k8", "z5t6"],
        capacity={"cpu": "32", "memory": "263965424Ki"},
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="xgboost",
        image="us-west1-docker.pkg.dev/quarry-analytics/ml/xgb-ranker:1.7.6-r3",
        resources={"cpu": "28", "memory": "32Gi"},
        node_selector={"cloud.google.com/gke-nodepool": "highmem-pool"},
        tolerations=[],
    )
    hits = [(-18.4, 1), (8.3, 2)]
    restarts = [math.ceil(m) + 1 for m, _ in hits]
    sc.add_jobset(spec, 5, restarts)
    sc.attempt(spec, 5, -500, restarts[0], nodes, failed_at={1: math.ceil(hits[0][0])})
    sc.attempt(spec, 6, restarts[0], restarts[1], nodes, failed_at={2: math.ceil(hits[1][0])})
    sc.attempt(spec, 7, restarts[1], None, nodes)
    for k, (m0, g) in enumerate(hits):
        node = nodes[g]
        node_pressure_events(sc, node, m0 - 0.4, "MemoryPressure", m0 + 3.2)
        pod = sc.pod(spec, 5 + k, g)
        evicted(sc, pod, m0, "memory", 118_204_332 + 1000 * k, "32Gi", f"{86_220 + 11 * k}Ki")
        add_reason(sc, "kube_pod_status_reason", pod, "Evicted", since(math.ceil(m0)))
        jobset_event(
            sc, spec, restarts[k] - 0.55, "Restarting", f"restarting jobset, attempt {6 + k}"
        )
    last = nodes[hits[1][1]]
    sc.node_hooks[last.name] = pressure_until(
        last,
        "MemoryPressure",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
        ctx.at(hits[1][0] + 3.2, "relief", last.name),
    )
    sc.training_noise(spec, "jax", workers=False)
    sc.kubelet_noise()
    return sc


def scenario_tfjob_eviction() -> Scenario:
    ctx = Context(
        project="lumen-vision-prod",
        location="us-central1",
        zone="us-central1-f",
        cluster="cpu-train-usc1",
        namespace="vision",
        workload="effnet-ps",
        issue_time="2026-06-30T21:10:00Z",
        workload_kind="tfjob",
    )
    sc = Scenario(
        "tfjob-node-pressure-eviction",
        "Kubeflow TFJob (Chief, PS, 3 Workers on CPU nodes, restartPolicy ExitCode) whose "
        "workers write checkpoints and summaries to an emptyDir on the node's boot disk "
        "without an ephemeral-storage limit. The disk fills (DiskPressure, "
        "NodeHasDiskPressure, EvictionThresholdMet 'Attempting to reclaim "
        "ephemeral-storage') and the kubelet evicts Worker 0 at T-13.2m and Worker 2 at "
        "T+11.8m (Evicted: low on ephemeral-storage). The operator sees exit code 137, "
        "re-creates the worker and records TFJobRestarting (counter 1 -> 3).",
        ctx,
        expect("node_pressure_eviction", "relieve_node_pressure"),
    )
    cpus = sc.add_pool(
        "cpu-pool", "c3-standard-44", 5, capacity={"cpu": "44", "memory": "181197988Ki"}
    )
    select = {"cloud.google.com/gke-nodepool": "cpu-pool"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "PS": 1, "Worker": 3},
        image="us-central1-docker.pkg.dev/lumen-vision-prod/vision/effnet-tf:2.17.0",
        resources={
            "Chief": {"cpu": "8", "memory": "32Gi"},
            "PS": {"cpu": "16", "memory": "64Gi"},
            "Worker": {"cpu": "40", "memory": "128Gi"},
        },
        node_selector={"Chief": select, "PS": select, "Worker": select},
        tolerations={},
        command=["python3", "-m", "effnet.train", "--model_dir=/scratch/model"],
    )
    placement = {("Chief", 0): cpus[0], ("PS", 0): cpus[1]}
    placement.update({("Worker", i): cpus[i + 2] for i in range(3)})
    hits = [(-13.2, 0), (11.8, 2)]
    restarts = [math.ceil(m) + 1 for m, _ in hits]
    hit_workers = {("Worker", i) for _, i in hits}
    for rtype, count in spec.replicas.items():
        for i in range(count):
            if (rtype, i) not in hit_workers:
                sc.kf_pods(spec, ctx.namespace, 0, -300, None, placement, only=[(rtype, i)])
    for (m0, index), r in zip(hits, restarts, strict=True):
        key = ("Worker", index)
        (old,) = sc.kf_pods(
            spec, ctx.namespace, 0, -300, r, placement, only=[key], failed_at={key: r - 1}
        )
        sc.kf_pods(spec, ctx.namespace, 1, r, None, placement, only=[key], created_m=r - 0.58)
        node = placement[key]
        node_pressure_events(sc, node, m0 - 0.5, "DiskPressure", m0 + 4.1)
        evicted(sc, old, m0, "ephemeral-storage", 86_400_212 + index, "0", f"{8_412_096 - index}Ki")
        add_reason(sc, "kube_pod_status_reason", old, "Evicted", lambda m, f=r - 1: m >= f)
        sc.kf_restart([old], r, 137)
    sc.operator_counter(ctx.namespace, "tensorflow", 1, restarts)
    last = placement[("Worker", hits[1][1])]
    sc.node_hooks[last.name] = pressure_until(
        last,
        "DiskPressure",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
        ctx.at(hits[1][0] + 4.1, "relief", last.name),
    )
    chief = sc.kf_pod(spec, "Chief", 0, 0)
    tid = rand_int(130_000, 140_000, "tid", chief.name)
    for m in range(FIRST_MINUTE + 1, LAST_MINUTE + 1, 5):
        at = ctx.at(m + 0.3, "eff-step", m)
        sc.container_log(
            chief,
            m + 0.3,
            f"{glog_prefix('I', at, tid, 'controller.py:495')} train | step: "
            f"{210_000 + 64 * (m + 90):>7d} | top_1_accuracy: "
            f"{rand_float(0.771, 0.774, 'acc', m):.4f}",
            stderr=True,
            at_ns=at,
        )
    sc.kubelet_noise()
    return sc


def scenario_jobset_image_pull() -> Scenario:
    ctx = Context(
        project="saffron-genai",
        location="us-east5",
        zone="us-east5-a",
        cluster="h100-dev-use5",
        namespace="team-agents",
        workload="qwen-rlhf",
        issue_time="2026-03-02T12:45:00Z",
    )
    image = "us-east5-docker.pkg.dev/saffron-genai/train/rlhf-runner:2026.02.26-rc4"
    error = (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )
    sc = Scenario(
        "jobset-image-pull",
        "H100 JobSet (1 x 4 pods, imagePullPolicy IfNotPresent). The tag rlhf-runner:"
        "2026.02.26-rc4 was deleted by an Artifact Registry cleanup policy; three nodes "
        "still have it cached, the fourth (re-created by auto-repair the day before) does "
        "not. Worker 3 is scheduled there and waits on the pull (Failed to pull image: not "
        "found, ErrImagePull, ImagePullBackOff), Pending. torchrun's rendezvous on worker 0 "
        "times out after 15 minutes, the Job fails and the JobSet restarts (7 -> 10, at "
        "T-20m, T-4m, T+12m, T+28m); the new worker 3 lands on the same node. Pending for 15 "
        "minutes, yet scheduled: an image pull, not capacity.",
        ctx,
        expect("image_pull", "fix_image"),
    )
    nodes = sc.add_pool(
        "h100-pool",
        "a3-highgpu-8g",
        4,
        suffixes=["c8j2", "g4w7", "n6r1", "t2x9"],
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image=image,
        resources={"cpu": "96", "memory": "800Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    restarts = [-36, -20, -4, 12, 28]
    sc.add_jobset(spec, 6, restarts)
    starts = [-52, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        pods = sc.attempt(
            spec,
            5 + k,
            start,
            end,
            nodes,
            running_from={3: None},
            failed_at={0: end - 1} if end is not None else None,
        )
        pod = pods[3]
        if start >= FIRST_MINUTE:
            sc.event_pod(
                pod,
                start - 0.85,
                "Scheduled",
                f"Successfully assigned {pod.namespace}/{pod.name} to {nodes[3].name}",
                component="default-scheduler",
            )
        image_pull_events(
            sc, pod, start - 0.8, end if end is not None else LAST_MINUTE + 1, image, error
        )
        image_waiting_series(sc, pod, start, end if end is not None else LAST_MINUTE + 1)
        if end is None:
            sc.pod_hooks[pod.uid] = waiting_on_image(
                sc, pod, "ImagePullBackOff", f'Back-off pulling image "{image}"'
            )
        coord = pods[0]
        if end is not None and end >= FIRST_MINUTE:
            at = sc.ctx.at(end - 1.2, "rdzv", coord.name)
            sc.container_log(
                coord,
                end - 1.2,
                f"[{py_stamp(at)}] torch.distributed.elastic.rendezvous.api."
                "RendezvousTimeoutError: "
                "The node 'qwen-rlhf-workers-0-0' has failed to reach rendezvous: 3 of 4 nodes "
                "joined within 900 seconds.",
                stderr=True,
                at_ns=at,
            )
            jobset_event(sc, spec, end - 0.55, "Restarting", f"restarting jobset, attempt {6 + k}")
    sc.kubelet_noise()
    return sc


def scenario_tfjob_image_pull() -> Scenario:
    ctx = Context(
        project="fjord-speech",
        location="europe-west4",
        zone="europe-west4-b",
        cluster="speech-train-euw4",
        namespace="asr",
        workload="conformer-ps",
        issue_time="2026-11-02T09:30:00Z",
        workload_kind="tfjob",
    )
    image = "europe-west4-docker.pkg.dev/fjord-speech/private/conformer-worker:3.1.0"
    host = "europe-west4-docker.pkg.dev"
    error = (
        f'rpc error: code = Unknown desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": failed to authorize: failed to fetch oauth '
        f"token: unexpected status from GET request to https://{host}/v2/token?scope="
        "repository%3Afjord-speech%2Fprivate%2Fconformer-worker%3Apull&service="
        f"{host}: 403 Forbidden"
    )
    sc = Scenario(
        "tfjob-image-pull",
        "Kubeflow TFJob (Chief on CPU, 4 GPU Workers on a new L4 node pool, restartPolicy "
        "ExitCode). The worker image lives in a private Artifact Registry repository the new "
        "pool's node service account cannot read: every worker waits on the pull (403 "
        "Forbidden, ErrImagePull, ImagePullBackOff) and stays Pending, scheduled. The Chief "
        "waits for its workers under `timeout --preserve-status 900` and exits 143; the "
        "operator re-creates it (ExitedWithCode 143, TFJobRestarting; counter 2 -> 7, at "
        "T-43m, then T-27m, T-11m, T+5m and T+21m inside the window).",
        ctx,
        expect("image_pull", "fix_image"),
    )
    cpus = sc.add_pool("cpu-pool", "n2-standard-16", 1, capacity={"cpu": "16"})
    gpus = sc.add_pool(
        "l4-pool-v2",
        "g2-standard-24",
        4,
        labels=gpu_labels("nvidia-l4", 2),
        capacity=gpu_capacity(24, 98903572, 2),
        taints=GPU_TAINT,
    )
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="TFJob",
        replicas={"Chief": 1, "Worker": 4},
        image=image,
        resources={
            "Chief": {"cpu": "8", "memory": "24Gi"},
            "Worker": {"cpu": "20", "memory": "80Gi", "nvidia.com/gpu": "2"},
        },
        node_selector={
            "Chief": {"cloud.google.com/gke-nodepool": "cpu-pool"},
            "Worker": {"cloud.google.com/gke-nodepool": "l4-pool-v2"},
        },
        tolerations={"Worker": GPU_TOLERATION},
        command=["timeout", "--preserve-status", "900", "python3", "-m", "conformer.train"],
    )
    placement = {("Chief", 0): cpus[0]}
    placement.update({("Worker", i): gpus[i] for i in range(4)})
    workers = sc.kf_pods(
        spec,
        ctx.namespace,
        0,
        -60,
        None,
        placement,
        only=[("Worker", i) for i in range(4)],
        run_delay=10_000,
    )
    for i, pod in enumerate(workers):
        image_pull_events(sc, pod, -59.7 + 0.07 * i, LAST_MINUTE + 1, image, error)
        image_waiting_series(sc, pod, -60, LAST_MINUTE + 1)
        sc.pod_hooks[pod.uid] = waiting_on_image(
            sc, pod, "ImagePullBackOff", f'Back-off pulling image "{image}"'
        )
    restarts = [-43, -27, -11, 5, 21]
    starts = [-59, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        (chief,) = sc.kf_pods(
            spec,
            ctx.namespace,
            k,
            start,
            end,
            placement,
            only=[("Chief", 0)],
            failed_at={("Chief", 0): end - 1} if end is not None else None,
            created_m=start - 0.58 if k else None,
        )
        if end is None:
            continue
        at = ctx.at(end - 1.3, "chief-wait", k)
        tid = rand_int(100, 999, "ctid", k)
        if end >= FIRST_MINUTE:
            sc.container_log(
                chief,
                end - 1.3,
                f"{glog_prefix('W', at, tid, 'cluster_coordinator.py:1042')} Still waiting "
                "for 4 workers (/job:worker/replica:0/task:0..3) to become available.",
                stderr=True,
                at_ns=at,
            )
            sc.kf_restart([chief], end, 143)
    sc.operator_counter(ctx.namespace, "tensorflow", 2, [r for r in restarts if r >= FIRST_MINUTE])
    sc.kubelet_noise()
    return sc


def scenario_oom_then_nccl() -> Scenario:
    ctx = Context(
        project="tessera-llm",
        location="us-central1",
        zone="us-central1-c",
        cluster="a100-train-usc1",
        namespace="pretrain",
        workload="llama-13b-cpt",
        issue_time="2026-05-06T04:20:00Z",
    )
    sc = Scenario(
        "oom-then-nccl-timeout",
        "Precedence: an OOM kill followed by NCCL timeouts. A2 Ultra JobSet (1 x 4 pods, "
        "32 ranks, container limit 1000Gi). Worker 2's host memory grows until the kernel "
        "OOM-kills its container at T-24.4m and T+1.6m. Its Job keeps the other pods "
        "running (backoffLimit 3), and they hang in the all-reduce until the coordinator's "
        "NCCL watchdog fires 10 minutes later (Watchdog caught collective operation "
        "timeout, DistBackendError, ChildFailedError) and the JobSet restarts (1 -> 3, at "
        "T-13.8m and T+12.2m). Worker 1 logs connection reset by peer. The coordinator's "
        "timeout is the consequence: out_of_memory, not application.",
        ctx,
        expect("out_of_memory", "fix_memory"),
    )
    nodes = sc.add_pool(
        "a100-pool",
        "a2-ultragpu-8g",
        4,
        labels=gpu_labels("nvidia-a100-80gb"),
        capacity=gpu_capacity(96, 1391821596),
        taints=GPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="pytorch",
        image="us-central1-docker.pkg.dev/tessera-llm/cpt/megatron:24.09-cu124",
        resources={"cpu": "88", "memory": "1000Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    ooms = [-24.4, 1.6]
    restarts = [-13, 13]
    sc.add_jobset(spec, 1, restarts)
    starts = [-300, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = None
        if end is not None:
            failed = {g: end - 1 for g in range(4)}
            failed[2] = math.ceil(ooms[k])
        sc.attempt(spec, 1 + k, start, end, nodes, failed_at=failed)
    sc.training_noise(
        spec,
        "megatron",
        every=3,
        quiet=[(math.ceil(o), r) for o, r in zip(ooms, restarts, strict=True)],
    )
    for k, (m0, r) in enumerate(zip(ooms, restarts, strict=True)):
        pod = sc.pod(spec, 1 + k, 2)
        kernel_oom(sc, pod, m0)
        audit_oom_patch(sc, pod, m0 + 0.03, started_m=starts[k] + 0.7)
        add_reason(
            sc,
            "kube_pod_container_status_terminated_reason",
            pod,
            "OOMKilled",
            since(math.ceil(m0)),
            container="pytorch",
        )
        coord = sc.pod(spec, 1 + k, 0)
        fail_m = m0 + 10.0
        for at, text in nccl_failure_lines(ctx, coord, fail_m, 30_000 + 97 * k):
            sc.container_log(coord, fail_m, text, stderr=True, at_ns=at)
        worker = sc.pod(spec, 1 + k, 1)
        tw = ctx.at(m0 + 0.05, "reset", worker.name)
        sc.container_log(
            worker,
            m0 + 0.05,
            f"[rank8]:[{py_stamp(tw)}] NCCL WARN NET/Socket : peer 10.8.1.14<51277> message "
            "truncated; recv() failed: connection reset by peer",
            stderr=True,
            at_ns=tw,
        )
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {2 + k}")
    usage = _oom_usage([math.ceil(m) - 1 for m in ooms], ramp=14)
    for pod in sc.pods:
        if isinstance(pod, Pod) and pod.p == 2:
            add_memory(sc, pod, usage)
        else:
            add_memory(sc, pod, lambda m, p=pod: 0.5 + rand_float(-0.03, 0.03, "m", p.name, m))
    sc.kubelet_noise()
    return sc


def scenario_spot_with_preempted_pods() -> Scenario:
    ctx = Context(
        project="acme-ml-spot",
        location="us-west4",
        zone="us-west4-b",
        cluster="l4-spot-usw4",
        namespace="training",
        workload="sd-xl-finetune",
        issue_time="2026-07-19T20:10:00Z",
    )
    sc = Scenario(
        "spot-preemption-with-preempted-pods",
        "Precedence: a Spot preemption storm whose pods also show Preempted. A JobSet (1 x "
        "4 pods, PriorityClass offline-low) and an eval Deployment (namespace eval, "
        "PriorityClass spot-eval-high) share a Spot L4 pool. Compute Engine preempts the "
        "eval pod's VM at T-16.3m: the re-created eval pod preempts training pod 2 on "
        "another node (Preempted, related = the eval pod). At T+3.7m the VM of training pod "
        "1 itself is preempted. The JobSet restarts each time (8 -> 10). The VMs went away, "
        "not the scheduler's choice: spot_preemption.",
        ctx,
        expect("spot_preemption", "avoid_preemption"),
    )
    common = dict(
        spot=True,
        labels=gpu_labels("nvidia-l4", 4),
        capacity=gpu_capacity(48, 197972452, 4),
        taints=GPU_TAINT,
    )
    nodes = sc.add_pool("l4-spot", "g2-standard-48", 6, **common)  # type: ignore[arg-type]
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="us-docker.pkg.dev/acme-ml-spot/diffusion/sdxl-ft:1.4.2",
        resources={"cpu": "44", "memory": "180Gi", "nvidia.com/gpu": "4"},
        node_selector={"cloud.google.com/gke-spot": "true"},
        tolerations=GPU_TOLERATION,
        priority_class="offline-low",
    )
    restarts = [-15, 5]
    sc.add_jobset(spec, 8, restarts)
    sc.preemption(nodes[4], -16.3)
    sc.preemption(nodes[1], 3.7)
    back = max(nodes[1].not_ready) + 1
    sc.attempt(spec, 8, -500, restarts[0], nodes, failed_at={2: -15})
    sc.attempt(spec, 9, restarts[0], restarts[1], nodes, failed_at={1: 4})
    sc.attempt(spec, 10, restarts[1], None, nodes, running_from={1: back})
    eval_image = "us-docker.pkg.dev/acme-ml-spot/eval/harness:2.0.3"
    deployment_pod(
        sc,
        "eval-harness-5f7d9c8b6-2kq9w",
        "eval",
        nodes[4],
        -600,
        -16,
        app="eval-harness",
        image=eval_image,
        resources={"cpu": "40", "memory": "160Gi", "nvidia.com/gpu": "4"},
        priority_class="spot-eval-high",
        priority=500000,
    )
    moved = deployment_pod(
        sc,
        "eval-harness-5f7d9c8b6-w8ht4",
        "eval",
        nodes[2],
        -16,
        None,
        app="eval-harness",
        image=eval_image,
        resources={"cpu": "40", "memory": "160Gi", "nvidia.com/gpu": "4"},
        priority_class="spot-eval-high",
        priority=500000,
    )
    preempted(sc, sc.pod(spec, 8, 2), -15.9, moved)
    for k, r in enumerate(restarts):
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {9 + k}")
    for pod in sc.pods:
        add_pod_info(sc, pod, "offline-low", ("Job", spec.job_name(0)))
    sc.training_noise(spec, "diffusion")
    sc.kubelet_noise()
    return sc


EVICTED_HOST = "9c2e41d07b5a3f16e8d40c7b2a91f5e3"


def scenario_eviction_then_faulty_host() -> Scenario:
    ctx = Context(
        project="meridian-ai",
        location="us-south1",
        zone="us-south1-a",
        cluster="h100-res-uss1",
        namespace="foundation",
        workload="dense-30b-pretrain",
        issue_time="2026-02-25T17:50:00Z",
    )
    sc = Scenario(
        "eviction-then-failing-host",
        "Precedence: an eviction on a node that later fails twice for a host error. A3 High "
        "JobSet (1 x 4 pods) on a reserved block. At T-25.2m node ...-q3v6 runs low on "
        "memory (a log agent's buffer) and the kubelet evicts pod 1 (Evicted, "
        f"MemoryPressure); the JobSet restarts. Then the same node's host {EVICTED_HOST} "
        "fails at T-12.3m and T+6.2m (Xid 79, kernel panic, hostError, TerminationEvent, "
        "NodeNotReady), each followed by a restart (4 -> 7). An infrastructure cause wins "
        "whatever the order: faulty_host.",
        ctx,
        {},
    )
    nodes = sc.add_pool(
        "a3-res",
        "a3-highgpu-8g",
        4,
        suffixes=["a8m1", "q3v6", "r5d2", "y7k4"],
        hosts=True,
        host_ids={1: EVICTED_HOST},
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )
    bad = nodes[1]
    sc.expect = expect(
        "faulty_host", "isolate_host", [{"host": EVICTED_HOST, "nodes": [bad.name], "failures": 2}]
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="trainer",
        image="us-south1-docker.pkg.dev/meridian-ai/pretrain/dense-trainer:0.19.3",
        resources={"cpu": "96", "memory": "1200Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )
    evict_m = -25.2
    ep1, ep2 = -12.3, 6.2
    sc.host_failure(
        bad,
        ep1,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:97:00): 79, pid='<unknown>', "
                "name=<unknown>, GPU has fallen off the bus.",
            ),
            ("kernel", "Kernel panic - not syncing: Fatal exception in interrupt"),
        ],
    )
    back1 = max(bad.not_ready) + 1
    sc.host_failure(
        bad,
        ep2,
        [
            (
                "kernel",
                "NVRM: Xid (PCI:0000:c6:00): 79, pid='<unknown>', "
                "name=<unknown>, GPU has fallen off the bus.",
            ),
            ("kernel", "Kernel panic - not syncing: Fatal machine check"),
        ],
    )
    back2 = max(bad.not_ready) + 1
    restarts = [-24, -10, 9]
    sc.add_jobset(spec, 4, restarts)
    sc.attempt(spec, 4, -700, restarts[0], nodes, failed_at={1: -25})
    sc.attempt(spec, 5, restarts[0], restarts[1], nodes, failed_at={1: math.ceil(ep1)})
    sc.attempt(
        spec,
        6,
        restarts[1],
        restarts[2],
        nodes,
        running_from={1: back1},
        failed_at={1: math.ceil(ep2)},
    )
    sc.attempt(spec, 7, restarts[2], None, nodes, running_from={1: back2})
    node_pressure_events(sc, bad, evict_m - 0.4, "MemoryPressure", evict_m + 2.6)
    pod = sc.pod(spec, 4, 1)
    evicted(sc, pod, evict_m, "memory", 1_258_291_200, "1200Gi", "91244Ki")
    add_reason(sc, "kube_pod_status_reason", pod, "Evicted", lambda m: m >= -25)
    for k, r in enumerate(restarts):
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {5 + k}")
    sc.training_noise(spec, "megatron")
    sc.kubelet_noise()
    return sc


# --- accelerator faults: NVIDIA Xids, CUDA errors, GPU and TPU memory -----------------------
#
# Every failure line below is a wording of the signature catalog
# (shared/loopbreaker/signals/catalog/*.toml); the comment beside it names the source of the
# catalog example it copies. Only the variable parts (PCI address, pid, sizes, times) differ.

#: PCI bus of the eight H100s of an a3-highgpu-8g VM, as nvidia-smi lists them (0000:BB:00.0).
A3_GPU_BUS = ("04", "05", "0a", "0b", "84", "85", "8a", "8b")
#: The GPU driver of these nodes (GKE's default driver for 1.32; 535 prints pid= and name=).
GPU_DRIVER = "535.183.01"
TORCHRUN = "/usr/bin/python3"
ELASTIC_MP_API = "torch/distributed/elastic/multiprocessing/api.py"
ELASTIC_AGENT_API = "torch/distributed/elastic/agent/server/api.py"


def kernel_at(sc: Scenario, node: Node, at_ns: int, message: str) -> dict[str, Any]:
    """A kernel line of the node journal at an exact time (``Scenario.kernel_line`` derives
    its own time from the minute; a driver's burst needs its lines in order)."""
    up = max(at_ns - node.boot_ns, NS)
    body = f"kernel: [{up // NS:>5d}.{(up % NS) // 1000:06d}] {message}"
    return sc.node_log(node, at_ns, f"{syslog_stamp(at_ns)} {node.name} {body}")


def gpu_uuid(node: Node, gpu: int) -> str:
    return "GPU-" + rand_uuid("gpu-uuid", node.name, gpu)


def xid_burst(
    sc: Scenario,
    node: Node,
    at_ns: int,
    lines: list[tuple[int, str]],
    *,
    first_since_boot: bool,
) -> int:
    """Xid lines of one node starting at ``at_ns``: [(gpu, message after 'NVRM: ')].

    Before a GPU's first Xid since the driver loaded, the driver names it once
    (kernel_rc.c _krcLogUuidOnce): 'NVRM: GPU at PCI:...: GPU-<uuid>' and its board serial.
    Returns the time of the last line.
    """
    at = at_ns
    named: set[int] = set()
    for gpu, message in lines:
        bus = A3_GPU_BUS[gpu]
        if first_since_boot and gpu not in named:
            named.add(gpu)
            # nvidia.toml quiet (source: https://github.com/akash-network/support/issues/244)
            kernel_at(sc, node, at, f"NVRM: GPU at PCI:0000:{bus}:00: {gpu_uuid(node, gpu)}")
            at += rand_int(8_000, 40_000, "uuid-lag", node.name, gpu, at)
            # nvidia.toml quiet (source: https://github.com/akash-network/support/issues/244)
            kernel_at(
                sc,
                node,
                at,
                "NVRM: GPU Board Serial Number: "
                f"{rand_int(1_650_000_000_000, 1_659_999_999_999, 'serial', node.name, gpu)}",
            )
            at += rand_int(8_000, 40_000, "serial-lag", node.name, gpu, at)
        kernel_at(sc, node, at, f"NVRM: Xid (PCI:0000:{bus}:00): {message}")
        at += rand_int(20_000, 900_000, "xid-lag", node.name, gpu, at)
    return at


def driver_loaded(sc: Scenario, node: Node) -> None:
    """The driver's banner when the node boots again (after an outage)."""
    at = node.boot_ns + rand_int(14 * NS, 19 * NS, "nvload", node.name, node.boot_ns)
    # nvidia.toml quiet (source: https://github.com/akash-network/support/issues/244)
    kernel_at(
        sc,
        node,
        at,
        f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {GPU_DRIVER}  Sun May 12 19:39:15 UTC "
        "2024",
    )


def elastic_prefix(level: str, ns: int, pid: int, where: str) -> str:
    """torch.distributed.elastic's log prefix from PyTorch 2.4 on (milliseconds, then 000)."""
    d = dt(ns)
    return f"{level}{d:%m%d} {d:%H:%M:%S}.{(ns % NS) // 1_000_000:03d}000 {pid} {where}]"


def torchrun_startup(sc: Scenario, pod: AnyPod, m: float, agent_pid: int) -> None:
    """torchrun's agent forming its worker group (one pod, stderr as Python logging writes)."""
    at = sc.ctx.at(m, "torchrun-start", pod.name)
    lines = [
        # pytorch.toml quiet (source: https://github.com/pytorch/pytorch/issues/147064)
        f"{elastic_prefix('I', at, agent_pid, ELASTIC_AGENT_API + ':677')} [default] "
        "Rendezvous'ing worker group",
        # pytorch.toml quiet (source: pytorch/pytorch v2.4.0
        # torch/distributed/elastic/agent/server/api.py)
        f"{elastic_prefix('I', at + 2_300_000_000, agent_pid, ELASTIC_AGENT_API + ':525')} "
        "[default] Rendezvous complete for workers. Result:",
    ]
    for i, text in enumerate(lines):
        sc.container_log(pod, m, text, stderr=True, at_ns=at + i * 2_300_000_000)


def torchrun_failure(
    sc: Scenario,
    pod: AnyPod,
    at_ns: int,
    *,
    agent_pid: int,
    local_rank: int,
    pid: int,
    exitcode: int,
    others: list[int],
) -> int:
    """What torchrun prints when a local worker fails: the other workers are sent SIGTERM,
    the failure, then ChildFailedError's report. ``others`` = pids of the other workers.
    Returns the time of the last line."""
    api = ELASTIC_MP_API
    lines: list[tuple[int, str]] = []
    t = at_ns
    for other in others:
        t += rand_int(300_000, 2_000_000, "sigterm", pod.name, other, at_ns)
        # pytorch.toml quiet (source: https://github.com/hpcaitech/ColossalAI/issues/3514)
        lines.append(
            (
                t,
                f"{elastic_prefix('W', t, agent_pid, api + ':897')} Sending process {other} "
                "closing signal SIGTERM",
            )
        )
    t += rand_int(1_200_000_000, 2_600_000_000, "fail-line", pod.name, at_ns)
    # pytorch.toml pytorch.elastic_worker_failed
    # (source: https://github.com/pytorch/pytorch/issues/147064)
    lines.append(
        (
            t,
            f"{elastic_prefix('E', t, agent_pid, api + ':869')} failed (exitcode: {exitcode}) "
            f"local_rank: {local_rank} (pid: {pid}) of binary: {TORCHRUN}",
        )
    )
    t += rand_int(200_000_000, 400_000_000, "cfe", pod.name, at_ns)
    # pytorch.toml pytorch.child_failed_error (source: https://github.com/meta-llama/llama/issues/706)
    lines.append((t, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"))
    # pytorch.toml pytorch.elastic_root_cause
    # (source: https://github.com/open-mmlab/mmsegmentation/issues/3106)
    lines.append((t + 400_000, "Root Cause (first observed failure):"))
    # pytorch.toml pytorch.elastic_root_cause (source: https://github.com/pytorch/pytorch/issues/121209;
    # the -6 form: https://github.com/open-mmlab/mmsegmentation/issues/3106)
    lines.append((t + 800_000, f"  exitcode  : {exitcode} (pid: {pid})"))
    # pytorch.toml quiet (source: https://github.com/open-mmlab/mmsegmentation/issues/3106)
    lines.append((t + 900_000, "  error_file: <N/A>"))
    if exitcode < 0:
        signal = {-6: "SIGABRT", -9: "SIGKILL", -11: "SIGSEGV"}[exitcode]
        # pytorch.toml pytorch.elastic_root_cause
        # (source: https://github.com/open-compass/VLMEvalKit/issues/1131)
        lines.append(
            (t + 1_000_000, f"  traceback : Signal {-exitcode} ({signal}) received by PID {pid}")
        )
    else:
        # pytorch.toml quiet (source: https://github.com/pytorch/pytorch/issues/121209)
        lines.append(
            (
                t + 1_000_000,
                "  traceback : To enable traceback see: "
                "https://pytorch.org/docs/stable/elastic/errors.html",
            )
        )
    for at, text in lines:
        sc.container_log(pod, dt_minutes(sc, at), text, stderr=True, at_ns=at)
    return lines[-1][0]


def torchrun_stopped(sc: Scenario, pod: AnyPod, m: float, agent_pid: int, worker_pid: int) -> None:
    """A pod the controller stops (SIGTERM to the container): its torchrun shuts down."""
    at = sc.ctx.at(m, "death", pod.name)
    # pytorch.toml quiet (source: pytorch/pytorch v2.9.0
    # torch/distributed/elastic/agent/server/api.py)
    sc.container_log(
        pod,
        m,
        f"{elastic_prefix('W', at, agent_pid, ELASTIC_AGENT_API + ':725')} Received 15 death "
        "signal, shutting down workers",
        stderr=True,
        at_ns=at,
    )
    t = at + rand_int(400_000, 2_000_000, "death-term", pod.name)
    # pytorch.toml quiet (source: https://github.com/hpcaitech/ColossalAI/issues/3514)
    sc.container_log(
        pod,
        m,
        f"{elastic_prefix('W', t, agent_pid, ELASTIC_MP_API + ':897')} Sending process "
        f"{worker_pid} closing signal SIGTERM",
        stderr=True,
        at_ns=t,
    )


def torch_size(gib: float) -> str:
    """A size as PyTorch's allocator prints it (c10 format_size: MiB below 1 GiB)."""
    if gib < 1:
        return f"{gib * 1024:.2f} MiB"
    return f"{gib:.2f} GiB"


def dt_minutes(sc: Scenario, at_ns: int) -> float:
    """Minutes from the issue time (only used to key a log line whose time is pinned)."""
    return (at_ns - sc.ctx.t_ns) / (60 * NS)


def worker_pids(pod: AnyPod, base_key: object = "") -> tuple[int, list[int]]:
    """(torchrun agent pid, the 8 local workers' pids) inside the container."""
    agent = rand_int(7, 40, "agent-pid", pod.name, base_key)
    first = rand_int(180, 420, "worker-pid", pod.name, base_key)
    return agent, [first + i for i in range(8)]


def cuda_error_lines(sc: Scenario, pod: AnyPod, at_ns: int, rank: int, error: str) -> int:
    """A rank's CUDA error and the hints PyTorch appends (c10/cuda/CUDAMiscFunctions.cpp);
    the excepthook PyTorch 2.3+ installs prefixes every line with '[rankN]: '."""
    lines = [
        f"[rank{rank}]: RuntimeError: CUDA error: {error}",
        # nvidia.toml quiet (source: https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194)
        f"[rank{rank}]: CUDA kernel errors might be asynchronously reported at some other API "
        "call, so the stacktrace below might be incorrect.",
        # nvidia.toml quiet (source: https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194)
        f"[rank{rank}]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
        # nvidia.toml quiet (source: https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194)
        f"[rank{rank}]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    ]
    t = at_ns
    for i, text in enumerate(lines):
        sc.container_log(pod, dt_minutes(sc, t), text, stderr=True, at_ns=t)
        t += rand_int(30_000, 300_000, "cuda-hint", pod.name, rank, i, at_ns)
    return t


def a3_pool(
    sc: Scenario,
    count: int,
    *,
    pool: str = "a3-pool",
    suffixes: list[str] | None = None,
    host_ids: dict[int, str] | None = None,
) -> list[Node]:
    """A3 High nodes on a reserved block (gce-topology-* labels), 8 x H100 80GB each."""
    return sc.add_pool(
        pool,
        "a3-highgpu-8g",
        count,
        suffixes=suffixes,
        hosts=True,
        host_ids=host_ids,
        labels=gpu_labels("nvidia-h100-80gb"),
        capacity=gpu_capacity(208, 1919216020),
        taints=GPU_TAINT,
    )


def a3_jobset(ctx: Context, image: str, container: str = "pytorch") -> JobSetSpec:
    return JobSetSpec(
        name=ctx.workload,
        rjob="workers",
        replicas=1,
        parallelism=4,
        container=container,
        image=image,
        resources={"cpu": "200", "memory": "1700Gi", "nvidia.com/gpu": "8"},
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=GPU_TOLERATION,
    )


def gpu_host_outage(sc: Scenario, node: Node, m0: float, unknown: int = 3) -> None:
    """The node stops posting status after its GPU fault (Ready Unknown, then False, then
    True again), with the node controller's NodeNotReady and the driver loading on boot."""
    down = math.ceil(m0 + 0.1)
    sc.outage(node, down, unknown, 1)
    sc.event_node(node, m0 + 0.62, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady")
    driver_loaded(sc, node)


def scenario_gpu_xid_application() -> Scenario:
    ctx = Context(
        project="corvid-ml-research",
        location="us-east5",
        zone="us-east5-a",
        cluster="a3-kernels-use5",
        namespace="moe",
        workload="moe-16b-fp8",
        issue_time="2026-03-24T19:40:00Z",
    )
    sc = Scenario(
        "gpu-xid-application-every-rank",
        "A3 High JobSet (1 x 4 pods, 8 H100 each, 32 ranks, reserved block) training a MoE "
        "model with a custom FP8 token-dispatch kernel. At T-9.4m and again at T+2.6m (two "
        "attempts, 12 minutes apart) the kernel reads out of bounds on every rank: in the same "
        "second all 4 nodes log an application-class Xid on each GPU (Xid 31 MMU fault; Xid 13 "
        "Graphics SM Warp Exception on two GPUs of nodes 1 and 3), every rank raises CUDA "
        "error: an illegal memory access was encountered, and each pod's torchrun reports "
        "failed (exitcode: 1) and ChildFailedError. The JobSet restarts (2 -> 4). Nodes stay "
        "Ready throughout: one fault of the job on every rank, not four hosts failing.",
        ctx,
        expect("application", "inspect_application"),
    )
    nodes = a3_pool(sc, 4)
    spec = a3_jobset(ctx, "us-east5-docker.pkg.dev/corvid-ml-research/moe/moe-trainer:0.7.3-cu126")
    fails = [-9.4, 2.6]
    restarts = [math.ceil(f) + 1 for f in fails]
    sc.add_jobset(spec, 2, restarts)
    starts = [-400, *restarts]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = {g: math.ceil(fails[k]) for g in range(4)} if end is not None else None
        sc.attempt(spec, 2 + k, start, end, nodes, failed_at=failed)
    sc.training_noise(spec, "megatron", every=3)
    for k, (m0, r) in enumerate(zip(fails, restarts, strict=True)):
        second = ctx.t_ns + math.floor(m0 * 60) * NS
        for i, node in enumerate(nodes):
            pod = sc.pod(spec, 2 + k, i)
            agent, pids = worker_pids(pod)
            host_pid = rand_int(40_000, 3_000_000, "host-pid", node.name, k)
            lines: list[tuple[int, str]] = []
            for gpu in range(8):
                if i in (1, 3) and gpu in (2, 5):
                    # nvidia.toml nvidia.xid, Xid 13 (source: https://github.com/leptonai/gpud/pull/46)
                    lines.append(
                        (
                            gpu,
                            "13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
                            f"(GPC {rand_int(0, 8, 'gpc', node.name, gpu, k)}, TPC "
                            f"{rand_int(0, 9, 'tpc', node.name, gpu, k)}, SM 0): Illegal "
                            "Instruction Parameter",
                        )
                    )
                    continue
                # nvidia.toml nvidia.xid, Xid 31 (source: https://github.com/akash-network/support/issues/244;
                # name=pt_main_thread as in that source's Xid 43 line)
                lines.append(
                    (
                        gpu,
                        f"31, pid={host_pid + gpu}, name=pt_main_thread, Ch 00000008, intr "
                        "00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_"
                        f"{rand_int(0, 16, 'gpcc', node.name, gpu, k)} faulted @ "
                        f"0x7f{rand_hex(2, 'va1', node.name, gpu, k)}_"
                        f"{rand_hex(8, 'va2', node.name, gpu, k)}. Fault is of type FAULT_PDE "
                        "ACCESS_TYPE_VIRT_READ",
                    )
                )
            start_at = second + rand_int(60_000_000, 400_000_000, "burst", node.name, k)
            xid_burst(sc, node, start_at, lines, first_since_boot=(k == 0))
            # Every rank's process sees the fault at its next synchronisation.
            t = second + NS + rand_int(0, 500_000_000, "sync", node.name, k)
            last = t
            for local in range(8):
                at = t + rand_int(1_000_000, 80_000_000, "rank-err", pod.name, local)
                # nvidia.toml nvidia.cuda_application_error
                # (source: https://github.com/VITA-Group/TEGNAS/issues/19)
                last = max(
                    last,
                    cuda_error_lines(
                        sc, pod, at, 8 * i + local, "an illegal memory access was encountered"
                    ),
                )
            torchrun_failure(
                sc,
                pod,
                last,
                agent_pid=agent,
                local_rank=0,
                pid=pids[0],
                exitcode=1,
                others=[],
            )
        jobset_event(sc, spec, r - 0.55, "Restarting", f"restarting jobset, attempt {3 + k}")
    sc.kubelet_noise()
    return sc


def kf_attempts(
    sc: Scenario,
    spec: KubeflowSpec,
    namespace: str,
    placement: dict[tuple[str, int], Node],
    starts: list[int],
    failed_at: Callable[[int, int], int],
    exit_code: int,
) -> None:
    """One incarnation of a Kubeflow job's pods per attempt, ``starts`` apart; every one
    but the last fails (at ``failed_at(attempt, its end)``) and the operator restarts it
    with ``exit_code``."""
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = {key: failed_at(k, end) for key in placement} if end is not None else None
        sc.kf_pods(
            spec,
            namespace,
            k,
            start,
            end,
            placement,
            failed_at=failed,
            created_m=start - 0.58 if k else None,
        )
        if end is not None:
            ours = [
                p for p in sc.pods if isinstance(p, KfPod) and p.spec is spec and p.incarnation == k
            ]
            sc.kf_restart(ours, end, exit_code)


def outage_back(m0: float, unknown: int = 3) -> int:
    """The first Ready minute after ``gpu_host_outage(…, m0, unknown)``."""
    return math.ceil(m0 + 0.1) + unknown + 1


def gpu_fault_episode(
    sc: Scenario,
    pod: Pod,
    m0: float,
    gpu: int,
    xids: list[str],
    *,
    error: str | None,
    exitcode: int,
    outage: bool,
    banner: bool = True,
) -> None:
    """One GPU of ``pod``'s node faults at T+m0: the driver's Xid lines, the rank on that
    GPU dies (its CUDA error, or an abort), torchrun reports it; the node may go NotReady."""
    ctx = sc.ctx
    node = pod.node
    assert node is not None
    second = ctx.t_ns + math.floor(m0 * 60) * NS
    start_at = second + rand_int(100_000_000, 600_000_000, "xid-at", node.name, m0)
    xid_burst(sc, node, start_at, [(gpu, x) for x in xids], first_since_boot=True)
    agent, pids = worker_pids(pod)
    rank = 8 * (pod.j * pod.spec.parallelism + pod.p) + gpu
    t = start_at + rand_int(300_000_000, 900_000_000, "app-sees", node.name, m0)
    if error is not None:
        last = cuda_error_lines(sc, pod, t, rank, error)
    else:
        # pytorch.toml pytorch.fatal_python_error (source: python/cpython v3.11.7
        # Modules/faulthandler.c)
        sc.container_log(pod, m0, "Fatal Python error: Aborted", stderr=True, at_ns=t)
        last = t
    torchrun_failure(
        sc,
        pod,
        last,
        agent_pid=agent,
        local_rank=gpu,
        pid=pids[gpu],
        exitcode=exitcode,
        others=[p for i, p in enumerate(pids) if i != gpu],
    )
    if outage:
        sc.outage(node, math.ceil(m0 + 0.1), 3, 1)
        sc.event_node(
            node, m0 + 0.62, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady"
        )
        if banner:
            driver_loaded(sc, node)


def stop_others(sc: Scenario, spec: JobSetSpec, attempt: int, failed: int, m: float) -> None:
    """The JobSet restart deletes the attempt's other pods: their torchrun shuts down."""
    for g in range(spec.size):
        if g == failed:
            continue
        pod = sc.pod(spec, attempt, g)
        agent, pids = worker_pids(pod)
        torchrun_stopped(sc, pod, m, agent, pids[0])


XID48_HOST = "d41c7e9a2b6f08e35a1c9d7f4e2b6a80"


def scenario_gpu_xid_hardware_twice() -> Scenario:
    ctx = Context(
        project="halcyon-genai",
        location="us-central1",
        zone="us-central1-a",
        cluster="a3-prod-usc1",
        namespace="training",
        workload="llama3-70b-cpt",
        issue_time="2026-07-08T11:25:00Z",
    )
    sc = Scenario(
        "gpu-xid-hardware-twice",
        "A3 High JobSet (1 x 4 pods, reserved block). GPU 6 (PCI 0000:8a:00) of node "
        f"...-k2w8 on physical host {XID48_HOST} reports an uncorrectable double-bit ECC error "
        "(Xid 48, then Xid 63 row remapping) at T-14.3m and again at T+0.7m, 15 minutes "
        "apart. Each time rank 30 dies with CUDA error: uncorrectable ECC error encountered, "
        "torchrun reports failed (exitcode: 1), the JobSet restarts (5 -> 7) and the node is "
        "reset (Ready Unknown for 3 samples, then False, NodeNotReady; the driver loads again "
        "on boot); the new pod waits for the node. There is no Compute Engine hostError or "
        "TerminationEvent: the Xid is the evidence. Two hardware faults of one host: "
        "faulty_host.",
        ctx,
        {},
    )
    nodes = a3_pool(sc, 4, suffixes=["f5n1", "p8c3", "r4t6", "k2w8"], host_ids={3: XID48_HOST})
    bad = nodes[3]
    sc.expect = expect(
        "faulty_host", "isolate_host", [{"host": XID48_HOST, "nodes": [bad.name], "failures": 2}]
    )
    spec = a3_jobset(ctx, "us-central1-docker.pkg.dev/halcyon-genai/llm/cpt-trainer:2026.06.30")
    eps = [-14.3, 0.7]
    restarts = [math.ceil(e) + 1 for e in eps]
    backs = [outage_back(e) for e in eps]
    sc.add_jobset(spec, 5, restarts)
    sc.attempt(spec, 5, -500, restarts[0], nodes, failed_at={3: math.ceil(eps[0])})
    sc.attempt(
        spec,
        6,
        restarts[0],
        restarts[1],
        nodes,
        running_from={3: backs[0] + 1},
        failed_at={3: math.ceil(eps[1])},
    )
    sc.attempt(spec, 7, restarts[1], None, nodes, running_from={3: backs[1] + 1})
    gpu = 6
    for k, m0 in enumerate(eps):
        phys = f"0x{rand_hex(9, 'phys', k)}"
        xids = [
            # nvidia.toml nvidia.xid, Xid 48 (source: https://github.com/NVIDIA/gpu-operator/issues/1146)
            "48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has "
            f"been detected on GPU in the framebuffer at physAddr {phys} partition "
            f"{rand_int(0, 8, 'part', k)}, subpartition {rand_int(0, 2, 'sub', k)}.",
            # nvidia.toml nvidia.xid, Xid 63 (source: https://github.com/stas00/ml-engineering/blob/7bc7c3054eb93c277a4755c597ae0864d77a63f1/compute/accelerator/nvidia/debug.md;
            # pid='<unknown>', name=<unknown> as the 535 driver prints them)
            "63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, "
            "reset gpu to activate.",
        ]
        gpu_fault_episode(
            sc,
            sc.pod(spec, 5 + k, 3),
            m0,
            gpu,
            xids,
            # nvidia.toml nvidia.cuda_uncorrectable_hardware_error
            # (source: https://github.com/vllm-project/vllm/issues/5222)
            error="uncorrectable ECC error encountered",
            exitcode=1,
            outage=True,
        )
        stop_others(sc, spec, 5 + k, 3, restarts[k] - 0.5)
        jobset_event(
            sc, spec, restarts[k] - 0.55, "Restarting", f"restarting jobset, attempt {6 + k}"
        )
    sc.training_noise(spec, "hf")
    sc.kubelet_noise()
    return sc


def scenario_gpu_xid_hardware_once() -> Scenario:
    ctx = Context(
        project="tidewater-ai",
        location="europe-west4",
        zone="europe-west4-b",
        cluster="a3-vision-euw4",
        namespace="vision",
        workload="vit-22b-pretrain",
        issue_time="2026-10-27T15:50:00Z",
    )
    sc = Scenario(
        "gpu-xid-hardware-once",
        "A3 High JobSet (1 x 4 pods, reserved block). At T-4.3m GPU 3 (PCI 0000:0b:00) of "
        "node 2 reports an uncontained memory error (Xid 95, 'Uncontained: LTC TAG ... RST: "
        "Yes'): rank 19 dies with CUDA error: uncorrectable ECC error encountered, torchrun "
        "reports failed (exitcode: 1), the JobSet restarts (3 -> 4) and the node is reset "
        "once (Ready Unknown for 3 samples, then False, NodeNotReady); the new pod waits "
        "for it. One hardware fault of one host inside the window: host_error, watch it.",
        ctx,
        {},
    )
    nodes = a3_pool(sc, 4)
    bad = nodes[2]
    sc.expect = expect(
        "host_error", "watch_host", [{"host": bad.host, "nodes": [bad.name], "failures": 1}]
    )
    spec = a3_jobset(ctx, "europe-west4-docker.pkg.dev/tidewater-ai/vision/vit-trainer:3.2.0")
    m0 = -4.3
    restart = math.ceil(m0) + 1
    sc.add_jobset(spec, 3, [restart])
    sc.attempt(spec, 3, -600, restart, nodes, failed_at={2: math.ceil(m0)})
    sc.attempt(spec, 4, restart, None, nodes, running_from={2: outage_back(m0) + 1})
    gpu_fault_episode(
        sc,
        sc.pod(spec, 3, 2),
        m0,
        3,
        # nvidia.toml nvidia.xid, Xid 95 (source: NVIDIA/open-gpu-kernel-modules 570.86.15
        # src/nvidia/src/kernel/gpu/arch/ampere/kern_gpu_error_cont_ga100.c)
        [
            f"95, pid={rand_int(40_000, 900_000, 'x95pid')}, Uncontained: LTC TAG (0x2, 0x1). "
            "RST: Yes, D-RST: No"
        ],
        # nvidia.toml nvidia.cuda_uncorrectable_hardware_error
        # (source: https://github.com/vllm-project/vllm/issues/5222)
        error="uncorrectable ECC error encountered",
        exitcode=1,
        outage=True,
        banner=False,  # the 570 driver's banner is not in the catalog
    )
    stop_others(sc, spec, 3, 2, restart - 0.5)
    jobset_event(sc, spec, restart - 0.55, "Restarting", "restarting jobset, attempt 4")
    sc.training_noise(spec, "diffusion")
    sc.kubelet_noise()
    return sc


def scenario_gpu_xid79_stays_ready() -> Scenario:
    ctx = Context(
        project="lyra-foundation",
        location="us-east4",
        zone="us-east4-b",
        cluster="a3-sft-use4",
        namespace="sft",
        workload="qwen2-72b-sft",
        issue_time="2026-12-15T06:35:00Z",
    )
    sc = Scenario(
        "gpu-xid79-node-stays-ready",
        "A3 High JobSet (1 x 4 pods) on a 5-node reserved pool (one spare). At T-6.4m GPU 5 "
        "(PCI 0000:85:00) of node ...-h7q2 falls off the bus (Xid 79): rank 13 aborts (Fatal "
        "Python error: Aborted, torchrun failed (exitcode: -6), Signal 6 (SIGABRT)) and the "
        "JobSet restarts (1 -> 2); the new pod 1 runs on the spare node. The node itself "
        "never goes NotReady (node_status_condition Ready=True all along, no hostError, no "
        "TerminationEvent, no NodeNotReady); the device plugin reports 7 allocatable GPUs "
        "on it since. A hardware Xid is a host fault even on a Ready node: host_error.",
        ctx,
        {},
    )
    nodes = a3_pool(sc, 5, suffixes=["b3m9", "h7q2", "n2x5", "t6c1", "w8d4"])
    bad, spare = nodes[1], nodes[4]
    sc.expect = expect(
        "host_error", "watch_host", [{"host": bad.host, "nodes": [bad.name], "failures": 1}]
    )
    spec = a3_jobset(ctx, "us-east4-docker.pkg.dev/lyra-foundation/sft/sft-trainer:1.9.4")
    m0 = -6.4
    restart = math.ceil(m0) + 1
    sc.add_jobset(spec, 1, [restart])
    sc.attempt(spec, 1, -520, restart, nodes[:4], failed_at={1: math.ceil(m0)})
    sc.attempt(spec, 2, restart, None, [nodes[0], spare, nodes[2], nodes[3]])
    gpu_fault_episode(
        sc,
        sc.pod(spec, 1, 1),
        m0,
        5,
        # nvidia.toml nvidia.xid, Xid 79 (source: https://github.com/akash-network/support/issues/209)
        ["79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."],
        error=None,
        exitcode=-6,
        outage=False,
    )
    stop_others(sc, spec, 1, 1, restart - 0.5)
    jobset_event(sc, spec, restart - 0.55, "Restarting", "restarting jobset, attempt 2")

    def seven_gpus(item: dict[str, Any]) -> None:
        # nvidia-gpu-device-plugin marks the lost GPU unhealthy: allocatable drops to 7.
        item["status"]["allocatable"]["nvidia.com/gpu"] = "7"

    sc.node_hooks[bad.name] = seven_gpus
    sc.training_noise(spec, "megatron", every=3)
    sc.kubelet_noise()
    return sc


def scenario_gpu_cuda_oom() -> Scenario:
    ctx = Context(
        project="aster-llm",
        location="us-west4",
        zone="us-west4-a",
        cluster="a3-llm-usw4",
        namespace="finetune",
        workload="llama3-70b-lora",
        issue_time="2026-05-28T22:10:00Z",
        workload_kind="pytorchjob",
    )
    sc = Scenario(
        "gpu-cuda-out-of-memory",
        "Kubeflow PyTorchJob (Master + 3 Workers, one A3 High node and 8 H100 each, 32 ranks, "
        "restartPolicy ExitCode; the container runs torchrun under 'bash -c ... || exit 128' "
        "so that a failed run exits with a retryable code). Each attempt resumes from the "
        "same checkpoint and, 18 minutes of training later, reaches the same long-sequence "
        "batch: every rank dies of torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 3.91 GiB (the logits), each pod's torchrun reports failed (exitcode: 1) "
        "and ChildFailedError, all 4 pods exit 128 and the operator re-creates them "
        "(T-27.6m, T-6.6m, T+14.4m: 3 attempts; two PyTorchJobRestarting events, 1 Master "
        "and 3 Worker replica(s), and two counter steps per restart: "
        "training_operator_jobs_restarted_total{job_namespace=finetune,framework=pytorch} "
        "3 -> 9). Nodes stay Ready; no host is suspect.",
        ctx,
        expect("gpu_out_of_memory", "fix_gpu_memory"),
    )
    nodes = a3_pool(sc, 4)
    gpu_res = {"cpu": "200", "memory": "1700Gi", "nvidia.com/gpu": "8"}
    select = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    spec = KubeflowSpec(
        name=ctx.workload,
        api_kind="PyTorchJob",
        replicas={"Master": 1, "Worker": 3},
        image="us-west4-docker.pkg.dev/aster-llm/finetune/llama-sft:2.5.1-cu124",
        resources={"Master": gpu_res, "Worker": gpu_res},
        node_selector={"Master": select, "Worker": select},
        tolerations={"Master": GPU_TOLERATION, "Worker": GPU_TOLERATION},
        env=[
            {"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "1"},
        ],
        command=[
            "/bin/bash",
            "-c",
            "torchrun --nnodes=4 --nproc-per-node=8 --node-rank=$RANK "
            "--master-addr=$MASTER_ADDR --master-port=$MASTER_PORT /workspace/sft.py "
            "--config=/config/llama3-70b-lora.yaml || exit 128",
        ],
    )
    placement = {("Master", 0): nodes[0]}
    placement.update({("Worker", i): nodes[i + 1] for i in range(3)})
    fails = [-27.6, -6.6, 14.4]
    restarts = [math.ceil(f) + 1 for f in fails]
    starts = [-400, *restarts]
    kf_attempts(sc, spec, ctx.namespace, placement, starts, lambda k, end: math.ceil(fails[k]), 128)
    sc.operator_counter(ctx.namespace, "pytorch", 3, [r for r in restarts for _ in range(2)])

    # The Master's log: torchrun and NCCL start-up, HF Trainer steps every 3 minutes,
    # checkpoints every 200 steps (25 minutes, longer than an attempt lives): every attempt
    # resumes from checkpoint 61200 and meets the bad batch at step 61344, 18 minutes on.
    rate, save_every, bad_step, ckpt = 8, 200, 61_344, 61_200
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else LAST_MINUTE + 1
        run = start + 1
        pods = [sc.kf_pod(spec, rtype, i, k) for rtype, i in placement]
        master = pods[0]
        # step(m) = base_step + (m - base_m) * rate
        if k == 0:
            base_m, base_step = fails[0], bad_step
        else:
            base_m, base_step = start + 1.4, ckpt
        if run >= FIRST_MINUTE:
            for pod in pods:
                agent, _ = worker_pids(pod, k)
                torchrun_startup(sc, pod, run + 0.1, agent)
            t = ctx.at(run + 0.35, "pt-start", master.name, k)
            pid = rand_int(180, 420, "worker-pid", master.name, k)
            nccl_lines = [
                # nccl.toml quiet (source: NVIDIA/nccl v2.21.5-1 src/bootstrap.cc)
                f"{master.name}:{pid}:{pid} [0] NCCL INFO Bootstrap : Using eth0:{master.ip}<0>",
                # nccl.toml quiet (source: NVIDIA/nccl v2.20.5-1 src/init.cc; this image's 2.21.5)
                "NCCL version 2.21.5+cuda12.4",
                # nccl.toml quiet (source: NVIDIA/nccl v2.21.5-1 src/init.cc)
                f"{master.name}:{pid}:{pid + 41} [0] NCCL INFO ncclCommInitRank comm "
                f"0x55{rand_hex(10, 'comm', k)} rank 0 nranks 32 cudaDev 0 nvmlDev 0 busId "
                f"4000 commId 0x{rand_hex(16, 'commid', k)} - Init COMPLETE",
            ]
            for i, line in enumerate(nccl_lines):
                sc.container_log(master, run + 0.35, line, at_ns=t + i * 60_000_000)
        for m in range(max(run + 1, FIRST_MINUTE), min(end, LAST_MINUTE + 1)):
            if k < len(fails) and m >= math.floor(fails[k]):
                break
            if m + 0.5 < base_m and k > 0:
                continue
            step = base_step + int((m + 0.5 - base_m) * rate)
            prev = base_step + int((m - 0.5 - base_m) * rate)
            saved = (step // save_every) * save_every
            if prev < saved <= step and saved > (ckpt if k else 0):
                # pytorch.toml quiet (source: huggingface/transformers v4.40.0
                # src/transformers/trainer.py)
                sc.container_log(
                    master,
                    m + 0.8,
                    f"Saving model checkpoint to /ckpt/{spec.name}/checkpoint-{saved}",
                    key=("ckpt", k, m),
                )
            if (m - run) % 3 != 1:
                continue
            loss = 1.3 * math.exp(-step / 90_000) + 0.82 + rand_float(-0.02, 0.02, "ll", step)
            sc.container_log(
                master,
                m + 0.5,
                f"{{'loss': {loss:.4f}, 'grad_norm': {rand_float(0.2, 0.6, 'gn', step):.4f}, "
                f"'learning_rate': {rand_float(1.1e-5, 1.3e-5, 'lr', step):.4e}, "
                f"'epoch': {step / 98_000:.2f}}}",
                key=("train", k, m),
            )
        if k == len(fails):
            break
        # The long-sequence batch: every rank runs out of GPU memory within a second.
        m0 = fails[k]
        second = ctx.t_ns + math.floor(m0 * 60) * NS
        for g, pod in enumerate(pods):
            agent, pids = worker_pids(pod, k)
            last = second
            for local in range(8):
                at = second + rand_int(50_000_000, 950_000_000, "oom", pod.name, local, k)
                free = rand_float(0.9, 2.8, "free", pod.name, local, k)
                in_use = 79.11 - free
                reserved = rand_float(0.8, 2.9, "resv", pod.name, local, k)
                allocated = in_use - reserved - rand_float(1.1, 1.6, "ctx", pod.name, local, k)
                # pytorch.toml pytorch.cuda_oom_caching_allocator
                # (source: pytorch/pytorch v2.4.0 c10/cuda/CUDACachingAllocator.cpp)
                sc.container_log(
                    pod,
                    m0,
                    f"[rank{8 * g + local}]: torch.OutOfMemoryError: CUDA out of memory. Tried "
                    f"to allocate 3.91 GiB. GPU {local} has a total capacity of 79.11 GiB of "
                    f"which {torch_size(free)} is free. Process "
                    f"{rand_int(40_000, 900_000, 'nvml-pid', pod.name, local, k)} has "
                    f"{torch_size(in_use)} memory in use. Of the allocated memory "
                    f"{torch_size(allocated)} is allocated by PyTorch, and {torch_size(reserved)} "
                    "is reserved by "
                    "PyTorch but unallocated. If reserved but unallocated memory is large try "
                    "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                    "fragmentation.  See documentation for Memory Management  "
                    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
                    stderr=True,
                    at_ns=at,
                )
                last = max(last, at)
            torchrun_failure(
                sc,
                pod,
                last,
                agent_pid=agent,
                local_rank=0,
                pid=pids[0],
                exitcode=1,
                others=[],
            )
    sc.kubelet_noise()
    return sc


def scenario_tpu_hbm_oom() -> Scenario:
    ctx = Context(
        project="atlas-tpu-research",
        location="us-east5",
        zone="us-east5-a",
        cluster="v5p-train-use5",
        namespace="llm",
        workload="gemma2-27b-pretrain",
        issue_time="2026-09-09T08:45:00Z",
    )
    sc = Scenario(
        "tpu-hbm-out-of-memory",
        "TPU v5p slice (2x2x4, 4 hosts, reserved block) running a MaxText JobSet created at "
        "T-43m. Every attempt restores the last checkpoint, trains, and about 13 minutes in "
        "compiles the eval step for its first evaluation: on all 4 workers XLA fails with "
        "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
        "space hbm (Used 97.82G of 95.74G hbm), the workers exit and the JobSet restarts "
        "(0 -> 4 at T-27m, T-11m, T+5m, T+21m). Nodes stay Ready, no interruption: the "
        "program needs more HBM than the chip has.",
        ctx,
        expect("gpu_out_of_memory", "fix_gpu_memory"),
    )
    tpu = sc.add_pool(
        "v5p-pool",
        "ct5p-hightpu-4t",
        4,
        hosts=True,
        labels=tpu_labels("tpu-v5p-slice", "2x2x4"),
        capacity=tpu_capacity(208, 463475916),
        taints=TPU_TAINT,
    )
    spec = JobSetSpec(
        name=ctx.workload,
        rjob="slice",
        replicas=1,
        parallelism=4,
        container="maxtext",
        image="us-docker.pkg.dev/atlas-tpu-research/maxtext/maxtext-runner:2026-08-28",
        resources={"google.com/tpu": "4"},
        node_selector={
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
            "cloud.google.com/gke-tpu-topology": "2x2x4",
        },
        tolerations=TPU_TOLERATION,
    )
    starts = [-43, -27, -11, 5, 21]
    fails = [s + 14.4 for s in starts[:-1]]
    restarts = starts[1:]
    assert restarts == [math.ceil(f) + 1 for f in fails]
    sc.add_jobset(spec, 0, restarts)
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else None
        failed = {g: math.ceil(fails[k]) for g in range(4)} if end is not None else None
        group = sc.attempt(spec, k, start, end, tpu, failed_at=failed)
        coord = group[0]
        run = start + 1
        for pod in group:
            at = ctx.at(run + 0.1, "jaxdist", pod.name)
            tid = rand_int(900, 1100, "tid", pod.name)
            lines = []
            if pod.coordinator:
                # xla_tpu.toml quiet (source: jax-ml/jax jax-v0.4.30 jax/_src/distributed.py)
                lines.append("Starting JAX distributed service on [::]:8476")
            # xla_tpu.toml quiet (source: jax-ml/jax jax-v0.4.30 jax/_src/distributed.py)
            lines.append(f"Connecting to JAX distributed service on {coord.ip}:8476")
            for i, text in enumerate(lines):
                sc.container_log(pod, run + 0.1, text, at_ns=at + i * 3_000_000)
            t = at + rand_int(400_000_000, 1_900_000_000, "jaxconn", pod.name)
            # xla_tpu.toml quiet (source: ROCm/xla upstream-jax-v0.6.2
            # xla/pjrt/distributed/client.cc)
            sc.container_log(
                pod,
                run + 0.1,
                f"{glog_prefix('I', t, tid, 'client.cc:121')} Connected to distributed JAX "
                "controller",
                at_ns=t,
            )
        # MaxText's memory report after the parameters are placed (startup_lines prints
        # "Memstats: After params initialized:" at run + 0.29).
        t = ctx.at(run + 0.3, "memstats", coord.name)
        for chip, coords in enumerate(("0,0,0", "1,0,0", "0,1,0", "1,1,0")):
            used = rand_float(71.2, 71.6, "hbm-used", k, chip)
            # xla_tpu.toml quiet (source: AI-Hypercomputer/maxtext tpu-recipes-v0.1.5
            # src/MaxText/max_utils.py)
            sc.container_log(
                coord,
                run + 0.3,
                f"\tUsing (GB) {used:.2f} / 95.74 ({used / 95.74 * 100:.6f}%) on "
                f"TPU_{chip}(process=0,({coords},0))",
                at_ns=t + chip * 1_000_000,
            )
        if end is None:
            continue
        m0 = fails[k]
        second = ctx.t_ns + math.floor(m0 * 60) * NS
        for pod in group:
            # xla_tpu.toml xla_tpu.hbm_compile_oom (source: https://github.com/erfanzar/EasyDeL/issues/78)
            sc.container_log(
                pod,
                m0,
                "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile "
                "permanent error. Ran out of memory in memory space hbm. Used 97.82G of 95.74G "
                "hbm. Exceeded hbm capacity by 2.08G.",
                stderr=True,
                at_ns=second + rand_int(100_000_000, 2_900_000_000, "hbm", pod.name),
            )
        jobset_event(
            sc, spec, restarts[k] - 0.55, "Restarting", f"restarting jobset, attempt {k + 1}"
        )
    sc.training_noise(spec, "maxtext", checkpoint_every=10)
    sc.kubelet_noise()
    return sc


SCENARIOS: list[Callable[[], Scenario]] = [
    scenario_spot_preemption,
    scenario_faulty_host,
    scenario_single_node_failure,
    scenario_maintenance,
    scenario_capacity,
    scenario_nccl_hang,
    scenario_no_restarts,
    scenario_unknown,
    scenario_tfjob_faulty_host,
    scenario_pytorchjob_nccl_timeout,
    scenario_jobset_oom,
    scenario_tfjob_oom,
    scenario_jobset_priority_preemption,
    scenario_tfjob_priority_preemption,
    scenario_jobset_eviction,
    scenario_tfjob_eviction,
    scenario_jobset_image_pull,
    scenario_tfjob_image_pull,
    scenario_oom_then_nccl,
    scenario_spot_with_preempted_pods,
    scenario_eviction_then_faulty_host,
    scenario_gpu_xid_application,
    scenario_gpu_xid_hardware_twice,
    scenario_gpu_xid_hardware_once,
    scenario_gpu_cuda_oom,
    scenario_tpu_hbm_oom,
    scenario_gpu_xid79_stays_ready,
]


# --- golden signal fixtures -----------------------------------------------------------


def node_of(pod: AnyPod) -> str | None:
    return pod.node.name if pod.node else None


def build_signals() -> dict[str, dict[str, Any]]:
    ctx = Context(
        project="customer-ai-project-123",
        location="us-east5",
        zone="us-east5-a",
        cluster="tpu-cluster-prod",
        namespace="default",
        workload="llama3-70b-training",
        issue_time="2026-05-20T08:15:00Z",
    )
    sc = Scenario("signals", "", ctx, {})
    tpu = sc.add_pool(
        "tpu-pool",
        "ct5p-hightpu-4t",
        4,
        pool_hash="3f9a2b1c",
        suffixes=["m4p8", "r2d6", "x7k2", "w9c3"],
        hosts=True,
        host_ids={2: FAULTY_HOST},
    )
    node = tpu[2]
    tspec = JobSetSpec(
        name="llama3-70b-training",
        rjob="slice",
        replicas=2,
        parallelism=2,
        container="maxtext",
        image="us-docker.pkg.dev/x/maxtext:1",
        resources={"google.com/tpu": "4"},
        node_selector={},
        tolerations=[],
    )
    tpods = sc.attempt(tspec, 3, -30, None, tpu)
    gctx = Context(
        project="neox-research-7781",
        location="us-central1-a",
        zone="us-central1-a",
        cluster="a100-cluster",
        namespace="llm",
        workload="gpt-neox-pretrain",
        issue_time="2026-01-27T16:48:00Z",
    )
    gs = Scenario("signals-gpu", "", gctx, {})
    gnodes = gs.add_pool("a100-pool", "a2-ultragpu-8g", 4)
    gspec = JobSetSpec(
        name="gpt-neox-pretrain",
        rjob="workers",
        replicas=1,
        parallelism=4,
        container="pytorch",
        image="x",
        resources={"nvidia.com/gpu": "8"},
        node_selector={},
        tolerations=[],
        coordinator_label=True,
    )
    gpods = gs.attempt(gspec, 2, -30, None, gnodes)
    out: dict[str, dict[str, Any]] = {}

    def add(name: str, entry: dict[str, Any], **exp: Any) -> None:
        out[name] = {"entry": entry, "expect": exp}

    node_exp = {"node": node.name, "cluster": ctx.cluster}

    # --- interruptions
    add(
        "preemption_gke_nodepool",
        sc.pool_log(
            node,
            -3.1,
            f"PreemptionEvent: Node '{node.name}' in node pool 'tpu-pool' was preempted.",
        ),
        kind="preemption",
        node_pool="tpu-pool",
        **node_exp,
    )
    add(
        "preemption_gce_audit",
        sc.audit(node, -3.2, "compute.instances.preempted"),
        kind="preemption",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "maintenance_gke_nodepool",
        sc.pool_log(
            node,
            -2.9,
            f"MaintenanceEvent: Node '{node.name}' in node pool 'tpu-pool' is "
            "undergoing host maintenance.",
        ),
        kind="maintenance",
        node_pool="tpu-pool",
        **node_exp,
    )
    add(
        "maintenance_gce_migrate_on_host_maintenance",
        sc.audit(node, -2.8, "compute.instances.migrateOnHostMaintenance"),
        kind="maintenance",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "maintenance_gce_terminate_on_host_maintenance",
        sc.audit(node, -2.7, "compute.instances.terminateOnHostMaintenance"),
        kind="maintenance",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "termination_k8s_node_host_error",
        sc.termination_log(node, -2.5),
        kind="termination",
        reason="Host Error",
        **node_exp,
    )
    # --- host faults
    add(
        "host_error_gce_audit",
        sc.audit(node, -2.6, "compute.instances.hostError"),
        kind="host_error",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "automatic_restart_gce_audit",
        sc.audit(node, -1.2, "compute.instances.automaticRestart"),
        kind="automatic_restart",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "guest_terminate_gce_audit",
        sc.audit(node, -1.0, "compute.instances.guestTerminate"),
        kind="guest_terminate",
        instance=node.name,
        node=node.name,
        zone=ctx.zone,
    )
    add(
        "node_not_ready_event_node_controller",
        sc.event_node(node, -2.4, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady"),
        kind="node_not_ready",
        **node_exp,
    )
    add(
        "node_not_ready_event_kubelet",
        sc.event_node(
            node,
            -2.3,
            "NodeNotReady",
            f"Node {node.name} status is now: NodeNotReady",
            component="kubelet",
        ),
        kind="node_not_ready",
        **node_exp,
    )
    add(
        "kernel_panic_node_journal",
        sc.kernel_line(
            node, -2.7, "Kernel panic - not syncing: Fatal exception in interrupt", key="panic"
        ),
        kind="kernel_panic",
        **node_exp,
    )
    add(
        "kernel_bug_paging_request",
        sc.kernel_line(
            node,
            -2.75,
            "BUG: unable to handle kernel paging request at 0000000000002008",
            key="bug",
        ),
        kind="kernel_bug",
        **node_exp,
    )
    add(
        "hardware_failure_apei",
        sc.kernel_line(
            node,
            -2.76,
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
            key="apei",
        ),
        kind="hardware_failure",
        **node_exp,
    )
    at = ctx.at(-2.77, "npd-hw")
    add(
        "hardware_failure_npd_status",
        sc.node_log(
            node,
            at,
            f"{glog_prefix('I', at, 1893, 'log_monitor.go:159')} New status generated: "
            "&{Source:kernel-monitor Events:[{Severity:warn Timestamp:"
            f"{dt(at):%Y-%m-%d %H:%M:%S} +0000 UTC Reason:HardwareFailure Message:hardware "
            "failure detected on TPU chip 2 (PCIe link down)}] Conditions:[]}",
            log_id="node-problem-detector",
            severity="WARNING",
        ),
        kind="hardware_failure",
        **node_exp,
    )
    add(
        "node_problem_detector_exit",
        sc.kernel_line(
            node,
            -2.74,
            "node-problem-detector.service: Main process exited, code=exited, status=1/FAILURE",
            key="npd",
            ident="systemd[1]",
        ),
        kind="node_problem_detector_exit",
        **node_exp,
    )

    # --- workload faults
    coord, g1, g2 = gpods[0], gpods[1], gpods[2]

    def pod_exp(pod: Pod, cluster: str, workload: str) -> dict[str, Any]:
        return {
            "pod": pod.name,
            "workload": workload,
            "cluster": cluster,
            "coordinator": pod.coordinator,
            "node": pod.node.name if pod.node else None,
        }

    t = gctx.at(-1.0, "watchdog")
    add(
        "nccl_timeout_watchdog_coordinator",
        gs.container_log(
            coord,
            -1.0,
            f"{c10_prefix(0, 'E', t, 'ProcessGroupNCCL.cpp:629')} [Rank 0] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, "
            "NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran for 600081 "
            "milliseconds before timing out.",
            stderr=True,
        ),
        kind="nccl_timeout",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.9, "warn")
    add(
        "nccl_timeout_warn_collective_worker",
        gs.container_log(
            g1,
            -0.9,
            f"[rank8]:[{py_stamp(t)}] NCCL WARN: Collective collectiveName/1234567890abcde "
            "timeout after 1800 seconds",
            stderr=True,
        ),
        kind="nccl_timeout",
        **pod_exp(g1, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.95, "some")
    add(
        "nccl_timeout_some_operations_failed",
        gs.container_log(
            coord,
            -0.95,
            f"{c10_prefix(0, 'E', t, 'ProcessGroupNCCL.cpp:1709')} Some NCCL "
            "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
            "subsequent GPU operations might run on corrupted/incomplete data.",
            stderr=True,
        ),
        kind="nccl_timeout",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.8, "reset")
    add(
        "connection_reset_proxy_coordinator",
        gs.container_log(
            coord,
            -0.8,
            f"[rank0]:[{py_stamp(t)}] NCCL WARN : [Proxy Service] Failed to send, "
            "connection reset by peer",
            stderr=True,
        ),
        kind="connection_reset",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.7, "reset2")
    add(
        "connection_reset_non_coordinator_with_coordinator_label",
        gs.container_log(
            g2,
            -0.7,
            f"[rank16]:[{py_stamp(t)}] NCCL WARN NET/Socket : peer 10.8.1.14<43117> "
            "message truncated; recv() failed: connection reset by peer",
            stderr=True,
        ),
        kind="connection_reset",
        **pod_exp(g2, gctx.cluster, gctx.workload),
    )
    t = gctx.at(-0.6, "died")
    add(
        "worker_crash_child_process_died",
        gs.container_log(
            coord,
            -0.6,
            f"[rank0]:[{py_stamp(t)}] torch.distributed.elastic.multiprocessing.api: "
            "[ERROR] Child process 12345 died with exit code 1",
            stderr=True,
        ),
        kind="worker_crash",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    add(
        "worker_crash_child_failed_error",
        gs.container_log(
            g1,
            -0.5,
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            stderr=True,
        ),
        kind="worker_crash",
        **pod_exp(g1, gctx.cluster, gctx.workload),
    )
    # The NCCL error a DistBackendError carries names the failure more sharply: the
    # catalog reads it as nccl_error (pytorch.toml, nccl.toml).
    add(
        "nccl_error_in_dist_backend_error",
        gs.container_log(
            coord,
            -0.4,
            "torch.distributed.DistBackendError: NCCL error in: "
            "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with "
            "NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
            stderr=True,
        ),
        kind="nccl_error",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    # The uncaught exception as the C++ runtime reports it (pytorch.toml; a user's log:
    # https://github.com/arrival-ltd/catalyst-rl-tutorial/issues/15).
    add(
        "dist_backend_error",
        gs.container_log(
            coord,
            -0.35,
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            stderr=True,
        ),
        kind="dist_backend_error",
        **pod_exp(coord, gctx.cluster, gctx.workload),
    )
    # libtpu's wording (xla_tpu.toml: AI-Hypercomputer/maxtext 0a5e4e2c8
    # docs/guides/monitoring_and_debugging/megascale_hang_playbook.md).
    t = ctx.at(-0.3, "mega")
    add(
        "megascale_hang_detected",
        sc.container_log(
            tpods[0],
            -0.3,
            f"{glog_prefix('E', t, 3011, 'megascale_runtime.cc:412')} Megascale detects a hang "
            "that is likely caused by bad TPU chips on the following hosts. Please remove the "
            "hosts from the fleet and restart the workload. If problem persists please contact "
            "Megascale XLA team.",
            stderr=True,
        ),
        kind="megascale_hang",
        **pod_exp(tpods[0], ctx.cluster, ctx.workload),
    )

    # --- scheduling and controllers
    pending = sc.attempt(tspec, 4, 0, None, tpu, running_from={0: None}, unsched={0: (0, 30)})[0]
    add(
        "unschedulable_tpu",
        sc.event_pod(
            pending,
            0.2,
            "FailedScheduling",
            "0/8 nodes are available: 8 Insufficient google.com/tpu. preemption: 0/8 nodes are "
            "available: 8 No preemption victims found for incoming pod.",
            component="default-scheduler",
            etype="Warning",
        ),
        kind="unschedulable",
        pod=pending.name,
        cluster=ctx.cluster,
    )
    gpending = gs.attempt(gspec, 3, 0, None, gnodes, running_from={1: None}, unsched={1: (0, 30)})[
        1
    ]
    add(
        "unschedulable_gpu",
        gs.event_pod(
            gpending,
            0.3,
            "FailedScheduling",
            "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 4 "
            "Insufficient nvidia.com/gpu. preemption: 0/5 nodes are available: 1 Preemption is "
            "not helpful for scheduling, 4 No preemption victims found for incoming pod.",
            component="default-scheduler",
            etype="Warning",
            count=3,
            first_m=-4.0,
        ),
        kind="unschedulable",
        pod=gpending.name,
        cluster=gctx.cluster,
    )
    for kind, job, msg_kind in (
        ("PyTorchJob", "bert-large-ddp", "Worker"),
        ("TFJob", "resnet50-ps", "Worker"),
    ):
        at = gctx.at(-0.2, kind)
        payload = k8s_event_payload(
            involved={
                "apiVersion": "kubeflow.org/v1",
                "kind": kind,
                "name": job,
                "namespace": "kubeflow-jobs",
                "uid": rand_uuid(kind, job),
                "resourceVersion": "81723311",
            },
            reason=f"{kind}Restarting",
            message=f"{kind} kubeflow-jobs/{job} is restarting because 1 {msg_kind} "
            "replica(s) failed.",
            component=f"{kind.lower()}-controller",
            etype="Warning",
            first_ns=at,
            last_ns=at,
            count=1,
            namespace="kubeflow-jobs",
        )
        add(
            f"job_restarting_{kind.lower()}",
            gs.event(
                "k8s_cluster",
                {
                    "cluster_name": gctx.cluster,
                    "location": gctx.location,
                    "project_id": gctx.project,
                },
                -0.2,
                payload,
                "WARNING",
            ),
            kind="job_restarting",
            workload=job,
            cluster=gctx.cluster,
        )

    # --- the workload's pods stopped by Kubernetes itself
    victim = tpods[1]
    oom = kernel_oom(sc, victim, -0.21)
    uid_exp = {"node": node_of(victim), "cluster": ctx.cluster}
    add(
        "unrecognized_oom_killer_invoked",
        oom[0],
        kind="unrecognized",
        **uid_exp,
    )
    add(
        "oom_killed_kernel_memcg",
        oom[2],
        kind="oom_killed",
        pod_uid=victim.uid,
        reason="oom-kill",
        **uid_exp,
    )
    add("oom_killed_kernel_killed_process", oom[3], kind="oom_killed", pod_uid=None, **uid_exp)
    add(
        "oom_killed_npd_event",
        oom[4],
        kind="oom_killed",
        reason="OOMKilling",
        **uid_exp,
    )
    add(
        "oom_killed_audit_kubelet_patch",
        audit_oom_patch(sc, victim, -0.2, started_m=-30),
        kind="oom_killed",
        pod=victim.name,
        namespace=victim.namespace,
        container=victim.spec.container,
        pod_uid=victim.uid,
        workload=None,
        reason="OOMKilled",
        cluster=ctx.cluster,
    )
    add(
        "oom_killed_audit_gc_delete",
        audit_gc_delete(
            sc,
            victim,
            0.4,
            failed_status(sc, victim, -0.2, -30, reason="OOMKilled", code=137),
        ),
        kind="oom_killed",
        pod=victim.name,
        namespace=victim.namespace,
        container=victim.spec.container,
        pod_uid=victim.uid,
        workload=ctx.workload,
        workload_kind="jobset",
        coordinator=victim.coordinator,
        cluster=ctx.cluster,
    )
    add(
        "unrecognized_audit_kubelet_patch_exit_137",
        audit_entry_k8s(
            sc,
            -0.19,
            method="io.k8s.core.v1.pods.status.patch",
            resource=f"core/v1/namespaces/{tpods[2].namespace}/pods/{tpods[2].name}/status",
            principal=f"system:node:{node_of(tpods[2])}",
            agent=KUBELET_AGENT,
            caller_ip=tpods[2].node.ip if tpods[2].node else "",
            request={
                "@type": "k8s.io/Patch",
                "metadata": {"uid": tpods[2].uid},
                "status": {
                    "containerStatuses": [
                        terminated_status(
                            sc, tpods[2], -0.2, reason="Error", code=137, started_m=-30
                        )
                    ],
                    "phase": "Failed",
                },
            },
        ),
        kind="unrecognized",
        pod=tpods[2].name,
        cluster=ctx.cluster,
    )
    serving = PlainPod("ranker-7c9d6f5b8-xq2lp", "serving", victim.node, -2, None, "10.70.3.9")
    add(
        "priority_preempted_scheduler",
        preempted(sc, victim, -0.18, serving),
        kind="priority_preempted",
        pod=victim.name,
        namespace=victim.namespace,
        pod_uid=victim.uid,
        node=node_of(victim),
        related_pod=f"serving/{serving.name}",
        related_uid=serving.uid,
        cluster=ctx.cluster,
    )
    add(
        "evicted_memory_kubelet",
        evicted(sc, tpods[2], -0.17, "memory", 61_848_460, "32Gi", "90712Ki"),
        kind="evicted",
        pod=tpods[2].name,
        pod_uid=tpods[2].uid,
        node=node_of(tpods[2]),
        cluster=ctx.cluster,
    )
    for name, reason, message, etype in (
        (
            "eviction_threshold_met",
            "EvictionThresholdMet",
            "Attempting to reclaim memory",
            "Warning",
        ),
        (
            "insufficient_memory",
            "NodeHasInsufficientMemory",
            f"Node {node.name} status is now: NodeHasInsufficientMemory",
            "Normal",
        ),
        (
            "disk_pressure",
            "NodeHasDiskPressure",
            f"Node {node.name} status is now: NodeHasDiskPressure",
            "Normal",
        ),
    ):
        add(
            f"node_pressure_{name}",
            sc.event_node(node, -0.16, reason, message, component="kubelet", etype=etype),
            kind="node_pressure",
            reason=reason,
            **node_exp,
        )
    image = "us-docker.pkg.dev/customer-ai-project-123/maxtext/runner:2026-05-40"
    missing = (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )
    add(
        "image_pull_failed_not_found",
        pod_event_ex(
            sc,
            tpods[3],
            -0.15,
            "Failed",
            f'Failed to pull image "{image}": {missing}',
            component="kubelet",
            etype="Warning",
        ),
        kind="image_pull_failed",
        pod=tpods[3].name,
        node=node_of(tpods[3]),
        reason="NotFound",
        cluster=ctx.cluster,
    )
    private = "europe-west4-docker.pkg.dev/fjord-speech/private/conformer-worker:3.1.0"
    forbidden = (
        f'rpc error: code = Unknown desc = failed to pull and unpack image "{private}": failed '
        f'to resolve reference "{private}": failed to authorize: failed to fetch oauth token: '
        "unexpected status from GET request to https://europe-west4-docker.pkg.dev/v2/token?"
        "scope=repository%3Afjord-speech%2Fprivate%2Fconformer-worker%3Apull&service="
        "europe-west4-docker.pkg.dev: 403 Forbidden"
    )
    add(
        "image_pull_failed_forbidden",
        pod_event_ex(
            gs,
            gpods[1],
            -0.14,
            "Failed",
            f'Failed to pull image "{private}": {forbidden}',
            component="kubelet",
            etype="Warning",
        ),
        kind="image_pull_failed",
        pod=gpods[1].name,
        reason="403 Forbidden",
        cluster=gctx.cluster,
    )
    add(
        "image_pull_failed_back_off",
        pod_event_ex(
            sc,
            tpods[3],
            -0.13,
            "BackOff",
            f'Back-off pulling image "{image}"',
            component="kubelet",
            count=4,
            first_m=-2.0,
        ),
        kind="image_pull_failed",
        pod=tpods[3].name,
        reason="BackOff",
        cluster=ctx.cluster,
    )
    add(
        "unrecognized_back_off_restarting_container",
        pod_event_ex(
            sc,
            tpods[3],
            -0.12,
            "BackOff",
            f"Back-off restarting failed container maxtext in pod {tpods[3].name}_default"
            f"({tpods[3].uid})",
            component="kubelet",
            etype="Warning",
            count=3,
        ),
        kind="unrecognized",
        pod=tpods[3].name,
        cluster=ctx.cluster,
    )
    tf_job = KubeflowSpec(
        name="wide-deep-ctr",
        api_kind="TFJob",
        replicas={"Worker": 2},
        image="x",
        resources={"Worker": {"cpu": "8", "memory": "48Gi"}},
        node_selector={},
        tolerations={},
    )
    add(
        "unrecognized_exited_with_code_137",
        sc.event_job(
            tf_job,
            "ml-jobs",
            -0.11,
            "ExitedWithCode",
            "Pod: ml-jobs.wide-deep-ctr-worker-1 exited with code 137",
        ),
        kind="unrecognized",
        workload="wide-deep-ctr",
        cluster=ctx.cluster,
    )

    # --- unrecognized
    add(
        "unrecognized_training_step",
        sc.container_log(tpods[0], -5.0, train_line("maxtext", 41200, tpods[0], ctx)),
        kind="unrecognized",
        **pod_exp(tpods[0], ctx.cluster, ctx.workload),
    )
    add(
        "unrecognized_nccl_info",
        gs.container_log(
            g1, -6.0, f"{g1.name}:412:980 [0] NCCL INFO Bootstrap : Using eth0:10.8.1.14<0>"
        ),
        kind="unrecognized",
        **pod_exp(g1, gctx.cluster, gctx.workload),
    )
    sched_node = tpods[1].node.name if tpods[1].node else ""
    add(
        "unrecognized_scheduled_event",
        sc.event_pod(
            tpods[1],
            -30.0,
            "Scheduled",
            f"Successfully assigned default/{tpods[1].name} to {sched_node}",
            component="default-scheduler",
        ),
        kind="unrecognized",
        pod=tpods[1].name,
        cluster=ctx.cluster,
    )
    add(
        "unrecognized_kubelet_journal",
        sc.kubelet_journal(
            node,
            -4.0,
            '"Image garbage collection succeeded" freedBytes=0',
            "image_gc_manager.go:392",
        ),
        kind="unrecognized",
        **node_exp,
    )
    add(
        "unrecognized_node_ready_event",
        sc.event_node(
            node,
            -1.5,
            "NodeReady",
            f"Node {node.name} status is now: NodeReady",
            component="kubelet",
        ),
        kind="unrecognized",
        **node_exp,
    )
    return out


# --- main -----------------------------------------------------------------------------


def write_scenarios() -> None:
    for build in SCENARIOS:
        sc = build()
        sizes = sc.write(HERE)
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


if __name__ == "__main__":
    main()
