"""The documented ``LOOPBREAKER_*`` variables: the table docs/configuration.md shows."""

from __future__ import annotations

from dataclasses import dataclass

from loopbreaker.incidents.records import DEFAULT_MAX_SIGNALS
from loopbreaker.remediation.rules import (
    DEFAULT_MAX_DELETIONS_PER_HOUR,
    DEFAULT_MAX_UNREADY_SHARE,
    OPT_OUT_LABEL,
    OPT_OUT_VALUE,
)
from loopbreaker.settings.model import (
    DEFAULT_CLOUD_STORE,
    DEFAULT_COLLECTION_PREFIX,
    DEFAULT_FIRESTORE_DATABASE,
    DEFAULT_GOOGLE_CHAT_API_URL,
    DEFAULT_LOCAL_STORE,
    DEFAULT_LOG_LEVEL,
    DEFAULT_NOTIFIER,
    DEFAULT_QUERY_BUDGET,
    DEFAULT_SETTLE_BATCH,
    DEFAULT_SLACK_API_URL,
    DEFAULT_SLACK_RESPONSE_URL_PREFIX,
    MIN_SIGNING_KEY_LENGTH,
)


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    description: str


#: The documented variables, in docs/configuration.md order
#: (``python -m loopbreaker.settings.load`` prints them).
VARIABLES: tuple[Variable, ...] = (
    Variable(
        "LOOPBREAKER_STORE",
        f"`{DEFAULT_CLOUD_STORE}` in Cloud Functions, `{DEFAULT_LOCAL_STORE}` locally",
        "Incident store: `firestore` or `sqlite:PATH`.",
    ),
    Variable(
        "LOOPBREAKER_PROJECT",
        "`GOOGLE_CLOUD_PROJECT`, else none",
        "Project of the Firestore database, and of incident keys whose entry names none.",
    ),
    Variable(
        "LOOPBREAKER_PROJECTS",
        "none: every project the sinks deliver",
        "Comma-separated projects the responder serves; an entry from any other project "
        "opens no incident and takes no action, and is counted and logged apart "
        "([fleet.md](fleet.md)).",
    ),
    Variable(
        "LOOPBREAKER_FIRESTORE_DATABASE",
        f"`{DEFAULT_FIRESTORE_DATABASE}`",
        "Firestore database id.",
    ),
    Variable(
        "LOOPBREAKER_COLLECTION_PREFIX",
        f"`{DEFAULT_COLLECTION_PREFIX}`",
        "Prefix of the Firestore collections (`<prefix>_incidents`, `_keys`, `_dedup`, `_hosts`).",
    ),
    Variable(
        "LOOPBREAKER_GROUPING_WINDOW",
        "`30m`",
        "Signals of one key whose event times are within this gap of an incident join it.",
    ),
    Variable(
        "LOOPBREAKER_SETTLE_TIME",
        "`60s`",
        "Diagnose an incident once no signal arrived for this long (debounce).",
    ),
    Variable(
        "LOOPBREAKER_STALE_AFTER",
        "`6h`",
        "An incident awaiting approval longer than this becomes `expired`.",
    ),
    Variable(
        "LOOPBREAKER_VERIFY_WINDOW",
        "`2h`",
        "After `remediated`, watch the workload this long: no restart of the same cause "
        "makes it `verified`, one on the same host (or the new VM on it) `recurred`.",
    ),
    Variable(
        "LOOPBREAKER_VERIFY_EVERY",
        "`10m`",
        "How often `on_schedule` checks a workload under watch (at most "
        "`LOOPBREAKER_SETTLE_BATCH` incidents per run).",
    ),
    Variable(
        "LOOPBREAKER_MAX_SIGNALS",
        f"`{DEFAULT_MAX_SIGNALS}`",
        "Signals kept verbatim per incident (counts per kind stay exact).",
    ),
    Variable(
        "LOOPBREAKER_QUERY_BUDGET",
        f"`{DEFAULT_QUERY_BUDGET}`",
        "PromQL/Logging queries one diagnosis of one incident may run.",
    ),
    Variable(
        "LOOPBREAKER_SETTLE_BATCH",
        f"`{DEFAULT_SETTLE_BATCH}`",
        "Incidents diagnosed per `on_schedule` call; the rest wait for the next call.",
    ),
    Variable(
        "LOOPBREAKER_DEDUP_RETENTION",
        "`8d`",
        "How long delivery dedup keys are kept (Pub/Sub redelivers for up to 7 days).",
    ),
    Variable(
        "LOOPBREAKER_DRY_RUN",
        "`true`",
        "Remediation reads the cluster and VM and records the exact calls it would make, "
        "without sending any mutating request; `false` acts.",
    ),
    Variable(
        "LOOPBREAKER_MAX_DELETIONS_PER_HOUR",
        f"`{DEFAULT_MAX_DELETIONS_PER_HOUR}`",
        "Host repairs (VM deletions, host reports, hand-overs to GKE) per cluster in any "
        "hour, counted in the store; more are refused.",
    ),
    Variable(
        "LOOPBREAKER_MAX_UNREADY_SHARE",
        f"`{DEFAULT_MAX_UNREADY_SHARE:g}`",
        "Circuit breaker: refuse and escalate when more than this share (0-1, or a "
        "percentage such as `30%`) of the node pool is NotReady.",
    ),
    Variable(
        "LOOPBREAKER_NODE_POOLS",
        "all",
        "Comma-separated node pools remediation may touch. Nodes (or pools, whose labels "
        f"GKE copies to nodes) labelled `{OPT_OUT_LABEL}={OPT_OUT_VALUE}` are never touched.",
    ),
    Variable(
        "LOOPBREAKER_DRAIN_MODE",
        "`wait`",
        "`wait`: retry evictions a PodDisruptionBudget blocks until the drain timeout, then "
        "fail with the node cordoned; `delete-after-timeout`: then delete those pods.",
    ),
    Variable(
        "LOOPBREAKER_DRAIN_TIMEOUT",
        "`10m`",
        "How long a drain may take in all (it spans redeliveries).",
    ),
    Variable(
        "LOOPBREAKER_REPAIR_PATH",
        "`auto`",
        "How an approved bad host is repaired ([remediation.md](remediation.md#repair-paths)): "
        "`gke` (label the node for GKE's report-and-replace; loopbreaker evicts and deletes "
        "nothing), `report` (cordon, drain, `instances.reportHostAsFaulty`), `delete` "
        "(cordon, drain, `instances.delete`), or `auto`: `gke` where the node qualifies "
        "(A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High 8-GPU; GKE 1.32.3-gke.1057001 or "
        "later; reservation-bound), else `delete`.",
    ),
    Variable(
        "LOOPBREAKER_HOST_ACTION",
        "none",
        "Deprecated, the old name of `LOOPBREAKER_REPAIR_PATH`: `delete` is `delete`, "
        "`report-faulty` is `report`. Setting both is refused.",
    ),
    Variable(
        "LOOPBREAKER_REPORT_DISRUPTION_SCHEDULE",
        "`immediate`",
        "`reportHostAsFaulty`'s disruption schedule on the `report` path. Compute accepts only "
        '`immediate` today (its v1 discovery document: "Required field, only allows '
        'IMMEDIATE"), so any other value is refused at start-up.',
    ),
    Variable(
        "LOOPBREAKER_GKE_REPAIR_TIMEOUT",
        "`45m`",
        "The `gke` path: how long GKE's report-and-replace may take in all before the "
        "remediation fails with the node cordoned.",
    ),
    Variable(
        "LOOPBREAKER_GKE_REPAIR_STALL",
        "`20m`",
        "The `gke` path: how long `cloud.google.com/report-and-replace-status` may stay "
        "unchanged (no progress) before the remediation fails with the node cordoned.",
    ),
    Variable(
        "LOOPBREAKER_FOREIGN_REMEDIATION_MARKERS",
        "none",
        "Comma-separated `[SYSTEM:]label|annotation|taint:KEY[=VALUE]` that another "
        "remediator leaves on a node it is handling; remediation refuses such a node, naming "
        "the system and the marker. GKE's report-and-replace and maintenance markers are "
        "always checked ([remediation.md](remediation.md#one-owner-per-node)).",
    ),
    Variable(
        "LOOPBREAKER_SUPPORT_PARENT",
        "none",
        "`projects/P` or `organizations/O`: file a Cloud Support case with the ticket draft; "
        "none: the draft stays on the incident and in the message.",
    ),
    Variable(
        "LOOPBREAKER_SUPPORT_CLASSIFICATION",
        "the first `Compute Engine` classification",
        "Case classification id for support cases.",
    ),
    Variable(
        "LOOPBREAKER_KUBECONFIG",
        "the GKE API (`clusters.get`)",
        "Kubeconfig of the cluster to remediate; otherwise its endpoint comes from the GKE "
        "API with the function's own credentials.",
    ),
    Variable(
        "LOOPBREAKER_COMPUTE_ENDPOINT",
        "Google's",
        "Compute Engine API endpoint (tests, private endpoints).",
    ),
    Variable(
        "LOOPBREAKER_SUPPORT_ENDPOINT",
        "Google's",
        "Cloud Support API endpoint (tests, private endpoints).",
    ),
    Variable(
        "LOOPBREAKER_LIVE_SOURCES",
        "`true` in Cloud Functions, `false` locally",
        "Diagnoses query Managed Prometheus (or `LOOPBREAKER_PROMETHEUS_URL`), Cloud "
        "Logging and the GKE API of the incident's project (within the query budget); "
        "`false` uses only the incident's own signals, the telemetry directory and "
        "`LOOPBREAKER_PROMETHEUS_URL`.",
    ),
    Variable(
        "LOOPBREAKER_TELEMETRY_DIR",
        "none",
        "Offline telemetry directory (see `loopbreaker diagnose --telemetry`); with live "
        "sources on, live readers fill in what it lacks.",
    ),
    Variable(
        "LOOPBREAKER_PROMETHEUS_URL",
        "none",
        "Base URL of a self-run Prometheus (kube-prometheus-stack: "
        "`http://kube-prometheus-stack-prometheus.monitoring:9090`) that diagnoses read "
        "metrics from instead of Managed Prometheus and `metrics.om`, as `diagnose "
        "--prometheus-url`; with live sources off, the only live source. No credentials in "
        "the URL.",
    ),
    Variable(
        "LOOPBREAKER_PROMETHEUS_CLUSTER_LABEL",
        "found out from the server",
        "The label that names the cluster on that Prometheus' series (`cluster`, "
        "`cluster_name`, ...), or `none` for a Prometheus of one cluster, as "
        "`diagnose --prometheus-cluster-label`.",
    ),
    Variable(
        "LOOPBREAKER_PROMETHEUS_BEARER_TOKEN",
        "none",
        "Sent to that Prometheus as `Authorization: Bearer` (an auth proxy in front of it).",
    ),
    Variable(
        "LOOPBREAKER_PROMETHEUS_USERNAME",
        "none",
        "HTTP basic auth to that Prometheus (its `--web.config.file` `basic_auth_users`), "
        "with `LOOPBREAKER_PROMETHEUS_PASSWORD`; not with the bearer token.",
    ),
    Variable(
        "LOOPBREAKER_PROMETHEUS_PASSWORD",
        "none",
        "The basic-auth password of `LOOPBREAKER_PROMETHEUS_USERNAME`.",
    ),
    Variable(
        "LOOPBREAKER_NOTIFIER",
        f"`{DEFAULT_NOTIFIER}`",
        "`slack`, `google-chat`, `log` (structured log line) or `file:DIR` (one JSON file "
        "per incident).",
    ),
    Variable(
        "LOOPBREAKER_SLACK_BOT_TOKEN",
        "none",
        "Bot token (`xoxb-…`) for `chat.postMessage` / `chat.update`; needed by `slack`.",
    ),
    Variable("LOOPBREAKER_SLACK_CHANNEL", "none", "Channel id the incident messages go to."),
    Variable(
        "LOOPBREAKER_SLACK_SIGNING_SECRET",
        "none",
        "Verifies `X-Slack-Signature` on button clicks; without it Slack clicks get 401.",
    ),
    Variable(
        "LOOPBREAKER_SLACK_API_URL",
        f"`{DEFAULT_SLACK_API_URL}`",
        "Slack Web API base URL (tests and gateways point it elsewhere).",
    ),
    Variable(
        "LOOPBREAKER_SLACK_RESPONSE_URL_PREFIX",
        f"`{DEFAULT_SLACK_RESPONSE_URL_PREFIX}`",
        "A refused click is answered in an ephemeral message through the interaction's "
        "`response_url`, only when it starts with this (tests point it elsewhere).",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_WEBHOOK_URL",
        "none",
        "Incoming webhook of a Google Chat space (one thread per incident).",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_SPACE",
        "none",
        "`spaces/…`: post and update cards through the Chat API as the Chat app instead.",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_AUDIENCE",
        "none",
        "Audience of Google Chat's bearer tokens (the app's project number or endpoint "
        "URL); without it Google Chat clicks get 401.",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_CERTS_URL",
        "Google's certificates of `chat@system.gserviceaccount.com`",
        "Where the keys that sign Google Chat's tokens are fetched from.",
    ),
    Variable(
        "LOOPBREAKER_GOOGLE_CHAT_API_URL",
        f"`{DEFAULT_GOOGLE_CHAT_API_URL}`",
        "Chat API base URL (with `LOOPBREAKER_GOOGLE_CHAT_SPACE`).",
    ),
    Variable(
        "LOOPBREAKER_APPROVERS",
        "none",
        "Comma-separated Slack user ids and/or Google Chat emails who may approve or reject "
        "(`slack:` / `google-chat:` may say which); a Slack click matches only user ids, a "
        "Chat click only emails. None: approvals are off. With `LOOPBREAKER_ROUTES`, each "
        "route's `approvers` replace this list for its incidents; this list still pauses "
        "and resumes remediation.",
    ),
    Variable(
        "LOOPBREAKER_ROUTES",
        "none: one channel for every incident",
        "A route file (its path, or the YAML itself): which channel hears about each incident "
        "and who may approve its repair, by project, cluster, namespace, workload and root "
        "cause ([fleet.md](fleet.md)). A file that cannot be used stops the start.",
    ),
    Variable(
        "LOOPBREAKER_ACTION_SIGNING_KEY",
        "none",
        f"HMAC-SHA256 key (at least {MIN_SIGNING_KEY_LENGTH} characters) that signs the action "
        "request in every button; none: no buttons, the message says approvals are off.",
    ),
    Variable(
        "LOOPBREAKER_APPROVAL_TTL",
        "`30m`",
        "How long an approval request and its buttons are valid (at most `24h`, and never "
        "longer than `LOOPBREAKER_STALE_AFTER`); then the incident becomes `expired`.",
    ),
    Variable(
        "LOOPBREAKER_REMEDIATION_TOPIC",
        "none",
        "`projects/P/topics/T` (or `T` with a project) that approved remediation requests are "
        "published to; required by `on_chat_action` in Cloud Functions, locally they are "
        "logged.",
    ),
    Variable(
        "LOOPBREAKER_WORKLOAD_KIND",
        "`jobset`",
        "`jobset`, `tfjob` or `pytorchjob`: the kind of a workload whose signals do not say "
        "(pod labels, Event kinds and alert labels do).",
    ),
    Variable(
        "LOOPBREAKER_ALERT_WEBHOOK_TOKEN",
        "none",
        "Bearer token `on_alertmanager_webhook` accepts (`Authorization: Bearer`, or "
        "`?auth_token=` for Cloud Monitoring webhook channels).",
    ),
    Variable(
        "LOOPBREAKER_ALERT_WEBHOOK_BASIC_AUTH",
        "none",
        "`user:password` that `on_alertmanager_webhook` accepts as HTTP basic auth. With "
        "neither this nor the token set, every request is refused (401).",
    ),
    Variable(
        "LOOPBREAKER_ALERT_CLUSTER",
        "none",
        "Cluster of alerts that carry no `cluster` label (a Prometheus per cluster).",
    ),
    Variable(
        "LOOPBREAKER_<SECRET>_SECRET_NAME",
        "none",
        "For `SLACK_BOT_TOKEN`, `SLACK_SIGNING_SECRET`, `GOOGLE_CHAT_WEBHOOK_URL`, "
        "`ACTION_SIGNING_KEY`, `ALERT_WEBHOOK_TOKEN`, `ALERT_WEBHOOK_BASIC_AUTH`, "
        "`PROMETHEUS_BEARER_TOKEN` and `PROMETHEUS_PASSWORD`: a Secret Manager version "
        "(`projects/P/secrets/S/versions/V`) read once at start instead of the value.",
    ),
    Variable(
        "LOOPBREAKER_<SECRET>_FILE",
        "none",
        "For the same secrets: a file holding the value (a mounted Kubernetes Secret), read "
        "once at start; a trailing newline is dropped. One of the value, `_SECRET_NAME` and "
        "`_FILE`.",
    ),
    Variable(
        "LOOPBREAKER_LOG_LEVEL",
        f"`{DEFAULT_LOG_LEVEL}`",
        "`DEBUG`, `INFO`, `WARNING` or `ERROR`.",
    ),
)


def markdown_table() -> str:
    """The table in docs/configuration.md of variables and defaults."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {v.default} | {v.description} |" for v in VARIABLES]
    return "\n".join(rows)
