"""Fault injection: every fault x the three client protocols (chat, messages, Responses) x streamed
or not x every wire adapter (pass-through where the wire is the client's own, conversion elsewhere).

Each wire format has a healthy fake (tests/fakes, checked against the vendors' SDKs and
captures) and, in front of a copy of it, a FaultUpstream that misbehaves. Each model is served
by the faulty channel (priority 0) and a healthy backup channel (priority 1); a second
application sees only the faulty channel. For every case the test asserts the caller's status
and body shape (spec 7), the call-log row, the faulty endpoint's breaker count, that the backup
channel answered where one exists, and the time to answer against the configured limits.

Time: the limits are the real defaults (30 s to a stream's first event, 90 s to a whole answer's
first byte, 10 s for its body, 120 s for the call, keep-alives every 15 s), and the faults drip a
byte a second. Everything runs in one event loop whose clock is faked with `looptime`: when every
task waits, the clock jumps to the next timer. The gateway reads every deadline of a call from the
loop's clock (its limits are the loop's timers), so each answer's time is asserted exactly, to a
millisecond: a hung primary failed over after exactly the first-byte limit, a silent stream ended
at exactly the application timeout, the retry waits of spec 7.5 summed as the table says, and
an unreadable answer failed over at once. An hour of limits costs no real time.

Faults after the first byte meet every protocol on every wire (the protocol's error event and
the wire's decoder both matter there). Faults before it are failed over by the same code
whatever the client protocol, so on conversion routes each (fault, wire) is asked through one
client protocol, rotating, so every protocol still meets every fault and every wire; the
pass-through routes are asked for every fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import looptime
import orjson
import pytest
import pytest_asyncio
import uvicorn
from openai.types.responses import Response
from sqlalchemy import select

from modelgate.config import RetryPolicy, Settings
from modelgate.protocols import sse
from modelgate.protocols.messages import vendor_error_type
from modelgate.protocols.responses.encode import error_object
from modelgate.storage.models import CallLog
from tests.faults.fault_upstream import FAULTS, FIRST_EVENT_PAUSE, Fault, FaultUpstream
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.cohere_upstream import FakeCohere
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.gateway_harness import GatewayHarness, harness_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

# The real defaults: the suite runs on the event loop's fake clock, so they cost no real time.
DEFAULTS = Settings()
APP_TIMEOUT = DEFAULTS.gateway.default_app_timeout_seconds
STREAM_FIRST_BYTE = DEFAULTS.upstream.stream_first_byte_timeout_seconds
RESPONSE = DEFAULTS.upstream.response_timeout_seconds  # a non-streamed answer's first byte
BODY = DEFAULTS.upstream.body_timeout_seconds
KEEPALIVE = DEFAULTS.gateway.stream_keepalive_seconds
RETRY = DEFAULTS.gateway.retry
CAP = 1024 * 1024
CLOCK = 1e-3  # tolerance on the loop clock: timers fire at their time exactly, code runs in none
# Loop cycles with nothing to do before the fake clock jumps to the next timer (looptime's default
# is 42): data written over loopback is readable at once, and each jump costs this many cycles.
NOOP_CYCLES = 10


def now() -> float:
    return asyncio.get_running_loop().time()


@dataclass
class Wire:
    name: str  # the adapter's wire format
    kind: str  # a provider kind speaking it
    model: str
    key: str
    fake: Any
    stream_type: str
    faulty: FaultUpstream | None = None
    primary_channel: int = 0
    backup_channel: int = 0
    primary_endpoint: str = ""


def _wires() -> list[Wire]:
    return [
        Wire("openai-chat", "openai", "gpt-test", "up-key-1", FakeOpenAI(), "text/event-stream"),
        Wire("anthropic-messages", "anthropic", "claude-haiku-4-5", "sk-ant-fake-upstream-key", FakeAnthropic(),
             "text/event-stream"),
        Wire("gemini", "gemini", "gemini-2.5-flash", "gm-test-key", FakeGemini(), "text/event-stream"),
        Wire("cohere", "cohere", "command-a-03-2025", "co-test-key", FakeCohere(), "text/event-stream"),
        Wire("ollama", "ollama", "llama3.2:latest", "ollama-key", FakeOllama(), "application/x-ndjson"),
        Wire("bedrock-converse", "aws-bedrock", "anthropic.claude-3-5-haiku-20241022-v1:0", "ABSKfakeBedrockApiKey",
             FakeBedrock(), "application/vnd.amazon.eventstream"),
    ]


WIRE_NAMES = [w.name for w in _wires()]
PROTOCOLS = ("chat", "messages", "responses")
# The wire each client protocol is passed through to (Responses: the `openai` kind's own Responses API).
PASS_THROUGH = {"chat": "openai-chat", "messages": "anthropic-messages", "responses": "openai-chat"}


@dataclass
class Setup:
    gw: GatewayHarness
    wires: dict[str, Wire]
    key_with_backup: str
    key_alone: str


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def setup(tmp_path_factory: pytest.TempPathFactory):
    # From here on every timer of the module's loop runs on a fake clock: the gateway's limits and
    # retry waits, the fakes' drips and hangs, the client's timeout. The clock jumps to the next timer
    # whenever the loop has nothing to do (every peer is in this loop, over loopback), so a 120 s limit
    # takes no real time and fires exactly on time.
    loop = asyncio.get_running_loop()
    looptime.patch_event_loop(loop, start=loop.time(), noop_cycles=NOOP_CYCLES)
    async with database_work():
        prepared = await _setup(tmp_path_factory)
    yield prepared
    async with database_work():
        for wire in prepared.wires.values():
            await wire.faulty.close()  # type: ignore[union-attr]
            await wire.fake.close()
        await prepared.gw.stop()
    sse.max_event_bytes = sse.DEFAULT_MAX_EVENT_BYTES  # process-wide: set from CAP by the runtime's start


@contextlib.asynccontextmanager
async def database_work() -> AsyncIterator[None]:
    """The fake clock runs at the pace of real time meanwhile. The database works in threads of its
    own, which the clock does not see: it would jump from timer to timer while they work, and fire
    the database's deadlines in a few real milliseconds. It does wait for an executor's jobs."""
    loop = asyncio.get_running_loop()
    done = threading.Event()
    job = loop.run_in_executor(None, done.wait)
    try:
        yield
    finally:
        done.set()
        await job


class WaitingServer(uvicorn.Server):
    """uvicorn's server, whose main loop waits to be told to exit instead of looking every 0.1 s:
    on the fake clock those looks were most of the suite's work (36,000 an hour)."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit = asyncio.Event()
        super().__init__(config)

    @property  # type: ignore[override]
    def should_exit(self) -> bool:
        return self._exit.is_set()

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        if value:
            self._exit.set()

    async def main_loop(self) -> None:
        await self.on_tick(0)  # the Date header
        await self._exit.wait()


