"""The signature catalog: every cited example is classified as its source means, through
the classifier and through the sink filters; the quiet lines stay quiet."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fakeservers.lqleval import matches
from hypothesis import given, settings
from hypothesis import strategies as st

from loopbreaker.model import SignalKind
from loopbreaker.signals import catalog, sink_filters
from loopbreaker.signals.catalog import CatalogError, Example, Quiet, Signature
from loopbreaker.signals.classify import classify

CATALOG = catalog.load()
PROJECT = "ml-prod-123"
CLUSTER = "a3-train-usc1"
NODE = "gke-a3-train-usc1-a3-pool-1a2b3c4d-x7k2"
POD = "llama-train-workers-0-3-abcde"
JOBSET_LABELS = {
    "k8s-pod/jobset_sigs_k8s_io/jobset-name": "llama-train",
    "k8s-pod/jobset_sigs_k8s_io/job-index": "0",
    "k8s-pod/batch_kubernetes_io/job-completion-index": "3",
    "compute.googleapis.com/resource_name": NODE,
}


def container_entry(text: str) -> dict[str, Any]:
    """A training container's stderr line as a GKE log sink exports it."""
    return {
        "insertId": "c1",
        "logName": f"projects/{PROJECT}/logs/stderr",
        "resource": {
            "type": "k8s_container",
            "labels": {
                "project_id": PROJECT,
                "cluster_name": CLUSTER,
                "location": "us-central1",
                "namespace_name": "llm",
                "pod_name": POD,
                "container_name": "trainer",
            },
        },
        "labels": JOBSET_LABELS,
        "severity": "ERROR",
        "textPayload": text,
        "timestamp": "2026-12-03T10:12:15.123456789Z",
    }


def node_entry(text: str) -> dict[str, Any]:
    """A node's journal line (kernel, systemd, node-problem-detector) as GKE exports it."""
    return {
        "insertId": "n1",
        "logName": f"projects/{PROJECT}/logs/node-journal",
        "resource": {
            "type": "k8s_node",
            "labels": {"project_id": PROJECT, "cluster_name": CLUSTER, "node_name": NODE},
        },
        "labels": {"compute.googleapis.com/resource_name": NODE},
        "severity": "ERROR",
        "textPayload": text,
        "timestamp": "2026-12-03T10:12:15.123456789Z",
    }


def event_entry(reason: str, message: str, obj: str) -> dict[str, Any]:
    """A v1 Event in the ``events`` log: k8s_node for a Node, k8s_pod for a Pod, else the
    cluster (JobSet and Kubeflow jobs)."""
    resource_type = {"Node": "k8s_node", "Pod": "k8s_pod"}.get(obj, "k8s_cluster")
    labels: dict[str, str] = {"project_id": PROJECT, "cluster_name": CLUSTER}
    involved: dict[str, str] = {"kind": obj, "name": NODE if obj == "Node" else POD}
    if obj == "Node":
        labels["node_name"] = NODE
    else:
        labels["namespace_name"] = "llm"
        involved["namespace"] = "llm"
        if obj == "Pod":
            labels["pod_name"] = POD
        else:
            involved["name"] = "llama-train"
    return {
        "insertId": "e1",
        "logName": f"projects/{PROJECT}/logs/events",
        "resource": {"type": resource_type, "labels": labels},
        "severity": "WARNING",
        "jsonPayload": {
            "apiVersion": "v1",
            "kind": "Event",
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": "kubelet", "host": NODE},
        },
        "timestamp": "2026-12-03T10:12:15Z",
    }


