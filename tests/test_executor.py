"""The executor end to end over fake attempts: every row of spec 7.5, failover, breaker, deadline.

Time is a FakeClock, so the exact waits are asserted and nothing sleeps.
"""

from __future__ import annotations

import asyncio
import random

import orjson
import pytest

from modelgate import errors
from modelgate.config import Settings
from modelgate.errors import ErrorType, GatewayError, UpstreamError
from modelgate.protocols.chat import ChatCodec
from modelgate.providers.base import Endpoint
from modelgate.routing.breaker import BreakerState
from modelgate.routing.executor import CallContext, Executor
from modelgate.routing.snapshot import AppEntry, KeyEntry, Route
from tests.resilience_fakes import FakeClock, ListSink, endpoint, route, upstream

OK = "ok"


class Upstream:
    """Scripted attempts per endpoint id; the last outcome of a script repeats."""

    def __init__(self, clock: FakeClock, script: dict[str, list[object]] | None = None, took: float = 0.0) -> None:
        self.clock = clock
        self.script = script or {}
        self.took = took
        self.calls: list[tuple[int, str, float]] = []  # (channel id, endpoint id, time of the try)

    async def __call__(self, rt: Route, ep: Endpoint) -> str:
        self.calls.append((rt.channel_id, ep.id, self.clock.now))
        outcomes = self.script.get(ep.id, [OK])
        outcome = outcomes.pop(0) if len(outcomes) > 1 else outcomes[0]
        self.clock.advance(self.took)
        if isinstance(outcome, UpstreamError):
            raise UpstreamError(outcome.error_type, outcome.message, outcome.status, outcome.retry_after)
        if isinstance(outcome, BaseException):
            raise outcome
        return f"answer from {ep.id}"

    def endpoints(self) -> list[str]:
        return [c[1] for c in self.calls]


class Hook:
    def __init__(self) -> None:
        self.deprecated: list[int] = []

    async def deprecate(self, model_instance_id: int, reason: str) -> None:
        self.deprecated.append(model_instance_id)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hook() -> Hook:
    return Hook()


@pytest.fixture
def executor(clock: FakeClock, sink: ListSink, hook: Hook) -> Executor:
    settings = Settings()
    settings.gateway.retry.jitter = False
    return Executor(settings, clock, sink, hook, random.Random(5))


@pytest.fixture
def patient(clock: FakeClock, sink: ListSink, hook: Hook) -> Executor:
    """An executor whose breaker never opens within one call's retries: the retry table alone."""
    settings = Settings()
    settings.gateway.retry.jitter = False
    settings.gateway.breaker.consecutive_failures = 100
    return Executor(settings, clock, sink, hook, random.Random(5))


def call(clock: FakeClock, timeout: float = 120.0, trace: str = "trace-1", stream: bool = False) -> CallContext:
    key = KeyEntry(1, 1, "key", True, None, None)
    app = AppEntry(1, "app", timeout, True, frozenset({1, 2, 3}))
    return CallContext(trace, key, app, "gpt-4o", stream, clock.monotonic() + timeout)


def body(err: GatewayError) -> dict:
    return orjson.loads(errors.error_body(err, "trace-1", ChatCodec().validation_body))


def assert_envelope(err: GatewayError, status: int, code: str) -> None:
    assert (err.status, err.code) == (status, code)
    parsed = body(err)
    assert parsed["success"] is False
    assert parsed["error"]["code"] == code
    assert parsed["traceId"] == "trace-1"
    assert parsed["timestamp"].endswith("Z")
    assert "sk-upstream-secret" not in parsed["error"]["message"]


# --- spec 7.5, one row at a time, single endpoint ------------------------------------------------

