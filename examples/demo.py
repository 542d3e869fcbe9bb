"""Run loopbreaker on every bundled example, the way a user would from a shell.

The chat-ops part posts the faulty-host incident to a local server that speaks Slack's
Web API (the one the tests use), serves ``on_chat_action`` with functions-framework, and
clicks Approve by sending the request Slack would send, signed with the signing secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLI = Path(sys.executable).with_name("loopbreaker")
DEMO_DIR = ROOT / ".loopbreaker" / "demo"
SIGNING_SECRET = "demo-slack-signing-secret-0123456789"
APPROVER = "U0DEMOAPPR"
CHANNEL = "C0LOOPBRK"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    shown = " ".join(shlex.quote(a) for a in ["loopbreaker", *argv[1:]])
    print(f"$ {shown}", flush=True)
    full_env = {**os.environ, **env} if env else None
    return subprocess.run(argv, text=True, capture_output=True, check=False, env=full_env)


#: The scenario whose ``--format json`` verdict the demo prints, shortened.
JSON_SHOWN = "faulty-host"
#: Nested values up to this many characters of JSON are shown whole.
SHORT = 100


def scenarios() -> list[Path]:
    """The scenario.json of every example the demo diagnoses."""
    return sorted((HERE / "telemetry").glob("*/scenario.json"))


def storm_files() -> list[Path]:
    """The event storms the demo replays."""
    return sorted((HERE / "events").glob("*.jsonl"))


def shortened(verdict: dict[str, Any]) -> str:
    """The verdict's JSON with its long nested values cut to their size, to fit a screen."""
    short: dict[str, Any] = {}
    for key, value in verdict.items():
        if len(json.dumps(value, ensure_ascii=False)) <= SHORT:
            short[key] = value
        elif isinstance(value, list):
            short[key] = f"… {len(value)} item(s)" if value else []
        elif isinstance(value, dict):
            short[key] = f"… {len(value)} key(s): {', '.join(value)}" if value else {}
        else:
            short[key] = value
    return json.dumps(short, indent=2, ensure_ascii=False)


def diagnose_scenarios() -> int:
    failures = 0
    for scenario in scenarios():
        spec = json.loads(scenario.read_text())
        ctx = spec["context"]
        argv = [str(CLI), "diagnose"]
        keys = ("project", "location", "cluster", "namespace", "workload", "workload_kind")
        for key in (*keys, "issue_time"):
            if ctx.get(key):
                argv += [f"--{key.replace('_', '-')}", ctx[key]]
        argv += ["--telemetry", str(scenario.parent.relative_to(Path.cwd()))]
        print(f"\n=== {scenario.parent.name}: {spec.get('description', '')}")
        text = run(argv)
        sys.stdout.write(text.stdout)
        if text.returncode != 0:
            sys.stdout.write(text.stderr)
            failures += 1
            continue
        verdict = json.loads(run([*argv, "--format", "json"]).stdout)
        if scenario.parent.name == JSON_SHOWN:
            print(shortened(verdict))
            print("(shortened: nested values cut to their size; docs/diagnosis.md has them all)")
        expected = spec["expect"]["root_cause"]
        mark = "as expected" if verdict["root_cause"] == expected else f"EXPECTED {expected}"
        print(f"--> root_cause {verdict['root_cause']} ({mark})")
        failures += verdict["root_cause"] != expected
    return failures


def replay_storm() -> int:
    events = storm_files()
    if not events:
        return 0
    print("\n=== event storm replayed through the same service as the Cloud Function")
    result = run([str(CLI), "replay", *(str(p.relative_to(Path.cwd())) for p in events)])
    sys.stdout.write(result.stdout)
    return int(result.returncode != 0)


