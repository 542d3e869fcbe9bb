"""The deploy path as a new user reads it: every path named resolves, the README's module
call is examples/minimal's, and counts, tables and allowlists match the files they describe.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MODULE = ROOT / "infra" / "terraform"
MINIMAL = MODULE / "examples" / "minimal" / "main.tf"
GUIDE = ROOT / "docs" / "prometheus.md"
RULES = ROOT / "deploy" / "prometheus" / "loopbreaker-rules.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "loopbreaker-dashboard.json"
SLACK = ROOT / "deploy" / "slack"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# --- every repository path mentioned resolves ----------------------------------------

#: What `make bundle` and the tests write (git ignores it): not the repository's own paths,
#: so whether it exists depends on what ran before, never on the docs.
_GENERATED = {"build"}
_TOP = "|".join(
    p.name
    for p in ROOT.iterdir()
    if p.is_dir() and not p.name.startswith(".") and p.name not in _GENERATED
)
#: A path into the repository: it starts with one of its top-level directories.
_PATH = re.compile(rf"(?<![\w./@:$<-])((?:{_TOP})/[\w./*-]*[\w*/])")
#: "owner/repo ref path": a source in another repository (docs/signals.md cites them so).
_OTHER_REPO = re.compile(r"[\w.-]+/[\w.-]+ [\w.-]+ $")


def mentioning_files() -> list[Path]:
    files = [README, *(ROOT / "docs").rglob("*.md"), *(ROOT / "deploy").rglob("*.md")]
    return sorted({*files, MODULE / "README.md"})


_LINK = re.compile(r"\]\(\s*<?([^)\s>#]+)[^)]*\)")


def unresolved(path: Path, text: str) -> list[str]:
    """Paths named in ``text`` that do not exist: relative links from ``path``, and
    repository paths neither from the root nor from ``path``."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)):  # links in prose only
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not (path.parent / target).exists():
                found.append(f"{path.relative_to(ROOT)}:{number}: {target}")
        for match in _PATH.finditer(line):
            named = match.group(1).rstrip(".")
            before = line[: match.start()]
            if _OTHER_REPO.search(before) or before.rstrip().endswith(">"):
                continue  # another repository's file, or one the snippet writes
            if not any(glob.glob(str(base / named)) for base in (ROOT, path.parent)):
                found.append(f"{path.relative_to(ROOT)}:{number}: {named}")
    return found


@pytest.mark.parametrize("path", mentioning_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_in_the_docs_resolves(path: Path) -> None:
    assert unresolved(path, read(path)) == []


def variable_descriptions() -> dict[str, str]:
    with (MODULE / "variables.tf").open() as handle:
        blocks = hcl2.load(handle)["variable"]
    return {
        name.strip('"'): str(body.get("description", "")).strip('"')
        for block in blocks
        for name, body in block.items()
    }


def test_every_repository_path_in_a_variable_description_resolves() -> None:
    problems = [
        problem
        for name, description in variable_descriptions().items()
        for problem in unresolved(MODULE / "variables.tf", description)
    ]
    assert problems == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("See `deploy/prometheus/alertmanager-receiver.yaml`.", "alertmanager-receiver.yaml"),
        ("Run tests/deploy/no_such_*.py.", "no_such_*.py"),
        ("[it](../docs/nowhere.md)", "docs/nowhere.md"),
    ],
)
def test_a_missing_path_is_caught(text: str, expected: str) -> None:
    found = unresolved(ROOT / "docs" / "planted.md", text)
    assert len(found) == 1 and expected in found[0], found


def test_generated_and_foreign_paths_are_not_counted() -> None:
    text = (
        "yq . > deploy/prometheus/tests/out.spec.yaml\n"
        "ROCm/xla upstream-jax-v0.9.0 docs/errors/error_1000.md\n"
        "https://github.com/kubernetes/kube-state-metrics/blob/main/docs/x.md\n"
    )
    assert unresolved(ROOT / "docs" / "planted.md", text) == []


# --- the README's module call is examples/minimal's ----------------------------------


def readme_module() -> dict[str, Any]:
    block = read(README).split("## Deploy it", 1)[1].split("```hcl\n", 1)[1].split("```", 1)[0]
    return _module(block)


def minimal_module() -> dict[str, Any]:
    return _module(read(MINIMAL))


def _module(text: str) -> dict[str, Any]:
    (block,) = hcl2.loads(text)["module"]
    ((_, body),) = block.items()
    return {k: v for k, v in body.items() if not k.startswith("__")}


def test_the_readme_and_examples_minimal_set_the_same_inputs() -> None:
    readme, minimal = readme_module(), minimal_module()
    assert set(readme) - {"source"} == set(minimal) - {"source"}
    for needed in ("enable_alertmanager_webhook", "alert_webhook_token", "alert_cluster"):
        assert needed in readme, needed


def test_every_input_named_is_a_variable_of_the_module() -> None:
    known = set(variable_descriptions())
    for inputs in (readme_module(), minimal_module()):
        assert set(inputs) - {"source"} <= known


def test_every_secret_is_wired_from_its_tf_var_in_both() -> None:
    """The secrets the user exports as TF_VAR_* reach the module as var.<name> in both."""
    with (MODULE / "variables.tf").open() as handle:
        sensitive = {
            name.strip('"')
            for block in hcl2.load(handle)["variable"]
            for name, body in block.items()
            if body.get("sensitive") is True
        }
    assert {"slack_bot_token", "action_signing_key", "alert_webhook_token"} <= sensitive
    readme_text = read(README)
    for inputs in (readme_module(), minimal_module()):
        secrets = {k for k in inputs if k in sensitive}
        assert secrets >= {"slack_bot_token", "slack_signing_secret", "action_signing_key"}
        for name in secrets:
            assert str(inputs[name]).strip('${}"') == f"var.{name}", (name, inputs[name])
            assert f"TF_VAR_{name}" in readme_text, name