def compute_error_entry(method: str, message: str) -> dict[str, Any]:
    """The last Admin Activity entry of a managed instance group's VM insert that failed
    (gcpdiag's lint reads these: severity ERROR, the error in protoPayload.status)."""
    vm = "gke-a3-train-usc1-a3-pool-1a2b3c4d-q9z1"
    return {
        "insertId": "a3",
        "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Factivity",
        "resource": {
            "type": "gce_instance",
            "labels": {"project_id": PROJECT, "zone": "us-central1-a", "instance_id": "43"},
        },
        "severity": "ERROR",
        "operation": {"id": "operation-1", "producer": "compute.googleapis.com", "last": True},
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "status": {"code": 8, "message": message},
            "serviceName": "compute.googleapis.com",
            "methodName": method,
            "resourceName": f"projects/{PROJECT}/zones/us-central1-a/instances/{vm}",
            "requestMetadata": {"callerSuppliedUserAgent": "GCE Managed Instance Group for GKE"},
        },
        "timestamp": "2026-12-03T10:12:15.123456Z",
    }


VISIBILITY_LOG = "container.googleapis.com%2Fcluster-autoscaler-visibility"


def visibility_entry(message_id: str) -> dict[str, Any]:
    """A GKE cluster autoscaler visibility entry: an eventResult whose errorMsg names the
    failing instance group, or a noScaleUp whose rejected group says why (the shapes
    gcpdiag and KHI read)."""
    mig = "gke-a3-train-usc1-a3-pool-1a2b3c4d-grp"
    url = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/us-central1-a/instanceGroups/{mig}"
    if message_id.startswith("scale."):
        payload: dict[str, Any] = {
            "resultInfo": {
                "measureTime": "1582878896",
                "results": [
                    {
                        "eventId": "2fca91cd",
                        "errorMsg": {"messageId": message_id, "parameters": [url]},
                    }
                ],
            }
        }
    else:
        reason = {
            "messageId": message_id,
            "parameters": ["NodeResourcesFit", "Insufficient memory"],
        }
        payload = {
            "noDecisionStatus": {
                "measureTime": "1582523362",
                "noScaleUp": {
                    "unhandledPodGroups": [
                        {
                            "podGroup": {
                                "samplePod": {"name": POD, "namespace": "llm"},
                                "totalPodCount": 1,
                            },
                            "rejectedMigs": [
                                {
                                    "mig": {
                                        "name": mig,
                                        "nodepool": "a3-pool",
                                        "zone": "us-central1-a",
                                    },
                                    "reason": reason,
                                }
                            ],
                        }
                    ],
                    "unhandledPodGroupsTotalCount": 1,
                },
            }
        }
    return {
        "insertId": "v1",
        "logName": f"projects/{PROJECT}/logs/{VISIBILITY_LOG}",
        "resource": {
            "type": "k8s_cluster",
            "labels": {"project_id": PROJECT, "cluster_name": CLUSTER, "location": "us-central1"},
        },
        "severity": "DEFAULT",
        "jsonPayload": payload,
        "timestamp": "2026-12-03T10:12:15.123456Z",
    }


def audit_entry(method: str, message: str = "") -> dict[str, Any]:
    """A Compute Engine system event, Compute's error for a VM it could not create, or a
    Kubernetes audit entry of a pod's status (the kubelet's patch, with a container
    terminated OOMKilled)."""
    if message:
        return compute_error_entry(method, message)
    if method.startswith("compute."):
        return {
            "insertId": "a1",
            "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fsystem_event",
            "resource": {
                "type": "gce_instance",
                "labels": {"project_id": PROJECT, "zone": "us-central1-a", "instance_id": "42"},
            },
            "severity": "INFO",
            "protoPayload": {
                "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
                "methodName": method,
                "resourceName": f"projects/{PROJECT}/zones/us-central1-a/instances/{NODE}",
                "serviceName": "compute.googleapis.com",
            },
            "timestamp": "2026-12-03T10:12:15.123456Z",
        }
    status = {
        "containerStatuses": [
            {
                "name": "trainer",
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            }
        ]
    }
    return {
        "insertId": "a2",
        "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Factivity",
        "resource": {
            "type": "k8s_cluster",
            "labels": {"project_id": PROJECT, "cluster_name": CLUSTER},
        },
        "severity": "NOTICE",
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "methodName": method,
            "resourceName": f"core/v1/namespaces/llm/pods/{POD}/status",
            "serviceName": "k8s.io",
            "request": {"@type": "k8s.io/Patch", "status": status},
        },
        "timestamp": "2026-12-03T10:12:15.123456Z",
    }


