"""Per-endpoint circuit breaker: transitions, thresholds, events, console state."""

from __future__ import annotations

import time

import pytest

from modelgate.config import BreakerSettings
from modelgate.errors import ErrorType
from modelgate.routing.breaker import BreakerRegistry, BreakerState, EventContext
from tests.resilience_fakes import FakeClock, ListSink, upstream

EP = "p1:k1"
FAIL = upstream(ErrorType.UPSTREAM_ERROR)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def breakers(clock: FakeClock, sink: ListSink) -> BreakerRegistry:
    return BreakerRegistry(BreakerSettings(), clock, sink)


def fail(breakers: BreakerRegistry, times: int, endpoint: str = EP) -> None:
    for _ in range(times):
        assert breakers.acquire(endpoint)
        breakers.record(endpoint, FAIL, EventContext("trace-1", 7, "gpt-4o"))


def open_breaker(breakers: BreakerRegistry) -> None:
    fail(breakers, 5)
    assert breakers.state(EP) is BreakerState.OPEN


def test_unknown_endpoint_is_closed(breakers: BreakerRegistry) -> None:
    assert breakers.state("p9:k9") is BreakerState.CLOSED
    assert breakers.retry_after("p9:k9") == 0.0
    assert breakers.acquire("p9:k9")


def test_opens_after_five_consecutive_failures(breakers: BreakerRegistry, sink: ListSink) -> None:
    fail(breakers, 4)
    assert breakers.state(EP) is BreakerState.CLOSED
    assert sink.events == []
    fail(breakers, 1)
    assert breakers.state(EP) is BreakerState.OPEN
    assert not breakers.acquire(EP)
    [event] = sink.events
    assert event.event_type == "BREAKER_OPENED"
    assert (event.trace_id, event.channel_id, event.endpoint, event.model) == ("trace-1", 7, EP, "gpt-4o")
    assert event.error_type == "UPSTREAM_ERROR"
    assert "5 consecutive failures" in event.detail


def test_a_success_resets_the_consecutive_count(breakers: BreakerRegistry) -> None:
    fail(breakers, 4)
    breakers.record(EP, None)
    fail(breakers, 4)
    assert breakers.state(EP) is BreakerState.CLOSED


@pytest.mark.parametrize("kind", [ErrorType.INVALID_REQUEST, ErrorType.MODEL_NOT_FOUND])
def test_caller_and_model_errors_are_not_faults(breakers: BreakerRegistry, kind: ErrorType) -> None:
    for _ in range(30):
        breakers.record(EP, upstream(kind))
    assert breakers.state(EP) is BreakerState.CLOSED
    # and they reset the run of failures, since the endpoint did answer
    fail(breakers, 4)
    breakers.record(EP, upstream(kind))
    fail(breakers, 4)
    assert breakers.state(EP) is BreakerState.CLOSED


@pytest.mark.parametrize(
    "kind",
    [ErrorType.RATE_LIMIT_ERROR, ErrorType.TIMEOUT_ERROR, ErrorType.SERVICE_UNAVAILABLE, ErrorType.NETWORK_ERROR,
     ErrorType.UNKNOWN_ERROR, ErrorType.QUOTA_EXCEEDED, ErrorType.AUTHENTICATION_ERROR],
)
def test_upstream_faults_count(breakers: BreakerRegistry, kind: ErrorType) -> None:
    for _ in range(5):
        breakers.record(EP, upstream(kind))
    assert breakers.state(EP) is BreakerState.OPEN


def test_opens_on_failure_rate_over_min_calls_within_window(breakers: BreakerRegistry, sink: ListSink) -> None:
    # ok, fail, ok, fail ...: never 5 in a row; the 20th call makes 10/20 = 50 %
    for i in range(19):
        breakers.record(EP, FAIL if i % 2 else None)
    assert breakers.state(EP) is BreakerState.CLOSED
    breakers.record(EP, FAIL)
    assert breakers.state(EP) is BreakerState.OPEN
    assert "failure rate 10/20 within 60s" in sink.events[-1].detail


