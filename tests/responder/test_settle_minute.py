"""``on_schedule``'s minute (``Responder.settle_minute``): an incident is diagnosed when its
settle time has passed, not at the next minute after that; one still receiving signals
waits (the storm debounce); one due after the run's minute is the next run's."""

from __future__ import annotations

from datetime import timedelta

import chatkit as K
from fakes import FakeClock, FakeEvidence, FakeStore
from test_responder import preemption

from loopbreaker.app.bootstrap import build_responder
from loopbreaker.responder.service import SCHEDULE_MARGIN, SCHEDULE_PERIOD


class ClockSleep:
    """time.sleep on the fake clock: each wait moves it, and is kept."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds=seconds)


def lab(settle: str = "60s") -> tuple[object, FakeStore, FakeClock, ClockSleep]:
    clock = FakeClock()
    store = FakeStore()
    settings = K.chat_settings(LOOPBREAKER_SETTLE_TIME=settle)
    responder = build_responder(settings, store=store, evidence=FakeEvidence(), clock=clock)
    return responder, store, clock, ClockSleep(clock)


def a_failure(responder: object, n: int = 0) -> None:
    """A Spot preemption of the pool's node ``n``, logged now."""
    at = responder.clock()  # type: ignore[attr-defined]
    responder.handle_entry(f"m-{n}", preemption(n, at))  # type: ignore[attr-defined]


def test_an_incident_is_diagnosed_at_its_settle_time_within_the_run() -> None:
    responder, store, clock, sleep = lab()
    start = clock()
    for n in range(3):  # a small burst, all at once
        a_failure(responder, n)
    [incident] = list(store.incidents.values())
    assert incident.settle_at == start + timedelta(seconds=60)
    clock.advance(seconds=20)  # the minute's run starts 20 s after the burst
    report = responder.settle_minute(sleep)  # type: ignore[attr-defined]
    # It waited the 40 s left of the quiet period, then diagnosed: not at the next minute.
    assert sleep.waits == [40.0] and clock() == start + timedelta(seconds=60)
    assert report.diagnosed == [incident.id]


def test_an_incident_due_after_the_runs_minute_is_left_for_the_next_run() -> None:
    responder, store, clock, sleep = lab("70s")
    a_failure(responder)
    report = responder.settle_minute(sleep)  # type: ignore[attr-defined]
    # Due at +70 s; this run ends at +55 s, before the next one starts at +60 s.
    assert timedelta(seconds=70) > SCHEDULE_PERIOD - SCHEDULE_MARGIN
    assert sleep.waits == [] and report.diagnosed == []
    clock.advance(seconds=60)
    later = responder.settle_minute(sleep)  # type: ignore[attr-defined]
    assert sleep.waits == [10.0] and later.diagnosed == list(store.incidents)


def test_a_signal_during_the_wait_moves_the_settle_time_on_the_debounce_holds() -> None:
    responder, store, clock, sleep = lab("30s")
    a_failure(responder, 0)

    class SignalMidway(ClockSleep):
        def __call__(self, seconds: float) -> None:
            if not self.waits:  # the first wait: another signal arrives halfway through
                super().__call__(seconds / 2)
                a_failure(responder, 1)
                return
            super().__call__(seconds)

    midway = SignalMidway(clock)
    report = responder.settle_minute(midway)  # type: ignore[attr-defined]
    [incident] = list(store.incidents.values())
    # Diagnosed once, 30 s after the second signal, not 30 s after the first.
    assert report.diagnosed == [incident.id]
    assert midway.waits == [15.0, 30.0] and clock().second == 45
