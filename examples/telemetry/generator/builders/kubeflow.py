"""Kubeflow training-operator jobs: pods by incarnation, the operator's Events and counter."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .cluster import (
    FIRST_MINUTE,
    LAST_MINUTE,
    AnyPod,
    Context,
    KfPod,
    KubeflowSpec,
    Node,
    lifecycle,
    spans,
)
from .deterministic import rand_hex, rand_int, rand_uuid

if TYPE_CHECKING:
    pass


class KubeflowJobs:
    """The TFJob/PyTorchJob half of a scenario."""

    ctx: Context
    pods: list[AnyPod]
    operator_restarts: dict[tuple[str, str], tuple[int | None, list[int]]]

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
        *,
        placement: dict[tuple[str, int], Node] | None = None,
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
                phases = lifecycle(
                    start_m, start_m + run_delay, (failed_at or {}).get((rtype, index))
                )
                made = created_m if created_m is not None else start_m - 0.9
                pod = KfPod(
                    spec=spec,
                    namespace=namespace,
                    rtype=rtype,
                    index=index,
                    incarnation=incarnation,
                    node=(placement or spec.placement)[(rtype, index)],
                    start_m=start_m,
                    created_ns=self.ctx.at(made, "created", namespace, name, incarnation),
                    phases=phases,
                    end_m=end_m,
                    ip=self.ctx.pod_ip(name, incarnation),
                )
                out.append(pod)
                self.pods.append(pod)
                if FIRST_MINUTE <= start_m <= LAST_MINUTE and pod.node is not None:
                    self.scheduled(pod, made + 0.05 + 0.01 * len(out))
        return out

    def kf_replicas(
        self,
        spec: KubeflowSpec,
        namespace: str,
        start_m: int,
        *,
        skip: Iterable[tuple[str, int]] = (),
    ) -> None:
        """The replicas that run through the window (all but ``skip``), created one by one."""
        for rtype, count in spec.replicas.items():
            for index in range(count):
                if (rtype, index) not in skip:
                    self.kf_pods(spec, namespace, 0, start_m, None, only=[(rtype, index)])

    def kf_incarnations(
        self,
        spec: KubeflowSpec,
        namespace: str,
        key: tuple[str, int],
        starts: list[int],
        *,
        exit_code: int | None = None,
        nodes: list[Node] | None = None,
    ) -> list[KfPod]:
        """The pod objects of one replica, one per start: each but the last fails a minute
        before the next is created (and is restarted by the operator with ``exit_code``).
        ``nodes`` = where each one runs, when not where the job places the replica."""
        pods = []
        for k, start, end in spans(starts):
            (pod,) = self.kf_pods(
                spec,
                namespace,
                k,
                start,
                end,
                placement=None if nodes is None else {**spec.placement, key: nodes[k]},
                only=[key],
                failed_at={key: end - 1} if end is not None else None,
                created_m=start - 0.58 if k else None,
            )
            pods.append(pod)
            if end is not None and exit_code is not None:
                self.kf_restart([pod], end, exit_code)
        return pods

    def kf_attempts(
        self,
        spec: KubeflowSpec,
        namespace: str,
        starts: list[int],
        failed_at: Callable[[int, int], int],
        exit_code: int,
    ) -> None:
        """One incarnation of a Kubeflow job's pods per attempt, ``starts`` apart; every one
        but the last fails (at ``failed_at(attempt, its end)``) and the operator restarts it
        with ``exit_code``."""
        for k, start, end in spans(starts):
            failed = {key: failed_at(k, end) for key in spec.placement} if end is not None else None
            created = start - 0.58 if k else None
            ours = self.kf_pods(spec, namespace, k, start, end, failed_at=failed, created_m=created)
            if end is not None:
                self.kf_restart(ours, end, exit_code)

    def kf_chief(self, spec: KubeflowSpec) -> tuple[KfPod, int]:
        """A TFJob's Chief (its first pod) and the id of the thread that logs its steps."""
        chief = self.kf_pod(spec, "Chief", 0, 0)
        return chief, rand_int(130_000, 140_000, "tid", chief.name)

    def chief_steps(
        self,
        spec: KubeflowSpec,
        minutes: range,
        offset: float,
        key: str,
        where: str,
        text: Callable[[int], str],
    ) -> None:
        """The Chief's glog line at T+m+offset for every m of ``minutes`` (its time derived
        from ``key`` and m), saying ``text(m)``."""
        chief, tid = self.kf_chief(spec)
        for m in minutes:
            at = self.ctx.at(m + offset, key, m)
            self.glog_line(chief, m + offset, at, tid, where, text(m))

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
        involved = {
            "apiVersion": "kubeflow.org/v1",
            "kind": spec.api_kind,
            "name": spec.name,
            "namespace": namespace,
            "uid": self.kubeflow_uid(spec, namespace),
            "resourceVersion": str(rand_int(10**7, 10**8, "jrv", spec.name, at)),
        }
        name = f"{spec.name}.{rand_hex(16, 'event', spec.name, reason, message, at)}"
        return self.object_event(
            m, at, involved, reason, message, component=spec.operator, etype=etype, name=name
        )

    def kf_restart(self, failed: list[KfPod], m: float, exit_code: int) -> None:
        """What the operator records when it restarts failed replicas at T+m (restartPolicy
        ExitCode, retryable exit code): ExitedWithCode, the pod deleted, one
        <Kind>Restarting Warning per failed replica type, the pod created again."""
        spec, namespace = failed[0].spec, failed[0].namespace
        for i, pod in enumerate(failed):
            for offset, reason, message in (
                (
                    -0.72,
                    "ExitedWithCode",
                    f"Pod: {namespace}.{pod.name} exited with code {exit_code}",
                ),
                (-0.7, "SuccessfulDeletePod", f"Deleted pod: {pod.name}"),
                (-0.6, "SuccessfulCreatePod", f"Created pod: {pod.name}"),
            ):
                self.event_job(spec, namespace, m + offset + 0.002 * i, reason, message)
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