def approve_in_chat() -> int:
    """Faulty host -> Slack message with buttons -> signed Approve click -> approved."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fakeservers.slack import SlackServer
    from harness import start_function, start_pubsub_emulator

    print("\n=== chat-ops: the faulty-host incident in Slack, approved through on_chat_action")
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir(parents=True)
    store = DEMO_DIR / "incidents.sqlite"
    faulty = HERE / "telemetry" / "faulty-host"
    with SlackServer(token="xoxb-demo-token", channels={CHANNEL}) as slack:
        env = {
            "LOOPBREAKER_STORE": f"sqlite:{store}",
            "LOOPBREAKER_NOTIFIER": "slack",
            "LOOPBREAKER_SLACK_BOT_TOKEN": "xoxb-demo-token",
            "LOOPBREAKER_SLACK_CHANNEL": CHANNEL,
            "LOOPBREAKER_SLACK_API_URL": slack.api_url,
            "LOOPBREAKER_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "LOOPBREAKER_ACTION_SIGNING_KEY": "demo-action-signing-key-0123456789",
            "LOOPBREAKER_APPROVERS": APPROVER,
            "LOOPBREAKER_LIVE_SOURCES": "false",
            "LOOPBREAKER_LOG_LEVEL": "WARNING",
        }
        replayed = run(
            [
                str(CLI),
                "replay",
                str((faulty / "logs.json").relative_to(Path.cwd())),
                "--telemetry",
                str(faulty.relative_to(Path.cwd())),
                "--store",
                str(store.relative_to(Path.cwd())),
            ],
            env,
        )
        sys.stdout.write(replayed.stdout)
        if replayed.returncode != 0 or not slack.messages:
            sys.stdout.write(replayed.stderr)
            return 1
        # The message asking for the approval: on the live timeline the first failure's
        # messages (host_error, nothing to approve) were posted before it.
        posted = max(
            (m for m in slack.messages.values() if "approve_remediation" in json.dumps(m)),
            key=lambda m: float(m["ts"]),
            default=slack.latest(),
        )
        approve = next(
            dict(e)
            for b in posted.get("blocks") or []
            if b.get("type") == "actions"
            for e in b.get("elements") or []
            if e.get("action_id") == "approve_remediation"
        )
        print(f"\nSlack message {posted['ts']} in {CHANNEL}: {posted['text'].splitlines()[0]}")
        buttons = [
            e["action_id"]
            for b in posted["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
        ]
        print(f"  buttons: {', '.join(buttons)}")
        print(f"  confirm: {approve['confirm']['text']['text']}")

        # on_chat_action as deployed: functions-framework, the remediation topic on the
        # Pub/Sub emulator. Two clicks: the second is refused, nothing is published twice.
        with start_pubsub_emulator(project="demo-project") as pubsub:
            topic = "projects/demo-project/topics/loopbreaker-remediation"
            pulled = _subscribe(pubsub.env, topic)
            function_env = {
                **env,
                **pubsub.env,
                "LOOPBREAKER_REMEDIATION_TOPIC": topic,
                "LOOPBREAKER_LOG_LEVEL": "ERROR",
            }
            source = ROOT / "functions" / "main.py"
            with start_function("on_chat_action", source, "http", function_env) as served:
                payload = _block_actions(posted["ts"], approve["value"])
                for attempt in ("click", "second click"):
                    status, reply = _signed_post(served.url, payload)
                    print(f"\nPOST on_chat_action ({attempt}, signed as Slack signs) -> {status}")
                    print(f"  {reply['text']}")
            requests = pulled()
            print(f"\nRemediation requests on {topic}: {len(requests)}")
            for request in requests:
                target = request["target"]
                print(
                    f"  {request['dedup_id']}: {request['action']} node {target['node']} "
                    f"(VM id {target['instance_id']}), approved by {request['approved_by']}"
                )
            if len(requests) != 1 or slack.methods().count("chat.update") < 1:
                print("expected one published request and an updated Slack message")
                return 1
        note = slack.messages[(CHANNEL, posted["ts"])]["blocks"][-2]["elements"][0]["text"]
        print(f"Slack message updated in place: {note}")
        store_arg = str(store.relative_to(Path.cwd()))
        listed = run([str(CLI), "incidents", "list", "--store", store_arg])
        sys.stdout.write(listed.stdout)
        # The approved incident is the one the published request names, wherever the
        # list puts it.
        incident_id = requests[0]["incident_id"]
        shown = run([str(CLI), "incidents", "show", incident_id, "--store", store_arg])
        sys.stdout.write(shown.stdout)
        if shown.returncode != 0 or ": approved" not in shown.stdout:
            return 1
        return remediation_plan(incident_id, store_arg)


def remediation_plan(incident_id: str, store_arg: str) -> int:
    """The dry-run plan of the approved incident, against a local cluster and Compute API."""
    import remedkit
    from fakeservers.cluster import ClusterServer
    from fakeservers.compute_ops import ComputeOpsServer
    from fakeservers.kube import write_kubeconfig

    print("\n=== remediation (dry run): what on_remediation_request would do")
    nodes, pods = remedkit.cluster_objects()
    vm = (remedkit.PROJECT, remedkit.ZONE, remedkit.NODE)
    spec = {"id": remedkit.INSTANCE_ID, "physicalHost": remedkit.HOST}
    with ClusterServer(nodes, pods) as kube, ComputeOpsServer({vm: spec}) as compute:
        kubeconfig = write_kubeconfig(DEMO_DIR / "kubeconfig", kube.url)
        argv = [str(CLI), "remediate", incident_id, "--store", store_arg, "--dry-run"]
        argv += ["--kubeconfig", str(kubeconfig.relative_to(Path.cwd()))]
        argv += ["--compute-endpoint", compute.url]
        planned = run(argv, {"LOOPBREAKER_LOG_LEVEL": "WARNING"})
        sys.stdout.write(planned.stdout)
        if planned.returncode != 0 or kube.mutations or compute.deletes:
            sys.stdout.write(planned.stderr)
            return 1
        print("(no mutating request was sent: the local cluster and Compute API saw only reads)")
    return remediate_and_verify(incident_id, store_arg)


WORKLOAD = "llama3-70b-training"


def remediate_and_verify(incident_id: str, store_arg: str) -> int:
    """Remediate for real against the LOCAL stand-ins, then check the outcome as on_schedule
    does two hours later (simulated clock), with the job's restart counter flat since."""
    import remedkit
    from fakeservers.cluster import ClusterServer
    from fakeservers.compute_ops import ComputeOpsServer
    from fakeservers.kube import write_kubeconfig

    print(
        "\n=== remediation, live against the local stand-ins of the cluster and Compute API "
        "(no real cluster or VM is touched)"
    )
    nodes, pods = remedkit.cluster_objects()
    vm = (remedkit.PROJECT, remedkit.ZONE, remedkit.NODE)
    spec = {"id": remedkit.INSTANCE_ID, "physicalHost": remedkit.HOST}
    with ClusterServer(nodes, pods) as kube, ComputeOpsServer({vm: spec}) as compute:
        kubeconfig = write_kubeconfig(DEMO_DIR / "kubeconfig", kube.url)
        argv = [str(CLI), "remediate", incident_id, "--store", store_arg, "--no-dry-run"]
        argv += ["--kubeconfig", str(kubeconfig.relative_to(Path.cwd()))]
        argv += ["--compute-endpoint", compute.url]
        done = run(argv, {"LOOPBREAKER_LOG_LEVEL": "ERROR"})
        sys.stdout.write(done.stdout)
        if done.returncode != 0:
            sys.stdout.write(done.stderr)
            return 1
        print(f"Events on node {remedkit.NODE}: {', '.join(kube.event_reasons())}")
    return verify(incident_id, store_arg)