def entries_of(sig: Signature, example: Example) -> list[dict[str, Any]]:
    if sig.on == "audit":
        return [audit_entry(example.method or sig.methods[0], example.text)]
    if sig.on == "autoscaler":
        return [visibility_entry(example.message_id or sig.message_ids[0])]
    if sig.on == "event":
        reason = example.reason or sig.reasons[0]
        return [event_entry(reason, example.text, example.object or sig.objects[0])]
    found = []
    if sig.applies_to(container=True):
        found.append(container_entry(example.text))
    if sig.applies_to(container=False) and sig.family == "scheduling":
        # The scheduler's wording outside a container is an Event's message (an Event
        # whose reason no signature names is read by its text).
        found.append(event_entry("FailedCreate", example.text, "Pod"))
    elif sig.applies_to(container=False):
        found.append(node_entry(example.text))
    return found


CASES = [
    pytest.param(sig, example, entry, id=f"{sig.id}-{n}-{entry['resource']['type']}")
    for sig in CATALOG.signatures
    for n, example in enumerate(sig.examples)
    for entry in entries_of(sig, example)
]


@pytest.mark.parametrize(("sig", "example", "entry"), CASES)
def test_every_example_is_classified_as_its_source_means(
    sig: Signature, example: Example, entry: dict[str, Any]
) -> None:
    signal = classify(entry)
    assert signal.kind is (example.kind or sig.kind), (sig.id, signal.excerpt)
    for word in example.reason_has:
        assert word in (signal.reason or ""), (sig.id, signal.reason)


@pytest.mark.parametrize(("sig", "example", "entry"), CASES)
def test_every_example_reaches_the_responder_through_its_sink_filter(
    sig: Signature, example: Example, entry: dict[str, Any]
) -> None:
    hits = [name for name, q in sink_filters.FILTERS.items() if matches(q, entry)]
    assert set(hits) & set(sink_filters.routes(sig)), (sig.id, hits)


def quiet_entries(q: Quiet) -> list[dict[str, Any]]:
    if q.on == "audit":
        return [audit_entry(q.method, q.text)]
    if q.on == "autoscaler":
        return [visibility_entry(q.message_id)]
    if q.on == "event":
        return [event_entry(q.reason, q.text, q.object or "Pod")]
    found = []
    if q.on in ("container", "any"):
        found.append(container_entry(q.text))
    if q.on in ("node", "any"):
        found.append(node_entry(q.text))
    return found


QUIET = [
    pytest.param(entry, id=f"{q.file}-{n}-{entry['resource']['type']}")
    for n, q in enumerate(CATALOG.quiet)
    for entry in quiet_entries(q)
]


@pytest.mark.parametrize("entry", QUIET)
def test_no_ordinary_line_becomes_a_signal(entry: dict[str, Any]) -> None:
    assert classify(entry).kind is SignalKind.UNRECOGNIZED


def test_every_source_family_has_quiet_lines_and_cited_examples() -> None:
    files = {s.file for s in CATALOG.signatures}
    assert files == set(catalog.FILES)
    assert {q.file for q in CATALOG.quiet} >= files - {"compute_gke"}
    for sig in CATALOG.signatures:
        for example in sig.examples:
            assert example.source.strip(), sig.id
            # a project file at a tag, an issue or a vendor page: never a bare word
            assert " " in example.source or example.source.startswith("https://"), sig.id


