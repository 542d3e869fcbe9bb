"""Routes: which channel hears about an incident, and who may approve its repair (pure).

One platform team often runs GPU capacity for many teams. Alertmanager's routing tree,
PagerDuty's services and Robusta's sinks all answer the same question the same way, and so
does this: routes are tried in order, the first whose ``match`` holds wins, else the
``default``. A ``match`` may name ``projects``, ``clusters``, ``namespaces`` and
``workloads`` (shell-style globs) and ``causes`` (root-cause values); each key it names
narrows the match, and a key whose fact is unknown (a node-pool incident names no
namespace) does not hold: a route is never chosen on a guess.

A route names where its messages go and who may approve its repairs. Its ``approvers``
replace the global list; a route without approvers cannot approve (its card says so and
shows no buttons).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from loopbreaker.incidents.context import context_for
from loopbreaker.incidents.records import Incident

#: What a route's ``match`` may name, in the order the docs list them.
MATCH_KEYS = ("projects", "clusters", "namespaces", "workloads", "causes")
DEFAULT_NAME = "default"


@dataclass(frozen=True)
class RouteFacts:
    """What an incident says about itself that a route can match (None: not known)."""

    project: str | None = None
    cluster: str | None = None
    namespace: str | None = None
    workload: str | None = None
    cause: str | None = None


@dataclass(frozen=True)
class Route:
    name: str
    projects: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    causes: frozenset[str] = frozenset()
    slack_channel: str | None = None
    google_chat_space: str | None = None
    #: Who may approve this route's repairs; empty: nobody (no buttons).
    approvers: frozenset[str] = field(default_factory=frozenset)

    def matches(self, facts: RouteFacts) -> bool:
        globs = (
            (self.projects, facts.project),
            (self.clusters, facts.cluster),
            (self.namespaces, facts.namespace),
            (self.workloads, facts.workload),
        )
        for patterns, value in globs:
            if patterns and (not value or not any(fnmatchcase(value, p) for p in patterns)):
                return False
        return not self.causes or (facts.cause is not None and facts.cause in self.causes)

    @property
    def destination(self) -> str | None:
        """The channel or space its messages go to; None: the global one."""
        return self.slack_channel or self.google_chat_space


@dataclass(frozen=True)
class Routes:
    routes: tuple[Route, ...]
    default: Route

    def choose(self, facts: RouteFacts) -> Route:
        """The first route whose match holds, else the default."""
        return next((r for r in self.routes if r.matches(facts)), self.default)

    def named(self, name: str) -> Route | None:
        return next((r for r in self.all() if r.name == name), None)

    def all(self) -> Iterable[Route]:
        return (*self.routes, self.default)

    def route_of(self, incident: Incident) -> Route | None:
        """The route stored on the incident (None when that route is no longer
        configured); one not routed yet is routed by what it says now."""
        if incident.route is not None:
            return self.named(incident.route)
        return self.choose(facts_of(incident))

    @property
    def any_approvers(self) -> bool:
        return any(r.approvers for r in self.all())


def route_of(routes: Routes | None, incident: Incident) -> Route | None:
    """The incident's route for its message, or None without ``LOOPBREAKER_ROUTES``."""
    return routes.route_of(incident) if routes is not None else None


def facts_of(incident: Incident) -> RouteFacts:
    """The incident's project, cluster, namespace, workload and verdict.

    An incident keyed by node pool whose failure belongs to one workload (an OOM kill names
    its pod, a pod Event names its pod) carries that workload, so it is routed by the
    workload's namespace; a host failure names none and matches no namespace route."""
    context = context_for(incident)
    diagnosis = incident.diagnosis
    return RouteFacts(
        project=context.project,
        cluster=context.cluster or None,
        namespace=context.namespace,
        workload=context.workload or None,
        cause=diagnosis.root_cause if diagnosis is not None else None,
    )