class Harness(GatewayHarness):
    server_class = WaitingServer


async def _setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    settings = harness_settings(tmp_path_factory.mktemp("faults"))
    upstream = settings.upstream
    upstream.max_body_bytes = CAP
    upstream.max_event_bytes = CAP
    settings.gateway.retry.jitter = False
    settings.gateway.lifecycle.probe_interval_seconds = 0
    # Background loops that would wake thousands of times over the suite's hours of fake time: the
    # configuration is loaded once (below), and each case flushes the call log itself (log_row).
    # (So the database works only within database_work.)
    settings.gateway.cache_refresh_seconds = 86400
    settings.usage.flush_interval_seconds = 86400
    gw = await Harness(settings).start()
    wires = {w.name: w for w in _wires()}
    svc = gw.services
    with_backup = await svc.applications.create("with-backup")  # the default timeout: APP_TIMEOUT
    alone = await svc.applications.create("alone")
    for wire in wires.values():
        await wire.fake.start()
        healthy_base = wire.fake.base_url
        wire.faulty = await FaultUpstream(wire.name, wire.fake.origin, wire.stream_type).start()
        faulty_base = healthy_base.replace(wire.fake.origin, wire.faulty.origin)
        primary = await svc.providers.create(f"{wire.name}-faulty", wire.kind, base_url=faulty_base, keys=[wire.key])
        backup = await svc.providers.create(f"{wire.name}-healthy", wire.kind, base_url=healthy_base, keys=[wire.key])
        primary_channel = await svc.channels.create(f"{wire.name}-primary", primary.id, models=[wire.model], priority=0)
        backup_channel = await svc.channels.create(f"{wire.name}-backup", backup.id, models=[wire.model], priority=1)
        await svc.applications.authorize_channel(with_backup.id, primary_channel.id)
        await svc.applications.authorize_channel(with_backup.id, backup_channel.id)
        await svc.applications.authorize_channel(alone.id, primary_channel.id)
        wire.primary_channel, wire.backup_channel = primary_channel.id, backup_channel.id
    key_with_backup = (await svc.api_keys.create(with_backup.id, rate_capacity=100000, rate_refill=10000)).plaintext
    key_alone = (await svc.api_keys.create(alone.id, rate_capacity=100000, rate_refill=10000)).plaintext
    await gw.runtime.refresh()
    for wire in wires.values():
        [route] = [r for r in gw.runtime.snapshot.routes_by_model[wire.model] if r.channel_id == wire.primary_channel]
        wire.primary_endpoint = route.endpoints[0].id
    return Setup(gw, wires, key_with_backup, key_alone)


