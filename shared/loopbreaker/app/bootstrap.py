"""The one wiring place: settings in, a Responder with real, dry-run or given ports out.

Entry points call :func:`build_responder` once and cache the result. Anything passed in
(tests pass fakes) is used as is; anything else is built from the settings, lazily, so
client libraries are imported only by the code path that needs them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from loopbreaker import logs
from loopbreaker.approval.requests import ComputeRead, Target
from loopbreaker.chat.notify import FileNotifier, LogNotifier, Notifier
from loopbreaker.diagnosis.evidence import EvidenceProvider, NoEvidence, TelemetryDirEvidence
from loopbreaker.incidents import Incident
from loopbreaker.incidents.store.base import IncidentStore
from loopbreaker.remediation.queue import LogQueue, PubSubQueue, RemediationQueue
from loopbreaker.responder.pod_owners import PodDirectory, PodWorkloads
from loopbreaker.responder.service import Approvals, Clock, Responder, system_clock
from loopbreaker.settings.load import Settings, StoreKind

if TYPE_CHECKING:
    from loopbreaker.app.alert_webhook import AlertWebhook
    from loopbreaker.app.chat_actions import ChatActions
    from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
    from loopbreaker.remediation.executor import ActuatorFactory, Remediator


def build_store(settings: Settings) -> IncidentStore:
    if settings.store.kind is StoreKind.FIRESTORE:
        from loopbreaker.incidents.store.firestore import FirestoreStore

        return FirestoreStore.connect(
            project=settings.project,
            database=settings.firestore_database,
            prefix=settings.collection_prefix,
            dedup_retention=settings.dedup_retention,
            max_signals=settings.max_signals,
        )
    from loopbreaker.incidents.store.sqlite import SqliteStore

    assert settings.store.path is not None  # load_settings guarantees a path for sqlite
    return SqliteStore(settings.store.path)


def build_notifier(settings: Settings) -> Notifier:
    """The notifier LOOPBREAKER_NOTIFIER names; secrets must be resolved already."""
    chat = settings.chatops
    kind = settings.notifier.kind
    if kind == "file" and settings.notifier.path is not None:
        return FileNotifier(settings.notifier.path)
    if kind == "slack":
        from loopbreaker.chat.clients import SlackNotifier

        assert chat.slack_bot_token is not None and chat.slack_channel is not None
        return SlackNotifier(
            chat.slack_bot_token.get(), chat.slack_channel, base_url=chat.slack_api_url
        )
    if kind == "google-chat":
        from loopbreaker.chat.clients import GoogleChatNotifier

        webhook = chat.google_chat_webhook_url
        return GoogleChatNotifier(
            webhook_url=webhook.get() if webhook else None,
            space=chat.google_chat_space,
            api_url=chat.google_chat_api_url,
        )
    return LogNotifier()


def build_queue(settings: Settings) -> RemediationQueue:
    """Approved remediation requests go to the topic; locally, without one, to the log."""
    topic = settings.chatops.remediation_topic
    # load_settings refuses approvals without a topic in the cloud runtime.
    return PubSubQueue(topic) if topic is not None else LogQueue()


def resolve_secrets(settings: Settings) -> Settings:
    """Read every ``..._SECRET_NAME`` once; a no-op when all secrets are given by value."""
    from loopbreaker.settings.secrets import resolve

    return resolve(settings)


def build_evidence(settings: Settings) -> EvidenceProvider:
    """Evidence from the sources the settings name; secrets must be resolved already."""
    prometheus = settings.prometheus
    if settings.live_sources or prometheus.url is not None:
        # Live readers fill in what the telemetry directory (if any) lacks; a source that
        # answers 401/403 or not at all marks its evidence unavailable, nothing raises.
        from loopbreaker.diagnosis.readers.sources import LiveEvidence, SourceOptions

        token, password = prometheus.bearer_token, prometheus.password
        options = SourceOptions(
            telemetry_dir=settings.telemetry_dir,
            # A self-run Prometheus is named explicitly: it wins over Managed Prometheus
            # and the directory's metrics.om, as --prometheus-url does.
            prometheus_url=prometheus.url,
            prometheus_cluster_label=prometheus.cluster_label,
            prometheus_bearer_token=token.get() if token is not None else None,
            prometheus_basic_auth=(
                (prometheus.username, password.get())
                if prometheus.username is not None and password is not None
                else None
            ),
        )
        # Live sources off: the named Prometheus only, as `diagnose --offline` with one.
        return LiveEvidence(options if settings.live_sources else options.offline())
    if settings.telemetry_dir is not None:
        return TelemetryDirEvidence(settings.telemetry_dir)
    return NoEvidence("live sources are off and no LOOPBREAKER_TELEMETRY_DIR is set")


def build_responder(
    settings: Settings,
    *,
    store: IncidentStore | None = None,
    notifier: Notifier | None = None,
    evidence: EvidenceProvider | None = None,
    clock: Clock | None = None,
    queue: RemediationQueue | None = None,
    approval_clock: Clock | None = None,
    pod_workloads: PodWorkloads | None = None,
    compute: ComputeRead | None = None,
) -> Responder:
    """Wire a Responder; every port not given is built from ``settings``."""
    _warn_unknown(settings)
    settings = resolve_secrets(settings)
    store = store if store is not None else build_store(settings)
    return Responder(
        settings=settings,
        store=store,
        notifier=notifier if notifier is not None else build_notifier(settings),
        evidence=evidence if evidence is not None else build_evidence(settings),
        clock=clock if clock is not None else system_clock,
        approvals=Approvals.of(settings),
        queue=queue if queue is not None else build_queue(settings),
        approval_clock=approval_clock,
        pod_workloads=pod_workloads or build_pod_workloads(settings, store),
        compute=compute if compute is not None else build_compute_read(settings),
    )


def build_compute_read(settings: Settings) -> ComputeRead | None:
    """Compute Engine's ``instances.get`` for the approval request, where live sources are on
    (the responder may read VMs); None otherwise, and the card states the rule instead."""
    if not settings.live_sources:
        return None
    from loopbreaker.approval.repair import ComputeFacts
    from loopbreaker.errors import ActionFailed
    from loopbreaker.remediation.actuators.compute import ComputeVms

    endpoint = settings.remediation.compute_endpoint
    vms = ComputeVms(api_endpoint=endpoint, credentials=_credentials_for(endpoint))

    def read(project: str, zone: str, instance: str) -> ComputeFacts | str:
        try:
            found = vms.get_instance(project, zone, instance)
        except ActionFailed as exc:
            return str(exc)
        if found is None:
            return f"Compute Engine has no VM {instance} in {zone}"
        return ComputeFacts(
            provisioning_model=found.provisioning_model,
            reservation_type=found.reservation_type,
            machine_type=found.machine_type,
            status=found.status,
        )

    return read


def _credentials_for(endpoint: str | None) -> GoogleCredentials | None:
    """Never send a bearer token in clear text: a plain-http endpoint (a local test server,
    a sidecar proxy) is called without credentials; None: the default credentials."""
    if endpoint and endpoint.startswith("http://"):
        from google.auth.credentials import AnonymousCredentials

        from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials

        return GoogleCredentials(AnonymousCredentials())  # type: ignore[no-untyped-call]
    return None


def build_pod_workloads(settings: Settings, store: IncidentStore) -> PodWorkloads:
    """The pod directory the settings name: the telemetry directory's pods.json, else the
    cluster's Kubernetes API when live sources are on, else the incident store alone."""
    from loopbreaker.responder.pod_owners import KubernetesPods, TelemetryPods

    directory: PodDirectory | None = None
    if settings.telemetry_dir is not None:
        directory = TelemetryPods(settings.telemetry_dir)
    elif settings.live_sources:
        directory = KubernetesPods.for_settings(settings)
    return PodWorkloads(store, directory, default_project=settings.project)