RETRIED = [
    (ErrorType.TIMEOUT_ERROR, [0.2, 0.4]),
    (ErrorType.SERVICE_UNAVAILABLE, [5.0, 5.0, 5.0]),
    (ErrorType.UPSTREAM_ERROR, [1.0, 2.0, 4.0]),
    (ErrorType.NETWORK_ERROR, [0.5, 1.0, 2.0]),
    (ErrorType.UNKNOWN_ERROR, [1.0, 2.0]),
]


async def test_rate_limit_retries_five_times_then_answers_429(
    patient: Executor, clock: FakeClock, sink: ListSink
) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.RATE_LIMIT_ERROR, status=429)]})
    ctx = call(clock)
    with pytest.raises(GatewayError) as caught:
        await patient.run(ctx, [route(1)], up)
    assert ctx.attempts == 6 == len(up.calls)
    assert clock.sleeps == [2.0, 4.0, 8.0, 16.0, 32.0]
    err = caught.value
    assert (err.status, err.code, err.headers) == (429, "RATE_LIMIT_EXCEEDED", {})
    assert body(err) == {"error": {"code": "RATE_LIMIT_EXCEEDED", "message": err.message}}
    assert sink.types() == ["RETRY_EXHAUSTED"]
    event = sink.events[0]
    assert (event.trace_id, event.channel_id, event.endpoint, event.model, event.error_type) == (
        "trace-1", 1, "p1:k1", "gpt-4o", "RATE_LIMIT_ERROR"
    )
    assert event.detail.startswith("6 attempt(s) on endpoint p1:k1: retries used up")
    assert len(ctx.errors) == 6 and ctx.endpoint is not None and ctx.endpoint.id == "p1:k1"


async def test_rate_limit_honours_retry_after_and_passes_it_on(patient: Executor, clock: FakeClock) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.RATE_LIMIT_ERROR, retry_after=7, status=429)]})
    with pytest.raises(GatewayError) as caught:
        await patient.run(call(clock), [route(1)], up)
    assert clock.sleeps == [7.0] * 5
    assert caught.value.status == 429
    assert caught.value.headers == {"retry-after": "7"}


async def test_rate_limit_then_success(executor: Executor, clock: FakeClock, sink: ListSink) -> None:
    limited = upstream(ErrorType.RATE_LIMIT_ERROR)
    up = Upstream(clock, {"p1:k1": [limited, limited, OK]})
    ctx = call(clock)
    assert await executor.run(ctx, [route(1)], up) == "answer from p1:k1"
    assert ctx.attempts == 3
    assert clock.sleeps == [2.0, 4.0]
    assert sink.events == []
    assert executor.breakers.states()["p1:k1"].failures == 0


@pytest.mark.parametrize(("kind", "waits"), RETRIED)
async def test_retried_types_answer_502_with_the_type_name(
    executor: Executor, clock: FakeClock, sink: ListSink, kind: ErrorType, waits: list[float]
) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(kind, status=500)]})
    ctx = call(clock)
    with pytest.raises(GatewayError) as caught:
        await executor.run(ctx, [route(1)], up)
    assert ctx.attempts == len(waits) + 1
    assert clock.sleeps == pytest.approx(waits)
    assert_envelope(caught.value, 502, kind.value)
    assert caught.value.headers == {}
    assert sink.types() == ["RETRY_EXHAUSTED"]
    assert sink.events[0].error_type == kind.value


@pytest.mark.parametrize(("kind", "waits"), RETRIED)
async def test_retried_types_then_success(executor: Executor, clock: FakeClock, kind: ErrorType, waits) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(kind), OK]})
    ctx = call(clock)
    assert await executor.run(ctx, [route(1)], up) == "answer from p1:k1"
    assert ctx.attempts == 2 and clock.sleeps == pytest.approx(waits[:1])


