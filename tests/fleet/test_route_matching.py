"""Which route an incident takes: first match wins, every named key narrows, and a fact the
incident does not know never matches (pure: loopbreaker.incidents.routes)."""

from __future__ import annotations

import pytest

from loopbreaker.incidents.routes import Route, RouteFacts, Routes

TEAM_VISION = Route(
    "team-vision",
    projects=("ml-shared-prod",),
    namespaces=("vision-*",),
    causes=frozenset({"out_of_memory", "application"}),
    slack_channel="C0VISION01",
)
TEAM_LANGUAGE = Route(
    "team-language",
    namespaces=("lang-*", "llm-*"),
    causes=frozenset({"out_of_memory", "application"}),
    slack_channel="C0LANGUAGE",
)
# Overlaps team-language on namespaces: only reached for what that one does not take.
LLM_CLUSTER = Route("llm-cluster", clusters=("a3-*",), namespaces=("llm-*",))
PLATFORM = Route("platform", slack_channel="C0PLATFORM", approvers=frozenset({"U0ONCALL01"}))
ROUTES = Routes((TEAM_VISION, TEAM_LANGUAGE, LLM_CLUSTER), PLATFORM)


def facts(**given: str | None) -> RouteFacts:
    base: dict[str, str | None] = {
        "project": "ml-shared-prod",
        "cluster": "a3-prod-usc1",
        "namespace": None,
        "workload": None,
        "cause": None,
    }
    return RouteFacts(**{**base, **given})


@pytest.mark.parametrize(
    ("given", "route"),
    [
        # A team's own failure, in its namespace: its route.
        ({"namespace": "vision-train", "cause": "out_of_memory"}, "team-vision"),
        ({"namespace": "llm-pretrain", "cause": "application"}, "team-language"),
        # The same namespace, a cause the team does not own: the first route that still
        # matches (llm-cluster names no cause), in order.
        ({"namespace": "llm-pretrain", "cause": "faulty_host"}, "llm-cluster"),
        # A host failure names no namespace: no namespace route matches it by a guess.
        ({"cause": "faulty_host"}, "platform"),
        ({"cause": "out_of_memory"}, "platform"),
        # Every key narrows: the right namespace in another project is not team-vision's.
        ({"project": "ml-other", "namespace": "vision-x", "cause": "application"}, "platform"),
        # Not diagnosed yet: a route that names causes does not hold.
        ({"namespace": "vision-train"}, "platform"),
        # Globs are shell-style and whole-word: vision-* does not match "television".
        ({"namespace": "television", "cause": "application"}, "platform"),
        ({"namespace": "llm-eval", "cluster": "b2-prod"}, "platform"),
    ],
)
def test_the_first_route_whose_match_holds_wins_else_the_default(
    given: dict[str, str], route: str
) -> None:
    assert ROUTES.choose(facts(**given)).name == route


def test_a_route_without_keys_matches_everything_and_shadows_later_ones() -> None:
    catch_all = Route("catch-all", slack_channel="C0CATCHALL")
    routes = Routes((catch_all, TEAM_VISION), PLATFORM)
    assert routes.choose(facts(namespace="vision-train", cause="application")) is catch_all


def test_routes_are_found_by_name_and_say_whether_anyone_approves() -> None:
    assert ROUTES.named("team-language") is TEAM_LANGUAGE and ROUTES.named("nope") is None
    assert ROUTES.any_approvers
    assert not Routes((TEAM_VISION,), Route("default")).any_approvers
    assert TEAM_VISION.destination == "C0VISION01" and Route("default").destination is None