def build_chat_actions(
    settings: Settings,
    *,
    store: IncidentStore | None = None,
    notifier: Notifier | None = None,
    queue: RemediationQueue | None = None,
    clock: Clock | None = None,
    google_chat_request: object = None,
) -> ChatActions:
    """Wire the service behind ``on_chat_action``. It can publish, never act on nodes."""
    from loopbreaker.app.chat_actions import ChatActions
    from loopbreaker.approval.verify import GoogleChatVerifier, SlackVerifier
    from loopbreaker.chat.clients import SlackResponseUrl

    _warn_unknown(settings)
    settings = resolve_secrets(settings)
    chat = settings.chatops
    now = clock if clock is not None else system_clock
    key = chat.action_signing_key
    return ChatActions(
        store=store if store is not None else build_store(settings),
        queue=queue if queue is not None else build_queue(settings),
        notifier=notifier if notifier is not None else build_notifier(settings),
        clock=now,
        signing_key=key.get().encode() if key is not None else None,
        approvers=chat.approvers,
        routes=chat.routes,
        slack=(
            SlackVerifier(chat.slack_signing_secret.get(), now)
            if chat.slack_signing_secret is not None
            else None
        ),
        google_chat=(
            GoogleChatVerifier(
                chat.google_chat_audience, chat.google_chat_certs_url, request=google_chat_request
            )
            if chat.google_chat_audience
            else None
        ),
        slack_replies=(
            SlackResponseUrl(chat.slack_response_url_prefix)
            if chat.slack_signing_secret is not None
            else None
        ),
    )