@pytest.mark.parametrize("kind", [ErrorType.QUOTA_EXCEEDED, ErrorType.AUTHENTICATION_ERROR])
async def test_quota_and_auth_are_not_retried(
    executor: Executor, clock: FakeClock, sink: ListSink, kind: ErrorType
) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(kind, status=429 if kind is ErrorType.QUOTA_EXCEEDED else 401)]})
    ctx = call(clock)
    with pytest.raises(GatewayError) as caught:
        await executor.run(ctx, [route(1)], up)
    assert ctx.attempts == 1 and clock.sleeps == []
    assert_envelope(caught.value, 502, kind.value)
    assert sink.events == []


@pytest.mark.parametrize("kind", [ErrorType.QUOTA_EXCEEDED, ErrorType.AUTHENTICATION_ERROR])
async def test_quota_and_auth_fail_over_to_the_next_channel(
    executor: Executor, clock: FakeClock, sink: ListSink, kind: ErrorType
) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(kind)]})
    ctx = call(clock)
    routes = [route(1, priority=0), route(2, priority=1)]
    assert await executor.run(ctx, routes, up) == "answer from p2:k1"
    assert up.endpoints() == ["p1:k1", "p2:k1"] and clock.sleeps == []
    assert ctx.attempts == 2 and ctx.route is not None and ctx.route.channel_id == 2
    [event] = sink.events
    assert (event.event_type, event.channel_id, event.endpoint, event.error_type) == (
        "FAILOVER", 1, "p1:k1", kind.value
    )
    assert event.detail == "from endpoint p1:k1 (channel 1) to endpoint p2:k1 (channel 2)"


async def test_invalid_request_is_neither_retried_nor_failed_over(
    executor: Executor, clock: FakeClock, sink: ListSink
) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.INVALID_REQUEST, status=400)]})
    ctx = call(clock)
    with pytest.raises(GatewayError) as caught:
        await executor.run(ctx, [route(1), route(2, priority=1)], up)
    assert up.endpoints() == ["p1:k1"] and clock.sleeps == []
    # spec-notes: the caller's 400 in its protocol's 7.2 shape, with the provider's message
    assert (caught.value.status, caught.value.code) == (400, "INVALID_REQUEST")
    assert body(caught.value) == {"error": {"message": "upstream said invalid_request",
                                            "type": "invalid_request_error", "code": "invalid_request"}}
    assert sink.events == []
    assert executor.breakers.states()["p1:k1"].failures == 0


async def test_model_not_found_is_final_and_feeds_deprecation(
    executor: Executor, clock: FakeClock, sink: ListSink, hook: Hook
) -> None:
    routes = [route(1, instance_id=77), route(2, priority=1)]
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.MODEL_NOT_FOUND, status=404)]})
    for n in range(3):
        ctx = call(clock, trace=f"trace-{n}")
        with pytest.raises(GatewayError) as caught:
            await executor.run(ctx, routes, up)
        assert ctx.attempts == 1
        assert (caught.value.status, caught.value.code) == (502, "MODEL_NOT_FOUND")
    assert up.endpoints() == ["p1:k1"] * 3 and clock.sleeps == []
    assert hook.deprecated == [77]
    assert sink.types() == ["MODEL_DEPRECATED"]
    assert sink.events[0].trace_id == "trace-2"
    assert executor.breakers.state("p1:k1") is BreakerState.CLOSED


# --- failover -------------------------------------------------------------------------------------


async def test_another_channel_is_tried_before_a_retry(
    executor: Executor, clock: FakeClock, sink: ListSink
) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.SERVICE_UNAVAILABLE, status=503)]})
    ctx = call(clock)
    assert await executor.run(ctx, [route(2, priority=1), route(1, priority=0)], up) == "answer from p2:k1"
    # no 5 s waits on a dead primary while a backup exists
    assert up.endpoints() == ["p1:k1", "p2:k1"]
    assert clock.sleeps == []
    assert ctx.attempts == 2 and ctx.endpoint is not None and ctx.endpoint.id == "p2:k1"
    assert sink.types() == ["FAILOVER"]