def test_failure_rate_needs_min_calls(breakers: BreakerRegistry) -> None:
    for i in range(19):
        breakers.record(EP, FAIL if i % 2 else None)
    # 9 of 19 failed, below min_calls and below the rate: stays closed
    assert breakers.state(EP) is BreakerState.CLOSED


def test_calls_older_than_the_window_are_forgotten(breakers: BreakerRegistry, clock: FakeClock) -> None:
    for i in range(18):
        breakers.record(EP, FAIL if i % 2 else None)
    clock.advance(61)
    breakers.record(EP, None)
    breakers.record(EP, FAIL)
    # only 2 calls remain in the window: no rate decision yet
    assert breakers.state(EP) is BreakerState.CLOSED


def test_open_then_half_open_after_recovery(breakers: BreakerRegistry, clock: FakeClock, sink: ListSink) -> None:
    open_breaker(breakers)
    assert breakers.retry_after(EP) == pytest.approx(30.0)
    clock.advance(12)
    assert breakers.retry_after(EP) == pytest.approx(18.0)
    assert not breakers.acquire(EP)
    clock.advance(18)
    assert breakers.acquire(EP, EventContext("trace-2", 7, "gpt-4o"))
    assert breakers.state(EP) is BreakerState.HALF_OPEN
    assert sink.types() == ["BREAKER_OPENED", "BREAKER_HALF_OPEN"]
    assert sink.events[-1].trace_id == "trace-2"


def test_half_open_admits_three_trials_and_closes_when_all_succeed(
    breakers: BreakerRegistry, clock: FakeClock, sink: ListSink
) -> None:
    open_breaker(breakers)
    clock.advance(30)
    assert [breakers.acquire(EP) for _ in range(4)] == [True, True, True, False]
    assert breakers.retry_after(EP) == 1.0  # trials under way
    breakers.record(EP, None)
    breakers.record(EP, None)
    assert breakers.state(EP) is BreakerState.HALF_OPEN
    breakers.record(EP, None)
    assert breakers.state(EP) is BreakerState.CLOSED
    assert sink.types() == ["BREAKER_OPENED", "BREAKER_HALF_OPEN", "BREAKER_CLOSED"]
    # closed from a clean slate: four failures do not reopen it
    fail(breakers, 4)
    assert breakers.state(EP) is BreakerState.CLOSED


def test_a_failed_trial_reopens(breakers: BreakerRegistry, clock: FakeClock, sink: ListSink) -> None:
    open_breaker(breakers)
    clock.advance(30)
    assert breakers.acquire(EP)
    breakers.record(EP, None)
    assert breakers.acquire(EP)
    breakers.record(EP, upstream(ErrorType.SERVICE_UNAVAILABLE))
    assert breakers.state(EP) is BreakerState.OPEN
    assert breakers.retry_after(EP) == pytest.approx(30.0)
    assert sink.types() == ["BREAKER_OPENED", "BREAKER_HALF_OPEN", "BREAKER_OPENED"]
    assert sink.events[-1].error_type == "SERVICE_UNAVAILABLE"
    assert sink.events[-1].detail == "a trial call failed"


def test_a_released_trial_slot_can_be_taken_again(breakers: BreakerRegistry, clock: FakeClock) -> None:
    open_breaker(breakers)
    clock.advance(30)
    assert [breakers.acquire(EP) for _ in range(3)] == [True, True, True]
    assert not breakers.acquire(EP)
    breakers.release(EP)
    assert breakers.acquire(EP)


def test_a_trial_that_never_reports_gives_its_slot_back_in_time(breakers: BreakerRegistry, clock: FakeClock) -> None:
    # A stream whose outcome report was lost must not hold the endpoint at 503 for ever.
    open_breaker(breakers)
    clock.advance(30)
    assert [breakers.acquire(EP) for _ in range(3)] == [True, True, True]
    clock.advance(119)
    assert not breakers.acquire(EP)
    assert breakers.retry_after(EP) > 0
    clock.advance(1)  # half_open_trial_timeout_seconds (120) after the trials were admitted
    assert breakers.acquire(EP)
    for _ in range(3):
        breakers.record(EP, None)
    assert breakers.state(EP) is BreakerState.CLOSED