def reset(setup: Setup) -> None:
    """Each case starts with closed breakers and no cooldowns."""
    executor = setup.gw.runtime.executor
    for endpoint in list(executor.breakers.states()):
        executor.breakers.force_recover(endpoint, emit=False)
        executor.failover.recovered(endpoint)


async def call(setup: Setup, protocol: str, wire: Wire, stream: bool, key: str) -> httpx.Response:
    if protocol == "chat":
        url, headers = "/v1/chat/completions", {"authorization": f"Bearer {key}"}
        body: dict[str, Any] = {"model": wire.model, "messages": [{"role": "user", "content": "hello there"}]}
    elif protocol == "messages":
        url, headers = "/alt/v1/messages", {"x-api-key": key, "alt-version": "2023-06-01"}
        body = {"model": wire.model, "max_tokens": 32,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}]}
    else:
        url, headers = "/v1/responses", {"authorization": f"Bearer {key}"}
        body = {"model": wire.model, "input": "hello there", "max_output_tokens": 32, "store": False}
    if stream:
        body["stream"] = True
    # its timeouts are on the loop's clock too: past the gateway's own deadline
    async with httpx.AsyncClient(base_url=setup.gw.url, timeout=APP_TIMEOUT + 60) as client:
        return await client.post(url, headers=headers, json=body)


async def log_row(setup: Setup, trace_id: str) -> CallLog:
    async with database_work():
        await setup.gw.runtime.writer.flush()
        async with setup.gw.runtime.db.session() as session:
            return (await session.scalars(select(CallLog).where(CallLog.trace_id == trace_id))).one()


def sse_events(text: str) -> list[tuple[str | None, str]]:
    events = []
    for block in text.split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if name is not None or data:
            events.append((name, "\n".join(data)))
    return events


def stream_outcome(protocol: str, text: str) -> str | None:
    """None for a complete answer, else the error type of the protocol's own error event.
    Either way the stream must have ended cleanly in its protocol's terms."""
    events = sse_events(text)
    assert events, "an empty stream"
    if protocol == "chat":
        assert events[-1] == (None, "[DONE]"), f"chat stream does not end with [DONE]: {text[-300:]!r}"
        errors = [orjson.loads(d)["error"] for _, d in events[:-1] if d.startswith('{"error"')]
        if errors:
            assert events[-2][1].startswith('{"error"'), "the error frame must come right before [DONE]"
            # the gateway's own error frame has the 7.5 type as `code`; an upstream's, its own names
            return errors[-1]["code"] or errors[-1].get("type") or "error"
        assert any('"finish_reason":"' in d for _, d in events)
        return None
    if protocol == "responses":
        names = [name for name, _ in events if name is not None]
        assert names and names[0] == "response.created", text[:300]
        name, data = events[-1]
        payload = orjson.loads(data)
        if name == "error":  # pass-through: the vendor's error event, numbered after the upstream's
            assert payload["sequence_number"] > 0
            return payload.get("code") or payload["error"]["code"]
        if name == "response.failed":
            return payload["response"]["error"]["code"]
        assert name == "response.completed", f"Responses stream does not end with its terminal event: {text[-300:]!r}"
        return None
    name, data = events[-1]
    if name == "error":
        error = orjson.loads(data)
        assert error["type"] == "error"
        return error["error"]["type"]  # the vendor's error type
    assert name == "message_stop", f"messages stream does not end with message_stop: {text[-300:]!r}"
    return None