async def test_the_first_endpoint_is_retried_after_its_wait_when_the_others_fail(
    executor: Executor, clock: FakeClock, sink: ListSink
) -> None:
    failing = upstream(ErrorType.UPSTREAM_ERROR, status=500)
    up = Upstream(clock, {"p1:k1": [failing, OK], "p2:k1": [upstream(ErrorType.AUTHENTICATION_ERROR)]})
    ctx = call(clock)
    assert await executor.run(ctx, [route(1), route(2, priority=1)], up) == "answer from p1:k1"
    assert up.endpoints() == ["p1:k1", "p2:k1", "p1:k1"]
    assert clock.sleeps == [1.0]  # p1's own backoff, counted from its failure
    assert sink.types() == ["FAILOVER", "FAILOVER"]


async def test_failover_across_keys_of_a_channel_first(executor: Executor, clock: FakeClock) -> None:
    keys = (endpoint(1, 1), endpoint(1, 2))
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.QUOTA_EXCEEDED)]})
    assert await executor.run(call(clock), [route(1, keys), route(2, priority=1)], up) == "answer from p1:k2"
    assert up.endpoints() == ["p1:k1", "p1:k2"]


async def test_every_candidate_failing_answers_the_last_error(
    executor: Executor, clock: FakeClock, sink: ListSink
) -> None:
    up = Upstream(clock, {
        "p1:k1": [upstream(ErrorType.AUTHENTICATION_ERROR)],
        "p2:k1": [upstream(ErrorType.SERVICE_UNAVAILABLE, status=503)],
    })
    ctx = call(clock)
    with pytest.raises(GatewayError) as caught:
        await executor.run(ctx, [route(1), route(2, priority=1)], up)
    assert up.endpoints() == ["p1:k1"] + ["p2:k1"] * 4
    assert clock.sleeps == [5.0, 5.0, 5.0]
    assert_envelope(caught.value, 502, "SERVICE_UNAVAILABLE")
    assert sink.types() == ["FAILOVER", "RETRY_EXHAUSTED"]


async def test_a_failed_channel_is_skipped_for_the_cooldown(executor: Executor, clock: FakeClock) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.QUOTA_EXCEEDED), OK]})
    routes = [route(1), route(2, priority=1)]
    assert await executor.run(call(clock), routes, up) == "answer from p2:k1"
    # the next call goes straight to channel 2 while channel 1 cools down
    assert await executor.run(call(clock), routes, up) == "answer from p2:k1"
    assert up.endpoints() == ["p1:k1", "p2:k1", "p2:k1"]
    clock.advance(30)
    assert await executor.run(call(clock), routes, up) == "answer from p1:k1"


async def test_keys_rotate_between_calls(executor: Executor, clock: FakeClock) -> None:
    keys = (endpoint(1, 1), endpoint(1, 2), endpoint(1, 3))
    up = Upstream(clock)
    for _ in range(4):
        await executor.run(call(clock), [route(1, keys)], up)
    assert up.endpoints() == ["p1:k1", "p1:k2", "p1:k3", "p1:k1"]


async def test_no_route_at_all(executor: Executor, clock: FakeClock) -> None:
    with pytest.raises(GatewayError) as caught:
        await executor.run(call(clock), [route(1, ())], Upstream(clock))
    assert_envelope(caught.value, 502, "UPSTREAM_ERROR")


# --- deadline ---------------------------------------------------------------------------------------


async def test_retries_stop_before_the_deadline(executor: Executor, clock: FakeClock, sink: ListSink) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.UPSTREAM_ERROR)]})
    ctx = call(clock, timeout=5)
    with pytest.raises(GatewayError) as caught:
        await executor.run(ctx, [route(1)], up)
    # waits 1 and 2 fit in 5 s; the third wait (4 s at t=3) would not
    assert clock.sleeps == [1.0, 2.0] and ctx.attempts == 3
    assert_envelope(caught.value, 502, "UPSTREAM_ERROR")
    assert "would pass the call deadline" in sink.events[0].detail


