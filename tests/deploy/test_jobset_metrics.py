"""The JobSet metrics for kube-prometheus-stack (deploy/prometheus/jobset-metrics) and the
dashboard on a kube-prometheus-stack Prometheus.

The config is evaluated the way kube-state-metrics v2.20.0 evaluates it
(pkg/customresourcestate/registry_factory.go: fullName, compilePath, compiledGauge.Values,
compiledInfo.Values, toFloat64) on JobSets shaped as JobSet v0.12.0 writes them
(api/jobset/v1alpha2/jobset_types.go), so the names and labels checked are computed from
the config, never typed in. The same series feed promtool and a real Prometheus.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from harness.fixtures import PrometheusFactory
from harness.prometheus import kustomize_build
from harness.tools import ensure_executable

from loopbreaker.diagnosis.selectors import RAW_SELECTORS
from loopbreaker.model import EvidenceKind

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
PACKAGE = PROMETHEUS / "jobset-metrics"
CONFIG = PACKAGE / "config.yaml"
VALUES = PACKAGE / "values.yaml"
RULE_TEST = PROMETHEUS / "tests" / "jobset_restarts_test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "loopbreaker-dashboard.json"
GUIDE = ROOT / "docs" / "prometheus.md"
SPEC_FILE_NAME = "loopbreaker-rules.spec.yaml"
ALERT = "LoopbreakerJobSetRestartLoop"
#: kube-state-metrics' reserved labels (customresourcestate-metrics.md, "Configuration").
GVK_LABELS = ("customresource_group", "customresource_version", "customresource_kind")
#: What kube-prometheus-stack's kube-state-metrics ServiceMonitor adds (honorLabels: the
#: exported namespace wins), release kube-prometheus-stack: charts/kube-state-metrics 8.4.0
#: templates/servicemonitor.yaml (jobLabel app.kubernetes.io/name) and service.yaml (port http).
KSM_TARGET = {
    "container": "kube-state-metrics",
    "endpoint": "http",
    "instance": "10.52.1.17:8080",
    "job": "kube-state-metrics",
    "pod": "kube-prometheus-stack-kube-state-metrics-6b7f9c8d5-x2x9q",
    "service": "kube-prometheus-stack-kube-state-metrics",
}


# --- kube-state-metrics' custom resource state, as v2.20.0 evaluates it ------------------


def _step(obj: Any, part: str) -> Any:
    """One path segment (compilePath): ``[key=value]`` list lookup, an index, a map key."""
    if part.startswith("[") and part.endswith("]"):
        key, _, value = part[1:-1].partition("=")
        if isinstance(obj, list):
            for item in obj:
                if isinstance(item, dict) and key in item and str(item[key]) == value:
                    return item
        return None
    if isinstance(obj, dict):
        return obj.get(part)
    if isinstance(obj, list):
        if not part.lstrip("-").isdigit():
            return None
        index = int(part)
        return obj[index] if -len(obj) <= index < len(obj) else None
    return None


def get(obj: Any, path: list[str]) -> Any:
    for part in path:
        if obj is None:
            return None
        obj = _step(obj, str(part))
    return obj


def to_float(value: Any) -> float:
    """toFloat64 for the types a JobSet status holds (numbers, booleans, condition status)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.lower() in {"true", "yes", "false", "no", "unknown"}:
        return 1.0 if value.lower() in {"true", "yes"} else 0.0
    raise ValueError(f"expected number but was {value!r}")


def _path_labels(obj: Any, paths: dict[str, list[str]]) -> dict[str, str]:
    labels = {}
    for name, path in paths.items():
        assert "*" not in name, "wildcard labels are not modelled"
        value = obj if path == [] else get(obj, path)
        if value is not None:
            labels[name] = str(value)
    return labels


Series = tuple[str, tuple[tuple[str, str], ...], float]