def protocol_error_name(protocol: str, error_code: str) -> str:
    """How the client protocol names a 7.5 error type in its error event."""
    if protocol == "chat":
        return error_code
    if protocol == "messages":
        return vendor_error_type(error_code)
    return error_object(error_code, "")["code"]


def assert_answer(protocol: str, resp: httpx.Response) -> None:
    assert resp.status_code == 200, resp.text[:500]
    body = resp.json()
    if protocol == "chat":
        assert body["choices"][0]["message"]["role"] == "assistant"
        assert isinstance(body["choices"][0]["message"]["content"], str)
        assert body["choices"][0]["finish_reason"]
    elif protocol == "messages":
        assert body["type"] == "message" and body["role"] == "assistant"
        assert body["content"] and body["stop_reason"]
    else:
        Response.model_validate(body)
        assert body["status"] == "completed" and body["output"]


def _converted_protocol(fault: Fault, wire: str) -> str:
    """The one client protocol a fault before the first byte is asked through on a conversion
    route of this wire, rotating over faults and wires."""
    converting = [p for p in PROTOCOLS if PASS_THROUGH[p] != wire]
    return converting[(FAULTS.index(fault) + WIRE_NAMES.index(wire)) % len(converting)]


def _asked(fault: Fault, protocol: str, wire: str) -> bool:
    return fault.after_first_byte or PASS_THROUGH[protocol] == wire or protocol == _converted_protocol(fault, wire)


CASES = [
    pytest.param(protocol, wire, stream, fault, id=f"{protocol}-{wire}-{'stream' if stream else 'whole'}-{fault.name}")
    for fault in FAULTS
    for protocol in PROTOCOLS
    for wire in WIRE_NAMES
    for stream in (False, True)
    if (fault.streams if stream else fault.whole) and _asked(fault, protocol, wire)
    # messages streams meet endless keep-alives in their own test (ping events on every route)
    and not (fault.name == "endless_keepalives" and protocol == "messages")
]


@pytest.mark.parametrize(("protocol", "wire_name", "stream", "fault"), CASES)
async def test_fault_with_a_healthy_backup(setup: Setup, protocol: str, wire_name: str, stream: bool,
                                           fault: Fault) -> None:
    reset(setup)
    wire = setup.wires[wire_name]
    assert wire.faulty is not None
    wire.faulty.fault = fault.name
    backup_calls = len(wire.fake.requests)
    started = now()
    try:
        resp = await call(setup, protocol, wire, stream, setup.key_with_backup)
    finally:
        wire.faulty.fault = None
    took = now() - started
    row = await log_row(setup, resp.headers["x-trace-id"])
    breaker = setup.gw.runtime.executor.breakers.states().get(wire.primary_endpoint)
    passthrough = PASS_THROUGH[protocol] == wire_name

    if stream and fault.after_first_byte:
        # Too late to fail over: the protocol's own error event and a clean end, from the primary.
        assert resp.status_code == 200
        outcome = stream_outcome(protocol, resp.text)
        assert row.channel_id == wire.primary_channel and row.status == 200
        assert (row.error_code is None) == (outcome is None)
        if outcome is not None:
            assert breaker is not None and breaker.failures >= 1  # reported at the stream's end
        expected = EXPECTED_AFTER_FIRST_BYTE[fault.name]
        if isinstance(expected, dict):
            expected = expected["pass-through" if passthrough else "conversion"]
        if expected == "failed":  # the upstream's own error, classified by its wire
            assert row.error_code is not None and outcome is not None, resp.text[-400:]
        elif expected != "any":
            assert row.error_code == expected, resp.text[-400:]
            if expected is not None:  # each protocol names errors its own way
                assert outcome == protocol_error_name(protocol, expected)
        # Ended by the fault right after the first event; a stream that only keeps alive after its
        # first event by the stall limit, the application's timeout (not a keep-alive tick later).
        assert took == pytest.approx(APP_TIMEOUT if fault.name == "endless_keepalives" else FIRST_EVENT_PAUSE,
                                     abs=CLOCK)
        return

    # Before the first byte reached the caller: a typed upstream failure, failed over to the backup.
    if stream:
        assert resp.status_code == 200, resp.text[:500]
        assert stream_outcome(protocol, resp.text) is None, resp.text[-400:]
    else:
        assert_answer(protocol, resp)
    assert len(wire.fake.requests) > backup_calls, "the backup was not used"
    assert row.status == 200 and row.error_code is None
    assert row.channel_id == wire.backup_channel and row.attempts == 2
    assert breaker is not None and breaker.failures == 1  # the failed attempt counted
    # The backup answered as soon as the primary's attempt ended: at once for an answer that is
    # unreadable or cut, and a hung or dripping primary is given up at its per-attempt limit.
    assert took == pytest.approx(attempt_limit(fault.name, stream), abs=CLOCK)