async def test_a_rate_limit_retry_after_beyond_the_deadline_is_not_waited(
    executor: Executor, clock: FakeClock
) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.RATE_LIMIT_ERROR, retry_after=50)]})
    with pytest.raises(GatewayError) as caught:
        await executor.run(call(clock, timeout=30), [route(1)], up)
    assert clock.sleeps == [] and len(up.calls) == 1
    assert caught.value.status == 429


async def test_failover_continues_while_time_is_left(executor: Executor, clock: FakeClock) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.UPSTREAM_ERROR)]}, took=2)
    ctx = call(clock, timeout=5)
    assert await executor.run(ctx, [route(1), route(2, priority=1)], up) == "answer from p2:k1"
    assert clock.sleeps == []


async def test_no_failover_once_the_deadline_passed(executor: Executor, clock: FakeClock) -> None:
    # each try takes 6 s of a 5 s budget
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.QUOTA_EXCEEDED)]}, took=6)
    with pytest.raises(GatewayError) as caught:
        await executor.run(call(clock, timeout=5), [route(1), route(2, priority=1)], up)
    assert up.endpoints() == ["p1:k1"]
    assert caught.value.code == "QUOTA_EXCEEDED"


# --- circuit breaker --------------------------------------------------------------------------------


async def open_p1(executor: Executor, clock: FakeClock) -> Upstream:
    """Five failed calls on p1:k1 open its breaker."""
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.QUOTA_EXCEEDED)]})
    for _ in range(5):
        with pytest.raises(GatewayError):
            await executor.run(call(clock), [route(1)], up)
    assert executor.breakers.state("p1:k1") is BreakerState.OPEN
    return up


async def test_breaker_open_answers_503_with_retry_after(
    executor: Executor, clock: FakeClock, sink: ListSink
) -> None:
    up = await open_p1(executor, clock)
    assert sink.types() == ["BREAKER_OPENED"]
    clock.advance(10)
    ctx = call(clock)
    with pytest.raises(GatewayError) as caught:
        await executor.run(ctx, [route(1)], up)
    assert len(up.calls) == 5 and ctx.attempts == 0  # the upstream was not called
    assert_envelope(caught.value, 503, "UPSTREAM_ERROR")
    assert caught.value.headers == {"retry-after": "20"}


async def test_breaker_half_open_trials_then_closed(executor: Executor, clock: FakeClock, sink: ListSink) -> None:
    up = await open_p1(executor, clock)
    up.script["p1:k1"] = [OK]
    clock.advance(30)
    for _ in range(3):
        assert await executor.run(call(clock), [route(1)], up) == "answer from p1:k1"
    assert executor.breakers.state("p1:k1") is BreakerState.CLOSED
    assert sink.types() == ["BREAKER_OPENED", "BREAKER_HALF_OPEN", "BREAKER_CLOSED"]


async def test_breaker_failed_trial_reopens(executor: Executor, clock: FakeClock, sink: ListSink) -> None:
    up = await open_p1(executor, clock)
    clock.advance(30)
    with pytest.raises(GatewayError) as caught:
        await executor.run(call(clock), [route(1)], up)
    assert caught.value.code == "QUOTA_EXCEEDED"
    with pytest.raises(GatewayError) as caught:
        await executor.run(call(clock), [route(1)], up)
    assert caught.value.status == 503 and caught.value.headers == {"retry-after": "30"}
    assert sink.types() == ["BREAKER_OPENED", "BREAKER_HALF_OPEN", "BREAKER_OPENED"]


async def test_open_breaker_is_passed_over_for_another_channel(executor: Executor, clock: FakeClock) -> None:
    up = await open_p1(executor, clock)
    assert await executor.run(call(clock), [route(1), route(2, priority=1)], up) == "answer from p2:k1"
    assert up.endpoints()[-1] == "p2:k1"