# What the field writes that loopbreaker missed before the catalog: each wording is an
# example of the kind its source means (issue 27's list).
FIELD_WORDINGS = [
    ("failed (exitcode: -9) local_rank:", SignalKind.WORKER_CRASH),
    ("Root Cause (first observed failure)", SignalKind.WORKER_CRASH),
    ("Segmentation fault", SignalKind.WORKER_CRASH),
    ("Fatal Python error", SignalKind.WORKER_CRASH),
    ("an illegal memory access was encountered", SignalKind.GPU_APPLICATION_ERROR),
    ("unspecified launch failure", SignalKind.GPU_APPLICATION_ERROR),
    ("Got completion from peer", SignalKind.NCCL_ERROR),
    ("Connection closed by remote peer", SignalKind.NCCL_ERROR),
    ("Failed to execute operation", SignalKind.NCCL_ERROR),
    ("Message truncated", SignalKind.NCCL_ERROR),
    ("ncclRemoteError", SignalKind.NCCL_ERROR),
    ("ncclInternalError", SignalKind.NCCL_ERROR),
    ("ncclUnhandledCudaError", SignalKind.NCCL_ERROR),
    ("PG GUID 0(default_pg) Rank", SignalKind.NCCL_TIMEOUT),
    ("Timeout at NCCL work", SignalKind.NCCL_TIMEOUT),
    ("Heartbeat monitor timed out", SignalKind.NCCL_TIMEOUT),
    ("we are taking the entire process down", SignalKind.NCCL_TIMEOUT),
    ("DistStoreError", SignalKind.COORDINATION_TIMEOUT),
    ("The client socket has timed out", SignalKind.COORDINATION_TIMEOUT),
    ("Connection closed by peer", SignalKind.CONNECTION_RESET),
    ("Barrier timed out", SignalKind.COORDINATION_TIMEOUT),
    ("DEADLINE_EXCEEDED", SignalKind.COORDINATION_TIMEOUT),
    ("CUDA out of memory", SignalKind.GPU_OUT_OF_MEMORY),
    ("Cuda failure", SignalKind.GPU_OUT_OF_MEMORY),
    ("RESOURCE_EXHAUSTED", SignalKind.GPU_OUT_OF_MEMORY),
    ("Oops:", SignalKind.KERNEL_BUG),
    ("general protection fault", SignalKind.KERNEL_BUG),
    ("System OOM encountered", SignalKind.OOM_KILLED),
    ("applying RestartJobSet failure policy action", SignalKind.JOB_RESTARTING),
    ("pod didn't trigger scale-up", SignalKind.UNSCHEDULABLE),
    ("NVRM: Xid", SignalKind.HARDWARE_FAILURE),
    ("NVRM: Xid", SignalKind.GPU_APPLICATION_ERROR),
    ("uncorrectable ECC error", SignalKind.HARDWARE_FAILURE),
    # issue 38, part 5: the transports, the library and the communicator
    ("NET/OFI Request", SignalKind.NCCL_ERROR),
    ("NET/OFI Couldn't open AV", SignalKind.NCCL_ERROR),
    ("NET/Socket : socket progress error", SignalKind.NCCL_ERROR),
    ("Transport endpoint is not connected", SignalKind.NCCL_ERROR),
    ("Transport endpoint is not connected", SignalKind.CONNECTION_RESET),
    ("libnccl.so.2: cannot open shared object file", SignalKind.NCCL_ERROR),
    ("NCCL version mismatch", SignalKind.NCCL_ERROR),
    ("NCCL communicator was aborted", SignalKind.DIST_BACKEND_ERROR),
    ("NCCL communicator was aborted", SignalKind.NCCL_TIMEOUT),
]


@pytest.mark.parametrize(("words", "kind"), FIELD_WORDINGS, ids=[w for w, _ in FIELD_WORDINGS])
def test_the_field_wordings_are_in_the_catalog_as_their_kind(words: str, kind: SignalKind) -> None:
    found = [
        (sig.id, e.text)
        for sig in CATALOG.signatures
        for e in sig.examples
        if words in e.text and (e.kind or sig.kind) is kind
    ]
    assert found, f"no example of {kind.value} says {words!r}"