#: Compute Engine machine-type families (cloud.google.com/compute/docs/machine-resource).
_MACHINE_TYPE = re.compile(
    r"^[a-z]\d[a-z]?-(standard|highmem|highcpu|highgpu|megagpu|ultragpu|edgegpu|ultramem|"
    r"megamem|hypermem|custom|micro|small|medium)(-\d+[a-z]*)?$"
)


def test_node_pools_are_pool_names_not_machine_types() -> None:
    """Every node_pools value shown, in any doc or example, names pools, not machine types."""
    assert _MACHINE_TYPE.match("a3-highgpu-8g") and _MACHINE_TYPE.match("n2-standard-32")
    shown = []
    for path in [*mentioning_files(), MINIMAL]:
        for values in re.findall(r"node_pools\s*=\s*\[([^\]]*)\]", read(path)):
            shown += [(path.name, name) for name in re.findall(r"[\w.-]+", values)]
    assert len(shown) >= 3 and [s for s in shown if _MACHINE_TYPE.match(s[1])] == [], shown


# --- docs/prometheus.md against the rule file ----------------------------------------

_NUMBERS = [
    *("zero", "one", "two", "three", "four", "five", "six"),
    *("seven", "eight", "nine", "ten", "eleven", "twelve"),
]


def rule_alerts() -> list[str]:
    spec = yaml.safe_load(read(RULES))["spec"]
    return [r["alert"] for g in spec["groups"] for r in g["rules"] if "alert" in r]


def counted_alerts(text: str) -> list[int]:
    """Every "N alerts" the text states, N as a word or a number."""
    counts = []
    for word in re.findall(r"\b(\w+) alerts\b", text):
        if word.isdigit():
            counts.append(int(word))
        elif word.lower() in _NUMBERS:
            counts.append(_NUMBERS.index(word.lower()))
    return counts


def test_every_alert_count_matches_the_rule_file() -> None:
    alerts = rule_alerts()
    for path in (GUIDE, ROOT / "deploy" / "prometheus" / "README.md"):
        counts = counted_alerts(read(path))
        assert counts and set(counts) == {len(alerts)}, (path.name, counts, len(alerts))


def test_the_alert_table_lists_every_alert_of_the_rule_file() -> None:
    section = read(GUIDE).split("| Alert | Needs | Runbook |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert sorted(listed) == sorted(rule_alerts())
    for name in listed:
        assert f"(runbooks/{name}.md)" in section, name


def allowlisted_labels() -> set[str]:
    """The Prometheus label names the documented metricLabelsAllowlist makes
    kube-state-metrics export: ``label_`` and the label, [^a-zA-Z0-9_] turned to ``_``
    (kube-state-metrics docs/metrics/workload/pod-metrics.md, kube_pod_labels)."""
    block = read(GUIDE).split("<!-- ksm-allowlist", 1)[1].split("```yaml\n", 1)[1]
    values = yaml.safe_load(block.split("```", 1)[0])["kube-state-metrics"]
    names = set()
    for entry in values["metricLabelsAllowlist"]:
        _, _, labels = entry.partition("=")
        for label in labels.strip("[]").split(","):
            names.add("label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label.strip()))
    return names


def referenced_labels(text: str) -> set[str]:
    """kube-state-metrics' label_* names; not PromQL's label_replace / label_join, nor
    Grafana's label_values()."""
    return set(re.findall(r"\blabel_(?!replace\b|join\b|values\b)[a-z0-9_]+", text)) - {"label_"}


def test_every_kube_state_metrics_label_the_rules_and_dashboard_read_is_allowlisted() -> None:
    exported = allowlisted_labels()
    assert "label_training_kubeflow_org_operator_name" in referenced_labels(read(RULES))
    for path in (RULES, DASHBOARD):
        assert referenced_labels(read(path)) <= exported, path.name


def test_a_label_missing_from_the_allowlist_is_caught() -> None:
    text = 'kube_pod_labels{label_example_com_team!=""} and label_replace(x, "a", "$1", "b", "")'
    assert referenced_labels(text) == {"label_example_com_team"}
    assert not referenced_labels(text) <= allowlisted_labels()


# --- the Slack README against the manifest --------------------------------------------


def slack_table() -> dict[str, set[str]]:
    text = read(SLACK / "README.md").split("<!-- manifest-table", 1)[1]
    rows: dict[str, set[str]] = {}
    for key, value in re.findall(r"^\| `([\w.]+)` \| ([^|]+) \|", text.split("\n\n", 1)[0], re.M):
        rows.setdefault(key, set()).update(re.findall(r"`([^`]+)`", value) or [value.strip()])
    return rows


def test_the_slack_readme_lists_the_manifests_scopes_and_commands() -> None:
    manifest = yaml.safe_load(read(SLACK / "manifest.yaml"))
    rows = slack_table()
    assert rows["oauth_config.scopes.bot"] == set(manifest["oauth_config"]["scopes"]["bot"])
    commands = {c["command"] for c in manifest["features"].get("slash_commands", [])}
    assert rows.get("features.slash_commands", set()) == commands
    assert "settings.interactivity.request_url" in rows