async def test_every_breaker_open_gives_the_earliest_half_open(executor: Executor, clock: FakeClock) -> None:
    await open_p1(executor, clock)
    clock.advance(10)
    up2 = Upstream(clock, {"p2:k1": [upstream(ErrorType.NETWORK_ERROR)]})
    for _ in range(5):
        with pytest.raises(GatewayError):
            await executor.run(call(clock), [route(2)], up2)
    assert executor.breakers.state("p2:k1") is BreakerState.OPEN
    with pytest.raises(GatewayError) as caught:
        await executor.run(call(clock), [route(1), route(2)], up2)
    # p1 opened first, so it half-opens first; the header carries its wait
    assert caught.value.status == 503
    assert caught.value.headers == {"retry-after": str(int(executor.breakers.retry_after("p1:k1") + 0.999))}
    assert executor.breakers.retry_after("p1:k1") < executor.breakers.retry_after("p2:k1")


async def test_tried_and_open_candidates_answer_the_upstream_error(executor: Executor, clock: FakeClock) -> None:
    await open_p1(executor, clock)
    up = Upstream(clock, {"p2:k1": [upstream(ErrorType.AUTHENTICATION_ERROR)]})
    with pytest.raises(GatewayError) as caught:
        await executor.run(call(clock), [route(2), route(1, priority=1)], up)
    assert caught.value.code == "AUTHENTICATION_ERROR" and caught.value.status == 502


async def test_every_attempt_counts_and_retries_stop_when_the_breaker_opens(
    executor: Executor, clock: FakeClock, sink: ListSink
) -> None:
    # spec-notes: every failed upstream attempt counts, retries included
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.RATE_LIMIT_ERROR)]})
    with pytest.raises(GatewayError) as caught:
        await executor.run(call(clock), [route(1)], up)
    assert len(up.calls) == 5 and clock.sleeps == [2.0, 4.0, 8.0, 16.0]
    assert caught.value.status == 429
    assert executor.breakers.state("p1:k1") is BreakerState.OPEN
    assert sink.types() == ["BREAKER_OPENED", "RETRY_EXHAUSTED"]
    assert "breaker opened" in sink.events[-1].detail


async def test_five_failed_attempts_reach_a_dead_endpoint_whatever_the_callers(
    executor: Executor, clock: FakeClock
) -> None:
    up = Upstream(clock, {"p1:k1": [upstream(ErrorType.SERVICE_UNAVAILABLE, status=503)]})
    answers = []
    for _ in range(5):
        with pytest.raises(GatewayError) as caught:
            await executor.run(call(clock), [route(1)], up)
        answers.append(caught.value.status)
    assert len(up.calls) == 5
    # the first caller made 4 attempts (3 retries), the second the fifth
    assert answers == [502, 502, 503, 503, 503]


async def test_retries_stop_when_another_call_opens_the_breaker(
    executor: Executor, clock: FakeClock, sink: ListSink
) -> None:
    failing = upstream(ErrorType.SERVICE_UNAVAILABLE)

    async def attempt(rt: Route, ep: Endpoint) -> str:
        # meanwhile five other calls fail on this endpoint
        for _ in range(5):
            executor.breakers.record(ep.id, failing)
        raise UpstreamError(failing.error_type, failing.message)

    ctx = call(clock)
    with pytest.raises(GatewayError) as caught:
        await executor.run(ctx, [route(1)], attempt)
    assert ctx.attempts == 1 and clock.sleeps == []
    assert caught.value.code == "SERVICE_UNAVAILABLE"
    assert sink.types() == ["BREAKER_OPENED", "RETRY_EXHAUSTED"]
    assert "breaker opened" in sink.events[-1].detail