# Lines that only restate a failure already stated (issue 38, part 5): each is a cited quiet
# line, so it never counts the failure a second time.
RESTATEMENTS = [
    "Timeout at collective:",  # the desync report
    "To our best knowledge, the lagging/dead/mismatched ranks",
    "FlightRecorder is disabled",  # the flight recorder's dump
    "First PG on this rank to signal dumping",
    "preparing to dump debug info",
    "TORCH_NCCL_TRACE_BUFFER_SIZE: 2000",  # ... and its "enabled" line
    "Exception raised from checkTimeout at",
    "Exception raised from ncclCommWatchdog at",
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "terminate called recursively",
    "is in abort state",
]


@pytest.mark.parametrize("words", RESTATEMENTS)
def test_the_restating_wordings_are_cited_quiet_lines(words: str) -> None:
    found = [q for q in CATALOG.quiet if words in q.text]
    assert found, f"no quiet line says {words!r}"
    for q in found:
        assert classify(quiet_entries(q)[0]).kind is SignalKind.UNRECOGNIZED, q.text


def test_the_tpu_runtime_and_scale_up_failures_are_recognised() -> None:
    kinds = {sig.kind for sig in CATALOG.signatures}
    assert SignalKind.TPU_RUNTIME_ERROR in kinds
    reasons = {r for sig in CATALOG.events() for r in sig.reasons}
    assert {"NotTriggerScaleUp", "FailedScaleUp", "SystemOOM"} <= reasons


# --- the schema refuses what it cannot check --------------------------------------------

GOOD = """
[[signature]]
id = "t.one"
kind = "nccl_error"
family = "workload_fault"
component = "NCCL"
versions = "2.21"
on = "container"
pattern = '''NCCL WARN Message truncated'''
  [[signature.examples]]
  text = "x:1:2 [3] NCCL WARN Message truncated : received 1024 bytes instead of 512"
  source = "NVIDIA/nccl v2.21.5-1 src/transport/net_ib.cc"
"""


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (('id = "t.one"', 'id = "other.one"'), "start with 't.'"),
        (('kind = "nccl_error"', 'kind = "nccl_boom"'), "not a signal kind"),
        (('family = "workload_fault"', 'family = "faults"'), "family 'faults'"),
        (('on = "container"', 'on = "pod"'), "on 'pod'"),
        (("NCCL WARN Message truncated'''", "\\d+ (?:a|b)'''"), "literal of 4+ characters"),
        (("NCCL WARN Message truncated'''", "NCCL WARN (?P<peer>x)'''"), "unknown named group"),
        (("NCCL WARN Message truncated'''", "NCCL WARN ('''"), "does not compile"),
        (("  source = ", "  origin = "), "unknown key(s) ['origin']"),
        (('versions = "2.21"\n', ""), "'versions' must be a non-empty string"),
    ],
)
def test_a_broken_catalog_file_is_refused_naming_the_problem(
    change: tuple[str, str], words: str
) -> None:
    text = GOOD.replace(*change)
    assert text != GOOD
    with pytest.raises(CatalogError, match=re.escape(words)):
        catalog.parse({"t": text})


def test_a_signature_without_an_example_is_refused() -> None:
    text = GOOD[: GOOD.index("  [[signature.examples]]")]
    with pytest.raises(CatalogError, match="at least one cited example"):
        catalog.parse({"t": text})


def test_a_good_file_parses_and_the_same_id_twice_is_refused() -> None:
    assert [s.id for s in catalog.parse({"t": GOOD}).signatures] == ["t.one"]
    with pytest.raises(CatalogError, match="appears twice"):
        catalog.parse({"t": GOOD + GOOD})