def attempt_limit(fault: str, stream: bool) -> float:
    """How long the gateway waits on an attempt that meets `fault` before its first byte."""
    # Nothing readable: a dripped head (91 bytes, a byte a second) outlasts either first-byte limit.
    if fault in ("hang_before_headers", "drip"):
        return STREAM_FIRST_BYTE if stream else RESPONSE  # the first-byte limit, not the app timeout
    if fault == "drip_body":  # the head at once, then a byte a second
        return BODY  # the body limit, not the drip's end nor the app timeout
    return 0.0


@pytest.mark.parametrize("wire_name", WIRE_NAMES)
async def test_messages_streams_keep_alive_with_ping_events_on_every_route(setup: Setup, wire_name: str) -> None:
    """An upstream that goes quiet after its first event (sending only its own keep-alives, SSE
    comments where its wire has them) gets the messages client `ping` events, never SSE comments,
    on pass-through as on conversion, until the stall limit ends the stream."""
    reset(setup)
    wire = setup.wires[wire_name]
    assert wire.faulty is not None
    wire.faulty.fault = "endless_keepalives"
    started = now()
    try:
        resp = await call(setup, "messages", wire, True, setup.key_with_backup)
    finally:
        wire.faulty.fault = None
    took = now() - started
    assert resp.status_code == 200
    assert not [line for line in resp.text.split("\n") if line.startswith(":")], resp.text[:500]
    pings = [e for e in sse_events(resp.text) if e[0] == "ping"]
    assert all(orjson.loads(data) == {"type": "ping"} for _, data in pings)
    # one every 15 s of silence (15, 30, ... 105 s); at 120 s the stall limit ends the stream instead
    assert len(pings) == math.ceil(APP_TIMEOUT / KEEPALIVE) - 1
    assert stream_outcome("messages", resp.text) == vendor_error_type("TIMEOUT_ERROR")
    assert took == pytest.approx(APP_TIMEOUT, abs=CLOCK)  # the stall limit, not a keep-alive tick later


EXPECTED_AFTER_FIRST_BYTE: dict[str, Any] = {
    "reset_mid_stream": "NETWORK_ERROR",
    "close_without_end": "NETWORK_ERROR",
    "endless_keepalives": "TIMEOUT_ERROR",
    # Pass-through forwards the upstream's JSON events unread; a conversion decoder that cannot
    # use one ends the stream with UPSTREAM_ERROR (or skips a chunk it can ignore).
    "bad_chunk": {"pass-through": None, "conversion": "any"},
    "error_event_mid_stream": "failed",
    # Pass-through checks the framing (an event whose data is not JSON); conversion decoders read it.
    "garbage_mid_stream": "UPSTREAM_ERROR",
}