def ksm_series(config: dict[str, Any], obj: dict[str, Any]) -> list[Series]:
    """The series kube-state-metrics exports for ``obj`` under ``config``."""
    out: list[Series] = []
    for resource in config["spec"]["resources"]:
        gvk = resource["groupVersionKind"]
        api_version = f"{gvk['group']}/{gvk['version']}"
        if (obj["apiVersion"], obj["kind"]) != (api_version, gvk["kind"]):
            continue
        prefix = resource.get("metricNamePrefix", "kube_customresource")
        base = _path_labels(obj, resource.get("labelsFromPath", {}))
        base |= resource.get("commonLabels", {})
        for metric in resource["metrics"]:
            name = "_".join(p for p in (prefix, metric["name"]) if p)
            common = base | _path_labels(obj, metric.get("labelsFromPath", {}))
            common |= metric.get("commonLabels", {})
            each = metric["each"]
            kind = each["type"]
            spec = each[{"Gauge": "gauge", "Info": "info"}[kind]]
            unmodelled = set(spec) - {"path", "valueFrom", "labelsFromPath", "nilIsZero"}
            assert not unmodelled, (metric["name"], unmodelled)
            target = get(obj, spec.get("path", []))
            items = target if isinstance(target, list) else [target]
            for item in items:
                if item is None and not (kind == "Gauge" and spec.get("nilIsZero")):
                    continue
                if kind == "Gauge":
                    raw = get(item, spec.get("valueFrom", [])) if item is not None else None
                    if raw is None and not spec.get("nilIsZero"):
                        continue  # compiledGauge.value: unresolved, no series, no error
                    value = 0.0 if raw is None else to_float(raw)
                else:
                    value = 1.0
                labels = _path_labels(item, spec.get("labelsFromPath", {}))
                if kind == "Info" and not labels:
                    continue
                labels |= {k: v for k, v in common.items() if k not in labels}
                labels |= dict(
                    zip(GVK_LABELS, (gvk["group"], gvk["version"], gvk["kind"]), strict=True)
                )
                out.append((name, tuple(sorted(labels.items())), value))
    return out


def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    return loaded


def jobset(
    name: str,
    uid: str,
    restarts: int | None = 0,
    towards_max: int = 0,
    job_restarts: list[int] | None = None,
    conditions: list[dict[str, str]] | None = None,
    namespace: str = "ml",
    owner: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A JobSet as ``kubectl get jobset -o json`` shows it (v0.12.0 status; omitempty
    fields absent while zero or empty, as the controller's Go client writes them)."""
    status: dict[str, Any] = {}
    if restarts is not None:
        status["restarts"] = restarts
        if towards_max:
            status["restartsCountTowardsMax"] = towards_max
        replicated: dict[str, Any] = {
            "name": "workers",
            "ready": 2,
            "succeeded": 0,
            "failed": 0,
            "active": 2,
            "suspended": 0,
        }
        if job_restarts is not None:
            replicated["jobRestarts"] = job_restarts
        status["replicatedJobsStatus"] = [replicated]
        status["conditions"] = conditions or []
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "trainer.kubeflow.org/v1alpha1", **owner}]
    body: dict[str, Any] = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}
    body["metadata"] = metadata
    if status:
        body["status"] = status
    return body


def by_name(series: list[Series], name: str) -> list[dict[str, str]]:
    return [dict(labels) | {"__value__": str(value)} for n, labels, value in series if n == name]


def selector_parts(selector: str) -> tuple[str, set[str]]:
    """A selector's metric name and the labels it matches on, the cluster label left out."""
    name, _, matchers = selector.partition("{")
    labels = set(re.findall(r"(\w+)\s*=~?", matchers)) - {"cluster", "cluster_name"}
    return name, labels


# --- the package ---------------------------------------------------------------------


def test_the_kustomization_renders_the_rbac_kube_state_metrics_needs() -> None:
    resources = {r["kind"]: r for r in kustomize_build(PACKAGE)}
    assert set(resources) == {"ClusterRole", "ClusterRoleBinding"}
    rules = {
        (group, resource): set(rule["verbs"])
        for rule in resources["ClusterRole"]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    (gvk,) = {tuple(r["groupVersionKind"].values()) for r in config()["spec"]["resources"]}
    # The resource kube-state-metrics lists: the lower-case plural of the kind (GetResourceName).
    assert {"list", "watch"} <= rules[(gvk[0], gvk[2].lower() + "s")]
    assert {"list", "watch"} <= rules[("apiextensions.k8s.io", "customresourcedefinitions")]
    binding = resources["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == resources["ClusterRole"]["metadata"]["name"]
    # The chart's fullname for release kube-prometheus-stack in namespace monitoring.
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "kube-prometheus-stack-kube-state-metrics",
            "namespace": "monitoring",
        }
    ]