def verify(incident_id: str, store_arg: str) -> int:
    from datetime import timedelta

    sys.path.insert(0, str(ROOT / "shared"))
    from loopbreaker.app.bootstrap import build_responder
    from loopbreaker.diagnosis.evidence import TelemetryDirEvidence
    from loopbreaker.incidents.store.sqlite import SqliteStore
    from loopbreaker.settings.load import load_settings

    store = SqliteStore(store_arg.removeprefix("sqlite:"))
    try:
        incident = store.get(incident_id)
        check = incident.verification if incident else None
        if check is None:
            print("the remediated incident is not under watch")
            return 1
        later = check.until + timedelta(minutes=1)
        # What Managed Prometheus would hold by then: the JobSet's restart counter, flat
        # since the remediation, and the job's pods on the other, healthy nodes.
        after = DEMO_DIR / "after-remediation"
        after.mkdir(parents=True, exist_ok=True)
        series = f'{{cluster="tpu-cluster-prod",namespace="default",jobset_name="{WORKLOAD}"}}'
        start = int(check.since.timestamp()) - 600
        lines = ["# TYPE kube_jobset_restarts gauge"]
        lines += [
            f"kube_jobset_restarts{series} 8 {t}" for t in range(start, int(later.timestamp()), 300)
        ]
        (after / "metrics.om").write_text("\n".join([*lines, "# EOF", ""]))
        faulty = HERE / "telemetry" / "faulty-host"
        for name in ("nodes.json", "pods.json"):
            shutil.copyfile(faulty / name, after / name)
        settings = load_settings(
            {
                "LOOPBREAKER_STORE": f"sqlite:{store_arg}",
                "LOOPBREAKER_NOTIFIER": "log",
                "LOOPBREAKER_LOG_LEVEL": "ERROR",
            }
        )
        responder = build_responder(
            settings, store=store, evidence=TelemetryDirEvidence(after), clock=lambda: later
        )
        print(
            f"\n=== on_schedule at {later:%Y-%m-%d %H:%M}Z (simulated: the end of the "
            f"{(check.until - check.since).total_seconds() / 3600:g} h verify window)"
        )
        report = responder.settle(later)
        print(f"checked {report.checked}, verified {report.verified}, recurred {report.recurred}")
    finally:
        store.close()
    shown = run([str(CLI), "incidents", "show", incident_id, "--store", store_arg])
    for line in shown.stdout.splitlines():
        if line.startswith(("Incident ", "  verify:", "            ")):
            print(line)
    reported = run([str(CLI), "incidents", "report", "--since", "366d", "--store", store_arg])
    sys.stdout.write(reported.stdout)
    print(
        "(the replay ran at the bundled entries' own time, months ago, and the approval now: "
        "the report measures each clock apart)"
    )
    return 0 if report.verified == [incident_id] and reported.returncode == 0 else 1