def test_the_checker_reports_an_example_its_pattern_misses(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.toml"
    path.write_text(GOOD.replace("received 1024", "got 1024").replace("Message truncated :", "Msg"))
    assert catalog.main([str(path)]) == 1
    assert "example does not match" in capsys.readouterr().err
    assert catalog.main([]) == 0  # the shipped catalog is clean


# --- literals: every match holds one ------------------------------------------------------

PATTERNS = [
    r"Watchdog caught collective operation timeout|NCCL WARN[^\n]*?\btime(?:d[ -]?)?out",
    r"(?:CUDA|cuda) out of memory\. Tried to allocate (?P<asked>[\d.]+ [KMGT]iB)",
    r"\bNVRM: Xid \(PCI:[0-9a-f:.]+\): (?P<xid>\d+)",
    r"(?i)kernel panic|machine check",
    r"(?:Segmentation fault|Fatal Python error)(?: \(core dumped\))?",
    r"\d+/\d+ nodes are available:[^\n]*Insufficient",
]
FRAGMENTS = [
    "Watchdog caught collective operation timeout",
    "NCCL WARN ",
    "timed out",
    "CUDA out of memory. Tried to allocate 2.00 GiB",
    "cuda",
    "NVRM: Xid (PCI:0000:3b:00): 79",
    "KERNEL PANIC",
    "Machine Check",
    "Segmentation fault (core dumped)",
    "Fatal Python error",
    "0/8 nodes are available: 8 Insufficient nvidia.com/gpu",
    " ",
    "x",
    "\n",
]
ALPHABET = st.sampled_from(FRAGMENTS)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(PATTERNS), st.lists(ALPHABET, max_size=6).map("".join))
def test_a_text_that_matches_holds_one_of_the_derived_literals(pattern: str, text: str) -> None:
    literals = catalog.required_literals(pattern)
    assert literals, pattern
    if re.search(pattern, text):
        assert any(lit in text.lower() for lit in literals), (pattern, text, literals)


def test_every_filter_fits_the_logging_limit() -> None:
    for name, text in sink_filters.FILTERS.items():
        assert len(text) <= sink_filters.MAX_FILTER_LENGTH, name


LEAD_PATTERNS = [
    *PATTERNS,
    # A group of alternatives first: each alternative's literal leads (the catalog's
    # hardware_error and host_error_text signatures open this way).
    r"(?i)(?:hardware (?:failure|error)|machine check)(?![^\n]*(?:\bcorrected\b|Pattern:))",
    r"\b(?:Host error|host_error|hosterror)\b",
    r"(?P<what>NCCL WARN|Watchdog) caught",
]
LEAD_ALPHABET = st.sampled_from(
    [
        *FRAGMENTS,
        "mce: [Hardware Error]: ",
        "hardware failure",
        "Machine Check Exception",
        " corrected",
        "Host error",
        "host_error",
        "NCCL WARN caught",
    ]
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.sampled_from(LEAD_PATTERNS), st.lists(LEAD_ALPHABET, max_size=6).map("".join))
def test_every_match_starts_where_a_lead_allows(pattern: str, text: str) -> None:
    """The classifier tries a pattern only at its leads: every match starts at most
    ``back`` characters before an occurrence of one of them."""
    leads = catalog.leading_literals(pattern)
    if not leads:
        return  # the classifier searches the whole line
    lowered = text.lower()
    for found in re.finditer(pattern, text):
        start = found.start()
        assert any(0 <= lowered.find(lit, start) - start <= back for lit, back in leads), (
            pattern,
            text,
            leads,
        )


def test_a_group_of_alternatives_leads_with_each_of_its_literals() -> None:
    leads = catalog.leading_literals(
        r"(?:hardware (?:failure|error)|machine check)(?![^\n]*Pattern:)", True
    )
    assert leads == (("hardware ", 0), ("machine check", 0))
    assert catalog.leading_literals(r"\b(?:Host error|hosterror)\b") == (
        ("host error", 0),
        ("hosterror", 0),
    )
    # One alternative with no literal of its own: no leads, the line is searched whole.
    assert catalog.leading_literals(r"(?:\d+ nodes|machine check) x") == ()