def test_the_values_snippet_embeds_the_config_and_grants_the_same_access() -> None:
    values = yaml.safe_load(VALUES.read_text())
    ksm = values["kube-state-metrics"]
    assert set(values) == {"kube-state-metrics"}
    assert ksm["customResourceState"]["enabled"] is True
    assert ksm["customResourceState"]["config"] == config()
    (rule,) = ksm["rbac"]["extraRules"]
    (group,) = {r["groupVersionKind"]["group"] for r in config()["spec"]["resources"]}
    assert rule == {"apiGroups": [group], "resources": ["jobsets"], "verbs": ["list", "watch"]}


def test_the_guide_documents_the_one_install_command() -> None:
    guide = GUIDE.read_text()
    command = (
        "helm upgrade kube-prometheus-stack prometheus-community/kube-prometheus-stack "
        "-n monitoring --reuse-values -f deploy/prometheus/jobset-metrics/values.yaml"
    )
    assert command in " ".join(guide.replace("\\\n", " ").split())
    assert "kubectl apply -k deploy/prometheus/jobset-metrics" in guide
    # No second copy of the config to drift from config.yaml.
    assert "groupVersionKind" not in guide and "labelsFromPath" not in guide


# --- what the config yields ----------------------------------------------------------

RUNNING = jobset(
    "llama-sft",
    "6f1c2a8e-1b7d-4c1e-9d2a-0c7b5e9f3a11",
    restarts=2,
    towards_max=1,
    job_restarts=[0, 3],
    conditions=[{"type": "RestartingJobSet", "status": "False", "reason": "Restarted"}],
    owner={"kind": "TrainJob", "name": "llama-sft"},
)


def test_the_restart_selector_reads_what_the_config_yields() -> None:
    metric, labels = selector_parts(RAW_SELECTORS[EvidenceKind.RESTARTS])
    series = by_name(ksm_series(config(), RUNNING), metric)
    assert metric == "kube_jobset_restarts"  # not kube_customresource_*
    (one,) = series
    assert labels <= set(one), (labels, one)
    assert (one["namespace"], one["jobset_name"], one["__value__"]) == ("ml", "llama-sft", "2.0")
    assert one["uid"] == RUNNING["metadata"]["uid"]
    assert [one[k] for k in GVK_LABELS] == ["jobset.x-k8s.io", "v1alpha2", "JobSet"]


def test_every_jobset_metric_and_label_the_rule_and_dashboard_read_is_yielded() -> None:
    series = ksm_series(config(), RUNNING)
    labels_of: dict[str, set[str]] = {}
    for name, labels, _ in series:
        labels_of.setdefault(name, set()).update(k for k, _ in labels)
    rule = yaml.safe_load((PROMETHEUS / "loopbreaker-rules.yaml").read_text())
    (expr,) = [
        r["expr"] for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == ALERT
    ]
    exprs = [expr] + [
        t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", [])
    ]
    read = {m for e in exprs for m in re.findall(r"\bkube_jobset_\w+", e)}
    assert {"kube_jobset_restarts", "kube_jobset_job_restarts"} <= read
    assert read <= set(labels_of), read - set(labels_of)
    grouped = set(re.findall(r"\w+", " ".join(re.findall(r"by \(([^)]*)\)", expr))))
    assert grouped - {"cluster"} <= labels_of["kube_jobset_job_restarts"]


def test_each_job_index_is_its_own_series_with_its_own_count() -> None:
    jobs = by_name(ksm_series(config(), RUNNING), "kube_jobset_job_restarts")
    assert sorted((s["replicated_job"], s["job_index"], s["__value__"]) for s in jobs) == [
        ("workers", "0", "0.0"),
        ("workers", "1", "3.0"),
    ]
    indices = [
        (m["commonLabels"]["job_index"], m["each"]["gauge"]["valueFrom"])
        for m in config()["spec"]["resources"][0]["metrics"]
        if m["name"] == "job_restarts"
    ]
    # Indices 0..n-1, each reading its own element: no Job counted twice or skipped below n.
    assert indices == [(str(i), ["jobRestarts", str(i)]) for i in range(len(indices))]
    assert len(indices) >= 8