def test_every_transition_is_logged_with_the_endpoint_never_the_key(
    breakers: BreakerRegistry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="modelgate.breaker")
    open_breaker(breakers)
    clock.advance(30)
    for _ in range(3):
        assert breakers.acquire(EP)
        breakers.record(EP, None)
    lines = [r.getMessage() for r in caplog.records if r.name == "modelgate.breaker"]
    assert [line.split()[1] for line in lines] == ["BREAKER_OPENED", "BREAKER_HALF_OPEN", "BREAKER_CLOSED"]
    assert all(f"endpoint={EP}" in line for line in lines)


def test_outcomes_arriving_while_open_change_nothing(breakers: BreakerRegistry, clock: FakeClock) -> None:
    open_breaker(breakers)
    clock.advance(20)
    breakers.record(EP, FAIL)
    breakers.record(EP, None)
    assert breakers.state(EP) is BreakerState.OPEN
    assert breakers.retry_after(EP) == pytest.approx(10.0)


def test_force_recover(breakers: BreakerRegistry, sink: ListSink) -> None:
    open_breaker(breakers)
    assert breakers.force_recover(EP) is BreakerState.OPEN
    assert breakers.state(EP) is BreakerState.CLOSED
    assert breakers.acquire(EP)
    assert sink.types() == ["BREAKER_OPENED", "BREAKER_FORCED"]
    assert sink.events[-1].endpoint == EP
    assert "was OPEN" in sink.events[-1].detail


def test_states_for_the_console(breakers: BreakerRegistry, clock: FakeClock) -> None:
    fail(breakers, 2, "p2:k1")
    before = time.time()
    open_breaker(breakers)
    clock.advance(10)
    states = breakers.states()
    assert set(states) == {EP, "p2:k1"}
    opened = states[EP]
    assert opened.state is BreakerState.OPEN
    assert opened.failures == 5
    assert opened.opened_at is not None and before - 1 <= opened.opened_at <= time.time()
    assert opened.retry_after == pytest.approx(20.0)
    closed = states["p2:k1"]
    assert (closed.state, closed.failures, closed.opened_at, closed.retry_after) == (
        BreakerState.CLOSED, 2, None, None
    )
    clock.advance(20)
    assert breakers.states()[EP].state is BreakerState.HALF_OPEN


def test_thresholds_are_configurable(clock: FakeClock) -> None:
    breakers = BreakerRegistry(
        BreakerSettings(consecutive_failures=2, recovery_seconds=5, half_open_calls=1), clock
    )
    fail(breakers, 2)
    assert breakers.state(EP) is BreakerState.OPEN
    clock.advance(5)
    assert breakers.acquire(EP)
    assert not breakers.acquire(EP)
    breakers.record(EP, None)
    assert breakers.state(EP) is BreakerState.CLOSED


def test_breakers_are_independent_per_endpoint(breakers: BreakerRegistry) -> None:
    open_breaker(breakers)
    assert breakers.acquire("p1:k2")
    assert breakers.state("p1:k2") is BreakerState.CLOSED



def test_window_memory_is_bounded_by_its_span_not_the_call_rate(breakers, clock):
    ctx = EventContext("trace-1", 7, "gpt-4o")
    for _ in range(120):  # two minutes at 1,000 successful calls a second
        for _ in range(1000):
            breakers.record(EP, None, ctx)
        clock.advance(1.0)
    window = breakers._get(EP).window
    assert len(window.buckets) <= 61 and window.calls <= 61_000
    # Then two failures in every three calls (never 5 in a row): the rate opens it once the
    # successes of the past minute have left the window.
    seconds = 0
    while breakers.state(EP) is BreakerState.CLOSED and seconds < 70:
        for i in range(999):
            breakers.record(EP, None if i % 3 == 2 else FAIL, ctx)
        clock.advance(1.0)
        seconds += 1
    assert breakers.state(EP) is BreakerState.OPEN and 20 <= seconds <= 61