def _block_actions(message_ts: str, value: str) -> dict[str, Any]:
    """The interaction payload Slack posts when the approver clicks the button."""
    return {
        "type": "block_actions",
        "user": {"id": APPROVER, "username": "demo-oncall", "name": "demo-oncall"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL},
        "actions": [{"type": "button", "action_id": "approve_remediation", "value": value}],
    }


def _subscribe(env: dict[str, str], topic: str) -> Any:
    """Create ``topic`` with a pull subscription; returns a function that drains it."""
    os.environ.update(env)  # the Pub/Sub client library finds the emulator through it
    from google.cloud import pubsub_v1

    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    publisher.create_topic(name=topic)
    subscription = topic.replace("/topics/", "/subscriptions/") + "-demo"
    subscriber.create_subscription(request={"name": subscription, "topic": topic})

    def pull() -> list[dict[str, Any]]:
        response = subscriber.pull(
            request={"subscription": subscription, "max_messages": 10}, timeout=10
        )
        return [json.loads(m.message.data) for m in response.received_messages]

    return pull


def _signed_post(url: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    ts = str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
    }
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with DIRECT.open(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def main() -> int:
    failures = diagnose_scenarios() + replay_storm() + approve_in_chat()
    outcome = f"{failures} problem(s)" if failures else "all verdicts as expected"
    print(f"\ndemo finished: {outcome}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