def test_no_per_job_series_before_the_first_restart_job_and_zeros_while_omitted() -> None:
    fresh = ksm_series(config(), jobset("fresh", "u-1", restarts=0))
    assert by_name(fresh, "kube_jobset_job_restarts") == []
    (restarts,) = by_name(fresh, "kube_jobset_restarts")
    (towards,) = by_name(fresh, "kube_jobset_restarts_count_towards_max")
    # restartsCountTowardsMax is omitempty: absent at 0, still a 0 series.
    assert (restarts["__value__"], towards["__value__"]) == ("0.0", "0.0")
    # Not yet reconciled (no status at all): 0 restarts, not a missing JobSet.
    unreconciled = ksm_series(config(), jobset("new", "u-2", restarts=None))
    assert [s["__value__"] for s in by_name(unreconciled, "kube_jobset_restarts")] == ["0.0"]


def test_conditions_owner_and_replicated_job_states() -> None:
    series = ksm_series(config(), RUNNING)
    (condition,) = by_name(series, "kube_jobset_status_condition")
    assert (condition["condition"], condition["reason"], condition["__value__"]) == (
        "RestartingJobSet",
        "Restarted",
        "0.0",
    )
    (owner,) = by_name(series, "kube_jobset_owner")
    assert (owner["owner_kind"], owner["owner_name"]) == ("TrainJob", "llama-sft")
    states = {
        s["state"]: s["__value__"] for s in by_name(series, "kube_jobset_replicated_job_jobs")
    }
    assert states == {
        "ready": "2.0",
        "succeeded": "0.0",
        "failed": "0.0",
        "active": "2.0",
        "suspended": "0.0",
    }


# --- the promtool rule test ------------------------------------------------------------

_SERIES = re.compile(r"^(?P<name>\w+)\{(?P<labels>.*)\}$")


def rule_test_series() -> Iterator[tuple[str, dict[str, str]]]:
    for test in yaml.safe_load(RULE_TEST.read_text())["tests"]:
        for entry in test["input_series"]:
            match = _SERIES.match(entry["series"])
            assert match, entry["series"]
            yield match["name"], dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))


def test_the_rule_test_feeds_series_as_the_config_exports_them() -> None:
    yielded = {
        name: {tuple(sorted(k for k, _ in labels))}
        for name, labels, _ in ksm_series(config(), RUNNING)
    }
    checked = 0
    for name, labels in rule_test_series():
        if "customresource_group" not in labels:
            continue  # the exporter-without-uid case, labelled as such in the file
        assert {k: labels[k] for k in KSM_TARGET} == KSM_TARGET, labels
        own = tuple(sorted(k for k in labels if k not in KSM_TARGET))
        assert own in yielded[name], (name, own, yielded[name])
        assert [labels[k] for k in GVK_LABELS] == ["jobset.x-k8s.io", "v1alpha2", "JobSet"]
        checked += 1
    assert checked >= 6


def rules_spec() -> dict[str, Any]:
    (rule,) = [r for r in kustomize_build(PROMETHEUS) if r["kind"] == "PrometheusRule"]
    spec: dict[str, Any] = rule["spec"]
    return spec