ALONE = [
    pytest.param(protocol, wire, stream, fault, id=f"{protocol}-{wire}-{'stream' if stream else 'whole'}-{fault.name}")
    for fault in FAULTS
    if not fault.after_first_byte
    for protocol in PROTOCOLS
    for wire in ("openai-chat", "anthropic-messages", "gemini")
    for stream in (False, True)
    if (fault.streams if stream else fault.whole)
    # the pass-through routes, and one conversion route per protocol (the envelope is the same)
    and (PASS_THROUGH[protocol] == wire or wire == ("gemini" if protocol != "messages" else "openai-chat"))
]

EXPECTED_ALONE = {
    "html_200": "UPSTREAM_ERROR", "truncated_json_200": "UPSTREAM_ERROR", "invalid_json_200": "UPSTREAM_ERROR",
    "wrong_shape_200": "UPSTREAM_ERROR", "reset_before_headers": "NETWORK_ERROR",
    "hang_before_headers": "TIMEOUT_ERROR", "drip": "TIMEOUT_ERROR", "reset_mid_body": "NETWORK_ERROR",
    "drip_body": "TIMEOUT_ERROR",
    "body_100mb": "UPSTREAM_ERROR", "garbage_stream": "UPSTREAM_ERROR", "event_16mb": "UPSTREAM_ERROR",
}


@pytest.mark.parametrize(("protocol", "wire_name", "stream", "fault"), ALONE)
async def test_fault_without_a_backup_answers_the_spec_error(setup: Setup, protocol: str, wire_name: str,
                                                             stream: bool, fault: Fault) -> None:
    reset(setup)
    wire = setup.wires[wire_name]
    assert wire.faulty is not None
    wire.faulty.fault = fault.name
    faulty_calls = wire.faulty.requests
    started = now()
    try:
        resp = await call(setup, protocol, wire, stream, setup.key_alone)
    finally:
        wire.faulty.fault = None
    took = now() - started
    attempts = wire.faulty.requests - faulty_calls
    body = resp.json()
    row = await log_row(setup, resp.headers["x-trace-id"])
    assert resp.status_code == 502, resp.text[:300]
    # spec 7.4: the envelope, code = the 7.5 type
    assert body["success"] is False and body["traceId"] == resp.headers["x-trace-id"]
    assert body["timestamp"].endswith("Z")
    code = body["error"]["code"]
    if fault.name == "error_body_200":
        assert code == {"openai-chat": "UPSTREAM_ERROR", "anthropic-messages": "SERVICE_UNAVAILABLE",
                        "gemini": "SERVICE_UNAVAILABLE"}[wire_name]
    else:
        assert code == EXPECTED_ALONE[fault.name], body
    # The message names the limit that ended the last attempt: the body limit of a dripping body; for
    # a hung upstream the first-event limit of a stream, else the call's own (the last attempt had
    # less of it left than the 90 s first-byte limit; where both fall at once, the call's is named).
    message = body["error"]["message"]
    if fault.name == "drip_body":
        assert message == f"Upstream did not finish its answer within {BODY:g} s of its first byte"
    elif fault.name in ("hang_before_headers", "drip"):
        assert message.startswith("Upstream sent no first event within" if stream else "Upstream did not answer within")
    assert wire.key not in resp.text
    assert (row.status, row.error_code, row.channel_id) == (502, code, wire.primary_channel)
    assert row.attempts == attempts >= 1
    breaker = setup.gw.runtime.executor.breakers.states()[wire.primary_endpoint]
    assert breaker.failures == attempts or breaker.state.value == "OPEN"  # every attempt counted
    # Each attempt took its limit (none for an answer unreadable or cut), each retry waited the spec
    # 7.5 backoff of the error's type (no jitter here), and nothing ran past the application's timeout.
    policy = getattr(RETRY, code.lower())
    assert took == pytest.approx(answer_time(attempt_limit(fault.name, stream), attempts, policy), abs=CLOCK)


def answer_time(limit: float, attempts: int, policy: RetryPolicy) -> float:
    took = 0.0
    for retry in range(attempts):
        if retry:
            took += min(policy.initial_delay * policy.multiplier ** (retry - 1), policy.max_delay)
        took = min(took + limit, APP_TIMEOUT)
    return took