def build_alert_webhook(settings: Settings, *, responder: Responder | None = None) -> AlertWebhook:
    """Wire ``on_alertmanager_webhook`` around the responder ``on_log_entry`` uses (one
    store, one incident for a failure that both a log sink and an alert report)."""
    from loopbreaker.app.alert_webhook import AlertWebhook

    settings = resolve_secrets(settings)
    chat = settings.chatops
    token, basic = chat.alert_webhook_token, chat.alert_webhook_basic_auth
    if token is None and basic is None:
        logs.event(
            logs.get_logger("bootstrap"),
            logging.WARNING,
            "on_alertmanager_webhook refuses every request: set LOOPBREAKER_ALERT_WEBHOOK_TOKEN "
            "or LOOPBREAKER_ALERT_WEBHOOK_BASIC_AUTH",
            event="alert_webhook_unconfigured",
        )
    return AlertWebhook(
        responder if responder is not None else build_responder(settings),
        token=token.get() if token is not None else None,
        basic_auth=basic.get() if basic is not None else None,
        default_cluster=settings.alert_cluster,
    )


def _warn_unknown(settings: Settings) -> None:
    if settings.unknown:
        logs.event(
            logs.get_logger("bootstrap"),
            logging.WARNING,
            f"unknown settings ignored: {', '.join(settings.unknown)}",
            event="unknown_settings",
        )


def build_remediator(
    settings: Settings,
    *,
    store: IncidentStore | None = None,
    notifier: Notifier | None = None,
    clock: Clock | None = None,
    actuators: ActuatorFactory | None = None,
    credentials: GoogleCredentials | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Remediator:
    """Wire the executor behind ``on_remediation_request`` and ``loopbreaker remediate``."""
    from loopbreaker.remediation.executor import Remediator

    _warn_unknown(settings)
    settings = resolve_secrets(settings)
    return Remediator(
        store=store if store is not None else build_store(settings),
        actuators=actuators if actuators is not None else build_actuators(settings, credentials),
        support_parent=settings.remediation.support_parent,
        notifier=notifier if notifier is not None else build_notifier(settings),
        clock=clock if clock is not None else system_clock,
        policy=settings.remediation.policy,
        sleep=sleep,
        verify_window=settings.verify_window,
        verify_every=settings.verify_every,
        routes=settings.chatops.routes,
    )


def build_actuators(
    settings: Settings, credentials: GoogleCredentials | None = None
) -> ActuatorFactory:
    """Real actuators, or (LOOPBREAKER_DRY_RUN, the default) dry-run ones that only read.

    The choice is made here and only here: the adapters know nothing of dry runs.
    """
    from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
    from loopbreaker.errors import ActionFailed
    from loopbreaker.remediation.actuators import (
        DryRunNodes,
        DryRunSupport,
        DryRunVms,
        LazyEvents,
        LazyNodes,
        MemoryEvents,
        NodeEvents,
        Nodes,
        Recorder,
        Unavailable,
    )
    from loopbreaker.remediation.actuators.compute import ComputeVms
    from loopbreaker.remediation.actuators.kube import KubernetesNodes
    from loopbreaker.remediation.actuators.support import SupportApiCases
    from loopbreaker.remediation.executor import Actuators

    config = settings.remediation
    creds = credentials or GoogleCredentials()

    def for_endpoint(endpoint: str | None) -> GoogleCredentials:
        return (None if credentials is not None else _credentials_for(endpoint)) or creds

    vms = ComputeVms(
        api_endpoint=config.compute_endpoint, credentials=for_endpoint(config.compute_endpoint)
    )
    support = (
        SupportApiCases(
            classification=config.support_classification,
            api_endpoint=config.support_endpoint,
            credentials=for_endpoint(config.support_endpoint),
        )
        if config.support_parent
        else None
    )

    def nodes_for(incident: Incident, target: Target) -> Nodes:
        if config.kubeconfig is not None:
            kubeconfig = config.kubeconfig
            return LazyNodes(lambda: KubernetesNodes.from_kubeconfig(kubeconfig))
        if not (target.cluster and incident.location):
            reason = (
                "no LOOPBREAKER_KUBECONFIG, and the incident names no cluster and location "
                "for the GKE API"
            )
            return Unavailable(reason)
        location, cluster = incident.location, target.cluster
        return LazyNodes(
            lambda: KubernetesNodes.from_gke(
                target.project, location, cluster, token_provider=lambda: creds.token("gke")
            )
        )

    def events_of(nodes: Nodes) -> NodeEvents:
        inner = nodes.unwrap() if isinstance(nodes, LazyNodes) else nodes
        if isinstance(inner, KubernetesNodes):
            return inner.events()
        raise ActionFailed("no Kubernetes API to write Events to")

    def factory(incident: Incident, target: Target) -> Actuators:
        nodes = nodes_for(incident, target)
        if not config.policy.dry_run:
            return Actuators(nodes, vms, support, events=LazyEvents(lambda: events_of(nodes)))
        recorder = Recorder()
        # A dry run writes no Event either: they are kept in memory, never sent.
        return Actuators(
            DryRunNodes(nodes, recorder),
            DryRunVms(vms, recorder),
            DryRunSupport(recorder) if support is not None else None,
            recorder,
            events=MemoryEvents(),
        )

    return factory
