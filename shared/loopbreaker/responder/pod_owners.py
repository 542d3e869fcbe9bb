"""The workload of a pod that an Event or audit entry names only by its name.

Kubernetes Events about a pod (``Evicted``, ``Preempted``, image pulls, ``FailedScheduling``)
carry no pod labels, so the classifier cannot say which workload they are about. This
module resolves it, cheapest first:

1. the pod-name rules of JobSet and Kubeflow (:func:`~loopbreaker.signals.labels.
   workload_candidates`), kept only when the incident store already knows that workload;
2. else a directory of pods (``pods.json`` of a telemetry directory, or the cluster's
   Kubernetes API), whose labels name the workload; answers are cached, bounded.

A pod nothing confirms keeps no workload: a name alone proves nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from loopbreaker import incidents
from loopbreaker.errors import LoopbreakerError, SourceUnavailable
from loopbreaker.incidents.store import IncidentStore
from loopbreaker.logs import get_logger
from loopbreaker.model import Evidence, PodInfo, Signal, SignalKind
from loopbreaker.signals.labels import workload_candidates

if TYPE_CHECKING:
    from loopbreaker.diagnosis.readers.kube import KubernetesReader
    from loopbreaker.settings.load import Settings

#: Pods whose workload is remembered (answers, and pods no source knows).
DEFAULT_CACHE_SIZE = 4096
#: A namespace's pods are listed again at most this often (seconds): a restarted JobSet
#: has new pods, and a storm of Events must not become a storm of list calls.
DEFAULT_RELIST_AFTER = 30.0

Owner = tuple[str, str | None]  # (workload, workload kind)
Owned = tuple[str, str]  # (namespace, workload)


class PodDirectory(Protocol):
    """Where the pods of a cluster are listed with their workloads."""

    def pods(self, signal: Signal) -> tuple[PodInfo, ...]:
        """The pods of the signal's cluster and namespace; LoopbreakerError when they
        cannot be read."""
        ...


class TelemetryPods:
    """The pods of a telemetry directory's ``pods.json`` (a replay with --telemetry)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._loaded: tuple[PodInfo, ...] | None = None

    def pods(self, signal: Signal) -> tuple[PodInfo, ...]:
        if self._loaded is None:
            from loopbreaker.diagnosis.telemetry import PODS_FILE, load_pods

            path = self._directory / PODS_FILE
            self._loaded = load_pods(path) if path.is_file() else ()
        return tuple(p for p in self._loaded if p.namespace in (None, signal.namespace))


class KubernetesPods:
    """A cluster's pods through the Kubernetes API: a kubeconfig's cluster, else GKE's
    endpoint for the signal's project, location and cluster (one reader each)."""

    def __init__(
        self,
        *,
        kubeconfig: Path | None = None,
        token: Callable[[], str] | None = None,
        default_project: str | None = None,
        container_endpoint: str | None = None,
    ) -> None:
        self._kubeconfig = kubeconfig
        self._token = token
        self._project = default_project
        self._endpoint = container_endpoint
        self._readers: dict[tuple[str | None, str | None, str | None], KubernetesReader] = {}

    @classmethod
    def for_settings(cls, settings: Settings) -> KubernetesPods:
        from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials

        credentials = GoogleCredentials()
        return cls(
            kubeconfig=settings.remediation.kubeconfig,
            token=lambda: credentials.token("gke"),
            default_project=settings.project,
        )

    def pods(self, signal: Signal) -> tuple[PodInfo, ...]:
        return self._reader(signal).pods(signal.namespace)

    def _reader(self, signal: Signal) -> KubernetesReader:
        from loopbreaker.diagnosis.readers.kube import GKE_ENDPOINT, KubernetesReader

        project = signal.project or self._project
        where = (project, signal.location, signal.cluster)
        reader = self._readers.get(where)
        if reader is not None:
            return reader
        if self._kubeconfig is not None:
            reader = KubernetesReader.from_kubeconfig(self._kubeconfig)
        elif project and signal.location and signal.cluster and self._token is not None:
            reader = KubernetesReader.from_gke(
                project,
                signal.location,
                signal.cluster,
                token_provider=self._token,
                container_endpoint=self._endpoint or GKE_ENDPOINT,
            )
        else:
            raise SourceUnavailable(
                "kubernetes", "the signal names no project, location and cluster to reach"
            )
        self._readers[where] = reader
        return reader