async def test_a_cancelled_trial_gives_its_slot_back(executor: Executor, clock: FakeClock) -> None:
    up = await open_p1(executor, clock)
    clock.advance(30)
    up.script["p1:k1"] = [asyncio.CancelledError()]
    for _ in range(4):  # more cancellations than trial slots
        with pytest.raises(asyncio.CancelledError):
            await executor.run(call(clock), [route(1)], up)
    up.script["p1:k1"] = [OK]
    assert await executor.run(call(clock), [route(1)], up) == "answer from p1:k1"


async def test_force_recover_lets_calls_through(executor: Executor, clock: FakeClock, sink: ListSink) -> None:
    up = await open_p1(executor, clock)
    executor.breakers.force_recover("p1:k1")
    up.script["p1:k1"] = [OK]
    assert await executor.run(call(clock), [route(1)], up) == "answer from p1:k1"
    assert sink.types() == ["BREAKER_OPENED", "BREAKER_FORCED"]


# --- streams ----------------------------------------------------------------------------------------


async def test_streams_broken_midway_open_the_breaker(
    executor: Executor, clock: FakeClock, sink: ListSink
) -> None:
    up = Upstream(clock)
    routes = [route(1), route(2, priority=1)]
    for n in range(5):
        clock.advance(31)  # past the cooldown, so channel 1 stays first
        ctx = call(clock, trace=f"stream-{n}", stream=True)
        assert await executor.run(ctx, routes, up) == "answer from p1:k1"
        assert ctx.stream_outcome_pending
        executor.report(ctx, upstream(ErrorType.NETWORK_ERROR))
        executor.report(ctx, None)  # a second report (e.g. from a `finally`) changes nothing
        assert ctx.errors[-1].error_type is ErrorType.NETWORK_ERROR
    assert executor.breakers.state("p1:k1") is BreakerState.OPEN
    assert sink.types() == ["BREAKER_OPENED"]
    assert sink.events[-1].trace_id == "stream-4"
    ctx = call(clock, stream=True)
    assert await executor.run(ctx, routes, up) == "answer from p2:k1"


async def test_a_broken_stream_cools_the_endpoint_down(executor: Executor, clock: FakeClock) -> None:
    up = Upstream(clock)
    routes = [route(1), route(2, priority=1)]
    ctx = call(clock, stream=True)
    await executor.run(ctx, routes, up)
    executor.report(ctx, upstream(ErrorType.UPSTREAM_ERROR))
    assert await executor.run(call(clock), routes, up) == "answer from p2:k1"


async def test_a_clean_stream_end_is_a_success(executor: Executor, clock: FakeClock) -> None:
    up = await open_p1(executor, clock)
    up.script["p1:k1"] = [OK]
    clock.advance(30)
    for _ in range(3):  # the three half-open trials are streams
        ctx = call(clock, stream=True)
        await executor.run(ctx, [route(1)], up)
        assert executor.breakers.state("p1:k1") is BreakerState.HALF_OPEN
        executor.report(ctx, None)
    assert executor.breakers.state("p1:k1") is BreakerState.CLOSED


async def test_a_non_stream_call_needs_no_report(executor: Executor, clock: FakeClock) -> None:
    ctx = call(clock)
    await executor.run(ctx, [route(1)], Upstream(clock))
    assert not ctx.stream_outcome_pending
    executor.report(ctx, upstream(ErrorType.UPSTREAM_ERROR))
    assert executor.breakers.states()["p1:k1"].failures == 0


async def test_jitter_with_a_seeded_random_is_reproducible() -> None:
    async def waits(seed: int) -> list[float]:
        local = FakeClock()
        ex = Executor(Settings(), local, rng=random.Random(seed))  # jitter is on by default
        up = Upstream(local, {"p1:k1": [upstream(ErrorType.SERVICE_UNAVAILABLE)]})
        with pytest.raises(GatewayError):
            await ex.run(call(local), [route(1)], up)
        return local.sleeps

    first = await waits(11)
    assert first == await waits(11)
    assert len(first) == 3 and all(4.0 <= w <= 6.0 for w in first) and first != [5.0, 5.0, 5.0]
