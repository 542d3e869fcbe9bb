"""Offline checks of the Terraform module: parsing and the wiring that matters.

``terraform fmt -check`` and checkov run in ``make terraform`` (part of ``make test``);
the provider schema check is test_terraform_schema.py.

No google provider is reachable here, so ``terraform validate`` cannot run; the module is
parsed with python-hcl2 and its wiring asserted: sinks publish to the topic whose push
subscription delivers to ``on_log_entry``, narrowed to ``clusters``; each writer identity
may publish to it and nothing more; the pushed functions have Terraform-owned retry and
dead-letter policies with the Pub/Sub service agent's grants; functions deploy after the
secret versions they read and alert policies after their metrics; every grant follows
from the input that needs it (the ``local`` tables of grants and APIs are evaluated for
chosen inputs); only the remediation service account holds the destructive permissions,
on GKE node VMs only; no basic roles; only the self-verifying endpoints are public.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import hcl2
import pytest

from loopbreaker.diagnosis import scope
from loopbreaker.signals import sink_filters

MODULE = Path(__file__).resolve().parents[2] / "infra" / "terraform"
DESTRUCTIVE = {
    "compute.instances.delete",
    "compute.instances.reportHostAsFaulty",
    "container.nodes.update",
    "container.pods.evict",
    "container.pods.delete",
}
VM_PERMISSIONS = {
    "compute.instances.get",
    "compute.instances.delete",
    "compute.instances.reportHostAsFaulty",
}
BASIC_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
PUSHED = {"on_log_entry", "on_remediation_request"}


def unquote(value: Any) -> Any:
    """python-hcl2 8 keeps the quotes of string literals; compare values without them."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, dict):
        return {unquote(k): unquote(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unquote(v) for v in value]
    return value


def parse(path: Path) -> dict[str, Any]:
    with open(path) as handle:
        parsed: dict[str, Any] = unquote(hcl2.load(handle))
        return parsed


@pytest.fixture(scope="module")
def module() -> dict[str, Any]:
    merged: dict[str, Any] = {"resource": {}, "data": {}, "locals": {}, "variable": {}}
    for path in sorted(MODULE.glob("*.tf")):
        parsed = parse(path)
        for block in parsed.get("resource", []):
            for rtype, named in block.items():
                merged["resource"].setdefault(rtype, {}).update(named)
        for block in parsed.get("data", []):
            for dtype, named in block.items():
                merged["data"].setdefault(dtype, {}).update(named)
        for block in parsed.get("locals", []):
            merged["locals"].update(block)
        for block in parsed.get("variable", []):
            merged["variable"].update(block)
    return merged


def resources(module: dict[str, Any], rtype: str) -> dict[str, Any]:
    found: dict[str, Any] = module["resource"].get(rtype, {})
    return found


def text(value: Any) -> str:
    return json.dumps(value)


def walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def entries(table: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if not k.startswith("__")}


# --- evaluating the module's tables for chosen inputs ------------------------------------


def evaluate(expression: Any, var: dict[str, Any], local: dict[str, Any]) -> Any:
    """A guard of a ``local`` table (``var.repair_path == "report"``) for these inputs.

    The guards use comparisons, ``&&``, ``||``, ``!``, ``length``, ``contains``, ``anytrue`` and
    ``values`` only, which read the same in Python once the operators are spelled out.
    """
    if not isinstance(expression, str):
        return expression
    code = expression.removeprefix("${").removesuffix("}")
    if re.search(r"[?]|\bfor\b", code):
        raise AssertionError(f"guard too complex to evaluate here: {expression}")
    code = code.replace("&&", " and ").replace("||", " or ")
    code = re.sub(r"!(?!=)", " not ", code)
    code = re.sub(r"\bnull\b", "None", code)
    code = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", code))
    namespace = {
        "var": SimpleNamespace(**var),
        "local": SimpleNamespace(**local),
        "length": len,
        "anytrue": any,
        "contains": lambda items, item: item in items,
        "values": lambda mapping: list(mapping.values()),
    }
    return eval(code, {"__builtins__": {}}, namespace)  # noqa: S307 - our own .tf guards


def inputs(module: dict[str, Any], **overrides: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(var, local) for the module's defaults plus ``overrides``."""
    var = {
        name: spec.get("default")
        for name, spec in module["variable"].items()
        if not name.startswith("__")
    }
    var.update(overrides)
    local: dict[str, Any] = {"approvals": len(var["approvers"]) > 0}
    local["secrets_in_use"] = {
        secret: evaluate(guard, var, local)
        for secret, guard in entries(module["locals"]["secrets_in_use"]).items()
    }
    return var, local


def chosen(module: dict[str, Any], table: str, **overrides: Any) -> set[str]:
    """The keys of a ``local`` table of guards that these inputs switch on."""
    var, local = inputs(module, **overrides)
    return {
        key
        for key, guard in entries(module["locals"][table]).items()
        if evaluate(guard, var, local)
    }


# --- files and conventions ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path", sorted(MODULE.rglob("*.tf")), ids=lambda p: str(p.relative_to(MODULE))
)
def test_every_file_parses(path: Path) -> None:
    assert parse(path) is not None


def test_conventional_files_and_alphabetical_typed_described_variables(
    module: dict[str, Any],
) -> None:
    for name in ("versions.tf", "variables.tf", "outputs.tf", "README.md"):
        assert (MODULE / name).is_file(), name
    assert (MODULE / "examples" / "minimal" / "main.tf").is_file()
    names = [next(iter(v)) for v in parse(MODULE / "variables.tf")["variable"]]
    assert names == sorted(names), "variables.tf is not alphabetical"
    for name, spec in entries(module["variable"]).items():
        assert spec.get("type") and spec.get("description"), f"variable {name}"
    outputs = [next(iter(o)) for o in parse(MODULE / "outputs.tf")["output"]]
    assert outputs == sorted(outputs), "outputs.tf is not alphabetical"
    readme = (MODULE / "README.md").read_text()
    for name in [*names, *outputs]:
        assert f"`{name}`" in readme, f"{name} is missing from the module README"


def test_the_provider_ranges_admit_6_to_8_and_are_bounded() -> None:
    versions = parse(MODULE / "versions.tf")["terraform"][0]["required_providers"][0]
    for provider in ("google", "google-beta"):
        constraint = versions[provider]["version"]
        assert constraint == ">= 6.1, < 9", (provider, constraint)
    for provider in ("archive", "time"):
        constraint = versions[provider]["version"]
        assert ">=" in constraint and "<" in constraint, provider
    example = parse(MODULE / "examples" / "minimal" / "main.tf")["terraform"][0]
    assert entries(example["required_providers"][0]) == entries(versions)


# --- sinks -------------------------------------------------------------------------------


def test_the_sink_filters_come_from_the_generated_file(module: dict[str, Any]) -> None:
    assert "log-filters.json" in text(module["locals"].get("log_filters"))
    on_disk = json.loads((MODULE / "log-filters.json").read_text())
    assert on_disk == sink_filters.FILTERS


def test_every_sink_publishes_to_the_topic_pushed_to_on_log_entry(
    module: dict[str, Any],
) -> None:
    sinks = {
        rtype: spec
        for rtype in (
            "google_logging_project_sink",
            "google_logging_folder_sink",
            "google_logging_organization_sink",
        )
        for spec in resources(module, rtype).values()
    }
    assert set(sinks) == {
        "google_logging_project_sink",
        "google_logging_folder_sink",
        "google_logging_organization_sink",
    }
    for spec in sinks.values():
        assert "google_pubsub_topic.log_events" in text(spec["destination"])
        assert "local.sink_filters" in text(spec.get("for_each"))
        assert spec["filter"] == "${each.value}"
    push = resources(module, "google_pubsub_subscription")["push"]
    assert "google_pubsub_topic.log_events.id" in text(push["topic"])
    assert "google_pubsub_topic.remediation.id" in text(push["topic"])
    functions = module["locals"]["functions"]
    assert functions["on_log_entry"]["trigger"] == "log_events"
    assert functions["on_remediation_request"]["trigger"] == "remediation"


def test_clusters_narrow_every_sink_filter_by_the_clause_its_resources_carry(
    module: dict[str, Any],
) -> None:
    narrowed = module["locals"]["sink_filters"]
    assert "local.log_filters" in narrowed and "length(var.clusters) == 0" in narrowed
    # Entries of GKE resources by cluster label, Compute Engine entries by VM name.
    assert "resource.labels.cluster_name=(${local.cluster_clause})" in narrowed
    assert 'strcontains(filter, "gce_instance")' in narrowed
    assert "${local.vm_clause}" in narrowed
    assert "protoPayload.resourceName:" in module["locals"]["vm_clause"]
    # The shortening GKE applies to long cluster names, as the responder's scope check
    # knows it: whole up to 14 characters (then a hyphen), else the first 14.
    prefixes = module["locals"]["vm_prefixes"]
    limit = scope._SHORTENED_AT_LEAST
    assert f"length(cluster) <= {limit}" in prefixes
    assert "/instances/gke-${cluster}-" in prefixes
    assert f"substr(cluster, 0, {limit})" in prefixes
    # The dispatch on "gce_instance" is right only while no generated filter mixes
    # Compute Engine and GKE resource types, and every GKE type has cluster_name.
    with_cluster_label = {"k8s_container", "k8s_pod", "k8s_node", "k8s_cluster", "gke_nodepool"}
    for name, lql in sink_filters.FILTERS.items():
        types = set(re.findall(r'"(gce_instance|k8s_\w+|gke_\w+)"', lql))
        assert types, name
        assert types == {"gce_instance"} or types <= with_cluster_label, (name, types)


def test_the_writer_identity_may_publish_to_that_topic_only(module: dict[str, Any]) -> None:
    writers = resources(module, "google_pubsub_topic_iam_member")["sink_writer"]
    assert writers["role"] == "roles/pubsub.publisher"
    assert "google_pubsub_topic.log_events" in text(writers["topic"])
    # The member is read through the wait for the identities to propagate.
    assert writers["member"] == "${time_sleep.sink_writers.triggers[each.key]}"
    wait = resources(module, "time_sleep")["sink_writers"]
    assert "sink.writer_identity" in text(wait["triggers"]) and "local.sinks" in text(
        wait["triggers"]
    )
    for name, spec in resources(module, "google_pubsub_topic_iam_member").items():
        if "sink_writers" in text(spec.get("member")) or "writer_identity" in text(spec):
            assert name == "sink_writer"
    for rtype in ("google_project_iam_member", "google_project_iam_binding"):
        for spec in resources(module, rtype).values():
            assert "writer_identity" not in text(spec) and "sink_writers" not in text(spec)


# --- ordering ----------------------------------------------------------------------------


def test_every_function_that_reads_a_secret_depends_on_that_secrets_version(
    module: dict[str, Any],
) -> None:
    function = resources(module, "google_cloudfunctions2_function")["this"]
    assert "${google_secret_manager_secret_version.this}" in function["depends_on"]
    assert "${google_secret_manager_secret_iam_member.accessor}" in function["depends_on"]
    module_secrets, _prometheus = function["service_config"][0]["dynamic"]
    secrets = module_secrets["secret_environment_variables"]
    assert secrets["for_each"] == "${local.function_secrets[each.key]}"
    [content] = secrets["content"]
    # The version this module added, by reference: never "latest" of an empty secret.
    assert content["version"] == (
        "${google_secret_manager_secret_version.this[secret_environment_variables.value].version}"
    )
    versions = resources(module, "google_secret_manager_secret_version")["this"]
    assert versions["for_each"] == "${google_secret_manager_secret.this}"
    assert versions["secret_data"] == "${local.secret_values[each.key]}"
    secret = resources(module, "google_secret_manager_secret")["this"]
    assert "local.secrets_in_use[secret]" in secret["for_each"]
    # Every function that may read a secret reads only secrets the table knows, and a
    # secret in use has a version: its value is required, by a precondition naming it.
    variables = entries(module["locals"]["secret_variables"])
    for name, fn in entries(module["locals"]["functions"]).items():
        assert set(fn["secrets"]) <= set(variables), name
    conditions = secret["lifecycle"][0]["precondition"]
    for name in variables:
        variable = name.replace("-", "_")
        [check] = [c for c in conditions if f'local.secret_given[\\"{name}\\"]' in text(c)]
        assert variable in check["error_message"], (name, check["error_message"])


def test_no_function_reads_a_secret_it_does_not_need(module: dict[str, Any]) -> None:
    functions = entries(module["locals"]["functions"])
    assert functions["on_log_entry"]["secrets"] == []
    for name, fn in functions.items():
        if "alert-webhook-token" in fn["secrets"]:
            assert name == "on_alertmanager_webhook"
        if "slack-signing-secret" in fn["secrets"]:
            assert name == "on_chat_action"
    var, local = inputs(module, notifier="log", approvers=[])
    assert not any(local["secrets_in_use"].values())
    var, local = inputs(module, notifier="slack", approvers=[])
    assert {k for k, v in local["secrets_in_use"].items() if v} == {"slack-bot-token"}
    var, local = inputs(module, notifier="google-chat", approvers=["a@example.com"])
    assert {k for k, v in local["secrets_in_use"].items() if v} == {"action-signing-key"}


def test_every_alert_policy_on_a_log_metric_waits_for_that_metric(
    module: dict[str, Any],
) -> None:
    metrics = set(resources(module, "google_logging_metric"))
    wait = resources(module, "time_sleep")["log_metrics"]
    assert wait["create_duration"] == "${var.metric_propagation_wait}"
    assert wait["triggers"] == "${local.log_metric_types}"
    types = entries(module["locals"]["log_metric_types"])
    assert set(types) == metrics
    for name, metric_type in types.items():
        assert f"google_logging_metric.{name}.name" in metric_type
    assert module["variable"]["metric_propagation_wait"]["default"] == "10m"
    on_metrics = 0
    for name, policy in resources(module, "google_monitoring_alert_policy").items():
        filters = text(policy["conditions"])
        # A log metric is named only through the wait, never directly.
        assert "local.log_metric_types" not in filters, name
        used = set(re.findall(r'time_sleep\.log_metrics\.triggers\[\\*"(\w+)\\*"\]', filters))
        used |= set(re.findall(r"google_logging_metric\.(\w+)", filters))
        if not used:
            continue
        on_metrics += 1
        depends = policy.get("depends_on", [])
        assert "${time_sleep.log_metrics}" in depends, name
        for metric in used:
            assert metric in metrics, (name, metric)
            assert f"${{google_logging_metric.{metric}}}" in depends, (name, metric)
    assert on_metrics == 2


# --- dead letters ------------------------------------------------------------------------


def test_every_pushed_function_has_terraform_owned_retry_and_dead_letter_policies(
    module: dict[str, Any],
) -> None:
    functions = entries(module["locals"]["functions"])
    assert {name for name, fn in functions.items() if fn["trigger"] is not None} == PUSHED
    for name in PUSHED:
        fn = functions[name]
        # Pub/Sub waits for the answer at least as long as the function may run.
        assert fn["timeout_seconds"] < fn["ack_deadline"] <= 600, name
    function = resources(module, "google_cloudfunctions2_function")["this"]
    assert "event_trigger" not in function, "no Eventarc trigger: its subscription is not ours"
    push = resources(module, "google_pubsub_subscription")["push"]
    assert (
        push["for_each"] == "${{for name, fn in local.deployed : name => fn if fn.trigger != null}}"
    )
    [policy] = push["dead_letter_policy"]
    assert policy["dead_letter_topic"] == "${google_pubsub_topic.dead_letter.id}"
    assert policy["max_delivery_attempts"] == "${var.max_delivery_attempts}"
    assert module["variable"]["max_delivery_attempts"]["default"] == 10
    [retry] = push["retry_policy"]
    assert retry["minimum_backoff"] and retry["maximum_backoff"]
    [config] = push["push_config"]
    uri = "${google_cloudfunctions2_function.this[each.key].service_config[0].uri}"
    assert config["push_endpoint"] == uri
    [oidc] = config["oidc_token"]
    assert oidc["audience"] == uri
    assert oidc["service_account_email"] == "${google_service_account.trigger.email}"
    assert push["expiration_policy"][0]["ttl"] == ""
    for needed in (
        "google_cloud_run_service_iam_member.trigger_invoker",
        "google_service_account_iam_member.trigger_token_creator",
        "google_pubsub_topic_iam_member.dead_letter_publisher",
    ):
        assert f"${{{needed}}}" in push["depends_on"], needed
    invoker = resources(module, "google_cloud_run_service_iam_member")["trigger_invoker"]
    assert invoker["member"] == "serviceAccount:${google_service_account.trigger.email}"


def test_the_pubsub_service_agent_is_created_and_granted_what_dead_letters_need(
    module: dict[str, Any],
) -> None:
    identity = resources(module, "google_project_service_identity")["pubsub"]
    assert identity["provider"] == "google-beta"
    assert identity["service"] == "pubsub.googleapis.com"
    wait = resources(module, "time_sleep")["pubsub_agent"]
    assert wait["triggers"]["member"] == "${google_project_service_identity.pubsub.member}"
    agent = '${time_sleep.pubsub_agent.triggers[\\"member\\"]}'
    publisher = resources(module, "google_pubsub_topic_iam_member")["dead_letter_publisher"]
    assert text(publisher["member"]) == f'"{agent}"'
    assert publisher["role"] == "roles/pubsub.publisher"
    assert publisher["topic"] == "${google_pubsub_topic.dead_letter.id}"
    subscriber = resources(module, "google_pubsub_subscription_iam_member")[
        "dead_letter_subscriber"
    ]
    assert subscriber["for_each"] == "${google_pubsub_subscription.push}"
    assert subscriber["role"] == "roles/pubsub.subscriber"
    assert text(subscriber["member"]) == f'"{agent}"'
    creator = resources(module, "google_service_account_iam_member")["trigger_token_creator"]
    assert text(creator["member"]) == f'"{agent}"'
    # Nothing names the agent by a constructed email any more.
    assert "gcp-sa-pubsub" not in text(module["resource"]) + text(module["locals"])


# --- grants ------------------------------------------------------------------------------


def test_each_repair_path_grants_its_own_vm_permission_and_not_the_others(
    module: dict[str, Any],
) -> None:
    def vm(path: str) -> set[str]:
        return chosen(module, "remediation_vm_permissions", repair_path=path)

    delete = {"compute.instances.get", "compute.instances.delete"}
    assert vm("delete") == delete
    # auto falls back to the deletion where GKE's report-and-replace does not apply.
    assert vm("auto") == delete
    assert vm("report") == {"compute.instances.get", "compute.instances.reportHostAsFaulty"}
    # GKE reports the host itself: loopbreaker only reads the VM.
    assert vm("gke") == {"compute.instances.get"}
    gke = chosen(module, "remediation_permissions", repair_path="gke")
    assert "container.pods.evict" not in gke and "container.nodes.update" in gke
    wait = chosen(module, "remediation_permissions", drain_mode="wait")
    forced = chosen(module, "remediation_permissions", drain_mode="delete-after-timeout")
    assert "container.pods.delete" not in wait
    assert forced - wait == {"container.pods.delete"}
    assert "container.pods.evict" in wait and "container.nodes.update" in wait
    for role, table in (
        ("remediation", "remediation_permissions"),
        ("remediation_vm", "remediation_vm_permissions"),
    ):
        spec = resources(module, "google_project_iam_custom_role")[role]
        assert f"local.{table}" in spec["permissions"] and "if needed" in spec["permissions"]
        assert spec["for_each"] == "${local.remediation_projects}"


def test_only_the_remediation_account_holds_the_destructive_permissions(
    module: dict[str, Any],
) -> None:
    tables = {
        "remediation": set(entries(module["locals"]["remediation_permissions"])),
        "remediation_vm": set(entries(module["locals"]["remediation_vm_permissions"])),
    }
    assert tables["remediation"] | tables["remediation_vm"] >= DESTRUCTIVE
    # VM permissions only in the role granted under the GKE-node-VM condition.
    assert tables["remediation_vm"] == VM_PERMISSIONS
    assert not tables["remediation"] & VM_PERMISSIONS
    assert tables["remediation"] <= DESTRUCTIVE | {
        "compute.zoneOperations.get",
        "container.clusters.get",
        "container.nodes.get",
        "container.nodes.list",
        "container.pods.list",
        "container.events.create",  # an Event on the node for each step (issue 19)
    }
    holders = {
        name: spec
        for name, spec in resources(module, "google_project_iam_member").items()
        if "google_project_iam_custom_role" in text(spec.get("role"))
    }
    assert set(holders) == {"remediation", "remediation_vm"}
    for spec in holders.values():
        assert "on_remediation_request" in text(spec["member"])
    # No predefined role that can delete VMs or update nodes goes to anyone.
    for spec in resources(module, "google_project_iam_member").values():
        role = text(spec.get("role"))
        assert "compute.instanceAdmin" not in role and "container.admin" not in role


def test_vm_permissions_hold_on_gke_node_vms_only(module: dict[str, Any]) -> None:
    grant = resources(module, "google_project_iam_member")["remediation_vm"]
    [condition] = grant["condition"]
    # Each workload project's grant is conditioned on that project's VMs.
    assert condition["expression"] == "${local.gke_instances_only[each.key]}"
    expression = module["locals"]["gke_instances_only"]
    assert "for project in local.remediation_projects : project =>" in expression
    assert 'resource.type == \\"compute.googleapis.com/Instance\\"' in expression
    assert 'resource.name.startsWith(\\"projects/${project}/zones/\\")' in expression
    assert 'resource.name.extract(\\"/instances/{name}\\").startsWith(\\"gke-\\")' in expression
    assert '" && "' in expression.replace('\\"', '"')
    # The other role, unconditioned, carries no VM permission (asserted above) and is
    # held by the same account only.
    assert "condition" not in resources(module, "google_project_iam_member")["remediation"]


def test_without_approvers_nothing_of_the_remediation_path_is_deployed_or_granted(
    module: dict[str, Any],
) -> None:
    functions = entries(module["locals"]["functions"])
    assert functions["on_remediation_request"]["deploy"] == "${local.approvals}"
    assert module["locals"]["approvals"] == "${length(var.approvers) > 0}"
    publisher = resources(module, "google_pubsub_topic_iam_member")["remediation_publisher"]
    assert "local.approvals" in publisher["for_each"] and "fn.approvals" in publisher["for_each"]
    support = resources(module, "google_project_iam_member")["support"]
    assert support["for_each"].startswith("${local.approvals && ")
    for name in ("remediation", "remediation_vm"):
        grant = resources(module, "google_project_iam_member")[name]
        assert grant["for_each"] == "${local.remediation_projects}"


def test_apis_follow_the_inputs(module: dict[str, Any]) -> None:
    chat = chosen(module, "services", notifier="google-chat")
    slack = chosen(module, "services", notifier="slack")
    bare = chosen(module, "services", notifier="log", approvers=[])
    assert "chat.googleapis.com" in chat and "chat.googleapis.com" not in slack
    assert "secretmanager.googleapis.com" in slack
    assert "secretmanager.googleapis.com" not in bare
    assert "cloudsupport.googleapis.com" not in bare
    assert "cloudsupport.googleapis.com" in chosen(module, "services", support_parent="projects/p")
    # Nothing is enabled that no path uses: the functions are not Eventarc-triggered.
    assert "eventarc.googleapis.com" not in chat | slack
    service = resources(module, "google_project_service")["this"]
    assert "local.services" in service["for_each"] and "if needed" in service["for_each"]


def test_no_basic_roles_anywhere(module: dict[str, Any]) -> None:
    for value in walk(module["resource"]):
        if isinstance(value, str):
            assert value not in BASIC_ROLES, value


def test_only_the_self_verifying_endpoints_are_public(module: dict[str, Any]) -> None:
    public = [
        (name, spec)
        for rtype in (
            "google_cloud_run_service_iam_member",
            "google_cloudfunctions2_function_iam_member",
        )
        for name, spec in resources(module, rtype).items()
        if "allUsers" in text(spec.get("member"))
        or "allAuthenticatedUsers" in text(spec.get("member"))
    ]
    assert public, "the chat endpoint must be callable by Slack and Google Chat"
    for _, spec in public:
        scope_text = text(spec.get("for_each")) + text(spec.get("service"))
        assert "on_chat_action" in scope_text or "public" in scope_text
        for other in ("on_log_entry", "on_schedule", "on_remediation_request"):
            assert other not in scope_text, other
    functions = entries(module["locals"]["functions"])
    assert {n for n, fn in functions.items() if fn["public"]} == {
        "on_chat_action",
        "on_alertmanager_webhook",
    }
    for name in PUSHED | {"on_schedule"}:
        assert functions[name]["ingress"] == "ALLOW_INTERNAL_ONLY", name


def test_one_service_account_per_function(module: dict[str, Any]) -> None:
    accounts = resources(module, "google_service_account")["functions"]
    assert accounts["for_each"] == "${local.deployed}"
    assert "local.functions" in module["locals"]["deployed"]
    functions = module["locals"]["functions"]
    assert {
        "on_log_entry",
        "on_schedule",
        "on_chat_action",
        "on_remediation_request",
        "on_alertmanager_webhook",
    } <= set(functions)
    service = text(resources(module, "google_cloudfunctions2_function")["this"])
    assert "google_service_account.functions[each.key].email" in service


def test_the_stable_function_urls_match_what_the_chat_apps_are_given(
    module: dict[str, Any],
) -> None:
    urls = module["locals"]["function_urls"]
    assert "https://${var.region}-${var.project_id}.cloudfunctions.net/" in urls
    assert "${local.name_prefix}${fn.name}" in urls
    outputs = {k: v for o in parse(MODULE / "outputs.tf")["output"] for k, v in o.items()}
    assert outputs["chat_action_uri"]["value"] == (
        '${google_cloudfunctions2_function.this[\\"on_chat_action\\"].url}'.replace("\\", "")
    )
    function = text(resources(module, "google_cloudfunctions2_function")["this"])
    assert "coalesce(var.google_chat_audience, local.function_urls" in function