class PodWorkloads:
    """Fills in the workload of signals that name a pod but not its workload."""

    def __init__(
        self,
        store: IncidentStore,
        directory: PodDirectory | None = None,
        *,
        default_project: str | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        relist_after: float = DEFAULT_RELIST_AFTER,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._directory = directory
        self._project = default_project
        #: (cluster, namespace, pod) -> (owner or None, when it was learnt).
        self._cache: OrderedDict[tuple[str | None, str, str], tuple[Owner | None, float]] = (
            OrderedDict()
        )
        self._cache_size = cache_size
        self._listed: dict[tuple[str | None, str], float] = {}
        self._relist_after = relist_after
        self._monotonic = monotonic
        self._log = get_logger("pod_owners")
        #: How each signal was resolved: ``store``, ``directory``, ``cached``, ``unresolved``.
        self.counts: dict[str, int] = {}

    def owner_of_failure(self, signals: Iterable[Signal], evidence: Evidence) -> Owned | None:
        """``(namespace, workload)`` of the one workload whose pods the failure's signals name
        by uid only (a kernel OOM kill names its pod's memory cgroup, not the pod), when the
        evidence names those pods (kube-state-metrics' ``uid`` label, pods.json) and the
        incidents or the pods confirm their workload; None when none or several.

        A restart loop replaces the killed pods, so a listing taken later no longer has
        them: the metrics of the window are what remember them."""
        pods: dict[str, tuple[str, str]] = {}
        for pod in evidence.pods or ():
            if pod.uid and pod.namespace:
                pods[pod.uid] = (pod.namespace, pod.name)
        for series in (*(evidence.pod_reasons or ()), *(evidence.pod_info or ())):
            labels = series.labels
            name = labels.get("pod") or labels.get("pod_name")
            uid, namespace = labels.get("uid"), labels.get("namespace")
            if uid and name and namespace:
                pods.setdefault(uid, (namespace, name))
        owners: set[Owned] = set()
        for signal in signals:
            if signal.pod or not signal.pod_uid or signal.pod_uid not in pods:
                continue
            namespace, name = pods[signal.pod_uid]
            named = dataclasses.replace(signal, pod=name, namespace=namespace, workload=None)
            resolved = self.resolve(named)
            if resolved.workload:
                owners.add((namespace, resolved.workload))
        return owners.pop() if len(owners) == 1 else None

    def resolve(self, signal: Signal) -> Signal:
        """``signal`` with its pod's workload, when something confirms one."""
        if signal.workload or not signal.pod or not signal.namespace:
            return signal
        if signal.kind is SignalKind.UNRECOGNIZED:
            return signal
        where = (signal.cluster, signal.namespace, signal.pod)
        cached = self._cache.get(where)
        # A pod nothing knew is asked about again after a while: its workload's incident
        # may have opened since, or the pod been created.
        if cached is not None and (
            cached[0] is not None or self._monotonic() - cached[1] < self._relist_after
        ):
            self._cache.move_to_end(where)
            owner, how = cached[0], "cached"
        else:
            owner, how = self._from_store(signal)
            if owner is None:
                owner, how = self._from_directory(signal)
            self._remember(where, owner)
        how = how if owner else "unresolved"
        self.counts[how] = self.counts.get(how, 0) + 1
        if owner is None:
            return signal
        workload, kind = owner
        return dataclasses.replace(
            signal, workload=workload, workload_kind=signal.workload_kind or kind
        )

    def _from_store(self, signal: Signal) -> tuple[Owner | None, str]:
        candidates = workload_candidates(signal.pod or "")
        if not candidates:
            return None, "store"
        keyed = {}
        for name in candidates:
            key = incidents.key_for(dataclasses.replace(signal, workload=name), self._project)
            if key is not None:
                keyed[key] = name
        known = self._store.known_keys(list(keyed)) if keyed else set()
        for key, name in keyed.items():  # most specific first
            if key in known:
                return (name, None), "store"
        return None, "store"

    def _from_directory(self, signal: Signal) -> tuple[Owner | None, str]:
        if self._directory is None:
            return None, "directory"
        namespace = signal.namespace or ""
        listed = (signal.cluster, namespace)
        now = self._monotonic()
        last = self._listed.get(listed)
        if last is not None and now - last < self._relist_after:
            return None, "directory"  # listed a moment ago: the pod was not there
        self._listed[listed] = now
        try:
            pods = self._directory.pods(signal)
        except LoopbreakerError as exc:
            self._log.warning("cannot list pods of %s/%s: %s", signal.cluster, namespace, exc)
            return None, "directory"
        found: Owner | None = None
        for pod in pods:
            if pod.workload:
                owner = (pod.workload, pod.workload_kind)
                self._remember((signal.cluster, namespace, pod.name), owner)
                if pod.name == signal.pod:
                    found = owner
        return found, "directory"

    def _remember(self, where: tuple[str | None, str, str], owner: Owner | None) -> None:
        self._cache[where] = (owner, self._monotonic())
        self._cache.move_to_end(where)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