def run_rule_test(spec: dict[str, Any], directory: Path) -> subprocess.CompletedProcess[str]:
    (directory / SPEC_FILE_NAME).write_text(yaml.safe_dump(spec, sort_keys=False))
    test = directory / RULE_TEST.name
    test.write_text(RULE_TEST.read_text())
    argv = [ensure_executable("promtool", "prometheus"), "test", "rules", str(test)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def with_expr(spec: dict[str, Any], expr: str) -> dict[str, Any]:
    changed = copy.deepcopy(spec)
    for group in changed["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == ALERT:
                rule["expr"] = expr
    return changed


def test_the_jobset_rule_passes_on_the_config_series(tmp_path: Path) -> None:
    done = run_rule_test(rules_spec(), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_rule_on_status_restarts_alone_misses_the_restart_job(tmp_path: Path) -> None:
    """The rule before per-job restarts: the gauge is flat, so nothing fires."""
    old = (
        "label_replace(max by (cluster, namespace, jobset_name) "
        '(increase(kube_jobset_restarts[60m])), "workload", "$1", "jobset_name", "(.+)") > 0'
    )
    done = run_rule_test(with_expr(rules_spec(), old), tmp_path)
    assert done.returncode != 0
    assert "llama-sft" in done.stdout + done.stderr


def test_a_rule_that_takes_a_reset_for_a_decrease_misses_the_recreated_loop(
    tmp_path: Path,
) -> None:
    (expr,) = [
        r["expr"] for g in rules_spec()["groups"] for r in g["rules"] if r.get("alert") == ALERT
    ]
    done = run_rule_test(with_expr(rules_spec(), expr.replace("increase(", "delta(")), tmp_path)
    assert done.returncode != 0
    assert "mnist" in done.stdout + done.stderr


# --- the dashboard on a kube-prometheus-stack Prometheus ------------------------------

GMP_ONLY = "Managed Service for Prometheus only"
T0 = 1_790_000_000  # the first sample; the dashboard is read 2h later
STEPS = 121  # one sample a minute


def _om_line(name: str, labels: dict[str, str], value: float, minute: int) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}} {value} {T0 + 60 * minute}"


def kps_openmetrics() -> str:
    """A single-cluster kube-prometheus-stack's series (no `cluster` label): kube-state-metrics
    (docs/metrics/cluster/node-metrics.md, workload/pod-metrics.md at v2.20.0) with the node
    labels of docs/prometheus.md's allowlist, the JobSet config's series, the training
    operator (job_namespace; kubeflow/training-operator pkg/common/metrics.go), DCGM with a
    `node` relabelling, and ALERTS as Prometheus writes it for a firing rule."""
    series: dict[tuple[str, tuple[tuple[str, str], ...]], dict[int, float]] = {}

    def add(name: str, labels: dict[str, str], values: list[float], start: int = 0) -> None:
        key = (name, tuple(sorted(labels.items())))
        series[key] = {start + m: v for m, v in enumerate(values)}

    def steps(*runs: tuple[int, float]) -> list[float]:
        return [value for count, value in runs for _ in range(count)]

    ksm = KSM_TARGET
    # llama-sft restarts globally at 30m, then Job 1 alone at 60m (jobRestarts appears).
    for minute in range(STEPS):
        state = jobset("llama-sft", "u-llama", restarts=int(minute >= 30))
        if minute >= 60:
            state = jobset("llama-sft", "u-llama", restarts=1, job_restarts=[0, 1])
        for name, labels, value in ksm_series(config(), state):
            series.setdefault((name, tuple(sorted(dict(labels).items() | ksm.items()))), {})[
                minute
            ] = value
    ones, zeros = steps((STEPS, 1.0)), steps((STEPS, 0.0))
    for node, host, ready in (
        ("gke-a3-1", "host-a", steps((90, 1.0), (31, 0.0))),
        ("gke-a3-2", "host-b", ones),
    ):
        node_labels = {
            "node": node,
            "label_cloud_google_com_gce_topology_host": host,
            "label_cloud_google_com_gke_nodepool": "a3",
        }
        add("kube_node_labels", ksm | node_labels, ones)
        condition = ksm | {"node": node, "condition": "Ready"}
        add("kube_node_status_condition", condition | {"status": "true"}, ready)
        add("kube_node_status_condition", condition | {"status": "false"}, [1 - v for v in ready])
        pressure = {"node": node, "condition": "MemoryPressure", "status": "true"}
        add("kube_node_status_condition", ksm | pressure, zeros)
        cordoned = steps((100, 0.0), (21, 1.0)) if node == "gke-a3-1" else zeros
        add("kube_node_spec_unschedulable", ksm | {"node": node}, cordoned)
        for gpu in ("0", "1"):
            dcgm = {"node": node, "gpu": gpu, "UUID": f"GPU-{node}-{gpu}", "job": "dcgm-exporter"}
            add("DCGM_FI_DEV_GPU_UTIL", dcgm, steps((STEPS, 97.0)))
            xid = steps((80, 0.0), (41, 79.0)) if (node, gpu) == ("gke-a3-1", "0") else zeros
            add("DCGM_FI_DEV_XID_ERRORS", dcgm, xid)
            add("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", dcgm, zeros)
    taint = {"node": "gke-a3-1", "key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    add("kube_node_spec_taint", ksm | taint, steps((31, 1.0)), start=90)
    pod = ksm | {"namespace": "ml", "pod": "llama-sft-workers-0-0-abcde", "uid": "p-1"}
    add("kube_pod_info", pod | {"node": "", "priority_class": "", "host_ip": ""}, ones)
    add("kube_pod_status_phase", pod | {"phase": "Pending"}, ones)
    add("kube_pod_status_unschedulable", pod, ones)
    gpus = {"container": "trainer", "resource": "nvidia_com_gpu", "unit": "integer"}
    add("kube_pod_container_resource_requests", pod | gpus, steps((STEPS, 8.0)))
    operator = {"job": "training-operator", "namespace": "kubeflow", "job_namespace": "ml"}
    restarted = steps((70, 0.0), (51, 2.0))
    add("training_operator_jobs_restarted_total", operator | {"framework": "pytorch"}, restarted)
    alert = {"alertname": ALERT, "alertstate": "firing", "loopbreaker": "true"}
    alert |= {"loopbreaker_signal": "restart_loop", "namespace": "ml", "workload": "llama-sft"}
    add("ALERTS", alert, steps((60, 1.0)), start=61)
    lines = [
        _om_line(name, dict(labels), value, minute)
        for (name, labels), samples in sorted(series.items())
        for minute, value in sorted(samples.items())
    ]
    return "\n".join(lines) + "\n# EOF\n"


def kps_panels() -> Iterator[tuple[str, dict[str, Any]]]:
    row = ""
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            continue
        yield row, panel


#: What Grafana sends with every variable at All and a 2h range.
GRAFANA = {"cluster": ".*", "namespace": ".*", "__rate_interval": "5m", "__range": "2h"}


def filled(expr: str) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: GRAFANA.get(m[1], m[0]), expr)


def test_every_panel_has_data_on_a_kube_prometheus_stack(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    metrics = tmp_path / "kps.om"
    metrics.write_text(kps_openmetrics())
    prom = prometheus_factory([metrics])
    at = T0 + 60 * (STEPS - 1)
    empty, checked = [], 0
    for row, panel in kps_panels():
        for target in panel["targets"]:
            answer = prom.query(filled(target["expr"]), time=at)
            assert answer["status"] == "success", (panel["title"], answer)
            has_data = bool(answer["data"]["result"])
            if GMP_ONLY in row:
                # Cloud Monitoring names: No data here, as the row title and panel say.
                assert not has_data, panel["title"]
                continue
            checked += 1
            if not has_data:
                empty.append(f"{panel['title']} {target['refId']}: {target['expr']}")
    assert not empty, "\n".join(empty)
    assert checked >= 18, checked
    # The namespace variable lists the job's namespace; `cluster` has no values, so Grafana
    # offers All (.*), which matches series without the label.
    board = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v["query"]["query"] for v in board["templating"]["list"][1:]}
    selector = re.fullmatch(r"label_values\((.+), namespace\)", variables["namespace"])
    assert selector
    answer = prom.query(f"count by (namespace) ({filled(selector[1])})", time=at)
    assert [r["metric"]["namespace"] for r in answer["data"]["result"]] == ["ml"]
    assert prom.query("count by (cluster) (kube_pod_info)", time=at)["data"]["result"] == [
        {"metric": {}, "value": [at, "1"]}
    ]


def test_the_table_counts_the_restart_job_the_graph_cannot(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    metrics = tmp_path / "kps.om"
    metrics.write_text(kps_openmetrics())
    prom = prometheus_factory([metrics])
    (table,) = [p for _, p in kps_panels() if p["title"] == "Restarts in the selected range"]
    answer = prom.query(filled(table["targets"][0]["expr"]), time=T0 + 60 * (STEPS - 1))
    (row,) = [r for r in answer["data"]["result"] if r["metric"].get("jobset_name") == "llama-sft"]
    # One global restart (30m) and one RestartJob (60m) in the 2h range.
    assert round(float(row["value"][1])) == 2


def test_the_interruption_panel_says_kube_state_metrics_has_no_equivalent() -> None:
    (panel,) = [
        p for _, p in kps_panels() if "kubernetes_io:node_pool_interruption_count" in json.dumps(p)
    ]
    assert "kube-state-metrics has no equivalent" in panel["description"]
    assert "Node disruptions (kube-state-metrics)" in panel["description"]
    rows = [p["title"] for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] == "row"]
    assert "Node disruptions (kube-state-metrics)" in rows
