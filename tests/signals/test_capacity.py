"""Capacity as Compute and GKE's cluster autoscaler report it: what each entry names
(the zone, the machine type and accelerator, the cause), read off real-shaped entries."""

from __future__ import annotations

from typing import Any

from test_catalog import compute_error_entry, visibility_entry

from loopbreaker.model import SignalKind
from loopbreaker.signals import sink_filters
from loopbreaker.signals.classify import classify

# kubernetes/k8s.io#9834: the operation error's message of a stockout.
STOCKOUT = (
    "A n1-standard-4 VM instance with 1 nvidia-tesla-t4 accelerator(s) is currently "
    "unavailable in the us-central1-b zone. Consider trying your request in the "
    "us-central1-a, us-central1-f zone(s), which currently has capacity to accommodate "
    "your request. Alternatively, you can try your request again with a different VM "
    "hardware configuration or at a later time. For more information, see the "
    "troubleshooting documentation."
)


def test_a_stockout_names_its_machine_type_accelerator_and_zone() -> None:
    signal = classify(compute_error_entry("v1.compute.instances.insert", STOCKOUT))
    assert signal.kind is SignalKind.UNSCHEDULABLE
    assert (signal.reason, signal.machine_type, signal.accelerator, signal.zone) == (
        "stockout",
        "n1-standard-4",
        "1 nvidia-tesla-t4",
        "us-central1-b",
    )
    # The VM never existed: it is named as the instance, never as a node.
    assert signal.node is None
    assert signal.instance == "gke-a3-train-usc1-a3-pool-1a2b3c4d-q9z1"
    assert signal.signature == "compute_gke.audit_stockout"


def test_a_bare_stockout_code_takes_the_machine_type_from_the_request() -> None:
    entry = compute_error_entry("v1.compute.instances.insert", "ZONE_RESOURCE_POOL_EXHAUSTED")
    entry["protoPayload"]["request"] = {
        "@type": "type.googleapis.com/compute.instances.insert",
        "machineType": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/machineTypes/a3-highgpu-8g",
        "guestAccelerators": [
            {
                "acceleratorType": (
                    "projects/p/zones/us-central1-a/acceleratorTypes/nvidia-h100-80gb"
                ),
                "acceleratorCount": 8,
            }
        ],
    }
    signal = classify(entry)
    assert (signal.reason, signal.zone) == ("stockout", "us-central1-a")
    assert (signal.machine_type, signal.accelerator) == ("a3-highgpu-8g", "8 nvidia-h100-80gb")


def test_quota_is_not_a_stockout_and_an_ordinary_insert_error_is_nothing() -> None:
    quota = classify(
        compute_error_entry("v1.compute.instances.insert", "Quota 'N2_CPUS' exceeded.")
    )
    assert (quota.kind, quota.reason) == (SignalKind.UNSCHEDULABLE, "quota exceeded")
    other = compute_error_entry(
        "v1.compute.instances.insert", "Invalid value for field 'resource.name'"
    )
    assert classify(other).kind is SignalKind.UNRECOGNIZED
    assert not any(_hits(other))


def test_a_failed_scale_up_names_the_zone_and_pool_of_its_instance_group() -> None:
    signal = classify(visibility_entry("scale.up.error.out.of.resources"))
    assert signal.kind is SignalKind.UNSCHEDULABLE
    assert (signal.reason, signal.zone, signal.node_pool) == (
        "stockout",
        "us-central1-a",
        "a3-pool",
    )
    assert "gke-a3-train-usc1-a3-pool-1a2b3c4d-grp" in signal.excerpt
    assert signal.cluster == "a3-train-usc1"


def test_a_no_scale_up_names_the_pod_it_leaves_pending() -> None:
    signal = classify(visibility_entry("no.scale.up.mig.failing.predicate"))
    assert (signal.kind, signal.reason) == (SignalKind.UNSCHEDULABLE, "no fitting node pool")
    assert (signal.pod, signal.namespace, signal.zone) == (
        "llama-train-workers-0-3-abcde",
        "llm",
        "us-central1-a",
    )
    assert "Insufficient memory" in signal.excerpt


def test_the_strongest_message_of_an_entry_decides() -> None:
    entry = visibility_entry("scale.up.error.out.of.resources")
    results = entry["jsonPayload"]["resultInfo"]["results"]
    results.insert(0, {"eventId": "e0", "errorMsg": {"messageId": "scale.up.error.quota.exceeded"}})
    assert classify(entry).reason == "stockout"


def test_a_visibility_entry_with_no_error_is_quiet_and_not_exported() -> None:
    entry = visibility_entry("scale.up.error.out.of.resources")
    entry["jsonPayload"] = {"resultInfo": {"measureTime": "1", "results": [{"eventId": "e1"}]}}
    assert classify(entry).kind is SignalKind.UNRECOGNIZED
    assert not any(_hits(entry))


def _hits(entry: dict[str, Any]) -> list[str]:
    from fakeservers.lqleval import matches

    return [name for name, q in sink_filters.FILTERS.items() if matches(q, entry)]
