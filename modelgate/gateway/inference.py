"""The inference hot path: auth, validation, routing, upstream call, response, call log.

Order of checks (spec 5 rule 6): IP blacklist, key, rate limit, then protocol
handling. Auth refusals use the short bodies of 7.3 on every path. Everything
that differs between client protocols (where the key is, required headers, the
7.2 body, the wire formats) is the codec's business (protocols/base.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import orjson

from modelgate import errors, logs
from modelgate.auth.client_ip import forwarded_address
from modelgate.errors import ErrorType, GatewayError, UpstreamError
from modelgate.gateway import metrics
from modelgate.gateway.asgi import (
    SSE_HEADERS,
    ClientDisconnected,
    Receive,
    Scope,
    Send,
    read_body,
    request_headers,
    send_bytes,
    send_error,
)
from modelgate.protocols.base import ClientCodec, NativeStreamTap, StreamEncoder, bearer_token
from modelgate.protocols.body import ClientBody, shed, whole
from modelgate.protocols.model_name import model_field, set_model
from modelgate.protocols.ir import (
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from modelgate.gateway.runtime import ERROR_BODY_BYTES, read_capped
from modelgate.providers.base import (
    Endpoint,
    GuardedDecoder,
    StreamDecoder,
    UpstreamRequest,
    read_answer,
    read_native_answer,
    prepare,
    refusal,
    stream_refusal,
    unreadable,
)
from modelgate.providers.registry import get_kind
from modelgate.providers.output_caps import stated_cap
from modelgate.providers.tool_rules import fit_tool_names, own_names
from modelgate.routing.events import Clock
from modelgate.routing.executor import CallContext
from modelgate.routing.snapshot import AppEntry, KeyEntry, Route, Snapshot
from modelgate.safetext import shown
from modelgate.storage.call_record import CallRecord
from modelgate.tracing import current_trace_id, new_trace_id

log = logging.getLogger("modelgate.gateway")

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_KEY_BYTES = 256
# orjson encodes at most 254 nested levels; a deeper body could be read but never forwarded.
MAX_JSON_DEPTH = 254


# Content types of a whole body, not a stream: an error object or a proxy's page.
NOT_A_STREAM = ("application/json", "text/html")


@dataclass(slots=True)
class StreamHandle:
    """An upstream stream that has produced its first output, ready to be relayed."""

    response: aiohttp.ClientResponse
    first: bytes
    adapter: Any
    endpoint: Endpoint
    tap: NativeStreamTap | None = None
    decoder: StreamDecoder | None = None
    encoder: StreamEncoder | None = None
    usage: Usage = field(default_factory=Usage)
    ended: bool = False  # no more upstream data will be relayed
    failure: UpstreamError | None = None  # why the stream ended early, if it did
    last_data: float = 0.0  # the call's clock time (Executor.clock) of the last complete upstream event
    events: int = 0  # pass-through: the tap's count of events at the last look
    last_sent: float = 0.0  # the call's clock time of the last bytes sent to the client

    def error_event(self, failure: UpstreamError) -> bytes:
        """The client protocol's in-stream error, continuing the stream the client has seen so far."""
        source: Any = self.encoder if self.encoder is not None else self.tap
        return source.error_event(failure.error_type.value, failure.message)


class InferenceHandler:
    def __init__(self, runtime: Any) -> None:
        self.rt = runtime
        # Per (application, client protocol): whether its last call decoded the whole body anyway
        # (a conversion), so the next one skips the typed view.
        self._decodes_whole: dict[tuple[int, str], bool] = {}

    # --- auth ---------------------------------------------------------------

    def client_ip(self, scope: Scope, headers: dict[bytes, bytes]) -> str | None:
        if self.rt.settings.gateway.trust_forwarded_for:
            forwarded = headers.get(b"x-forwarded-for")
            if forwarded:
                address = forwarded_address(forwarded.decode("latin-1"))
                if address is not None:
                    return address
        client = scope.get("client")
        return client[0] if client else None

    async def authenticate(self, raw_key: bytes | None, ip: str | None) -> tuple[KeyEntry, AppEntry]:
        snapshot = self.rt.snapshot
        if snapshot.blacklist.blocks(ip):
            raise errors.access_denied("Calls from this IP address are not allowed")
        if not raw_key:
            raise errors.unauthorized("Missing API key")
        if len(raw_key) > MAX_KEY_BYTES:  # never hashed: a key we issued is 46 bytes
            raise errors.unauthorized("Invalid API key")
        key = snapshot.keys_by_hash.get(self.rt.hash_key(raw_key))
        if key is None or not key.enabled:
            raise errors.unauthorized("Invalid API key")
        app = snapshot.apps.get(key.application_id)
        if app is None or not app.enabled:
            raise errors.unauthorized("The application of this API key is disabled")
        wait = await self.rt.limiter.take(key.id, key.rate_capacity, key.rate_refill_per_second)
        if wait:
            raise errors.rate_limited("Rate limit exceeded for this API key", wait)
        return key, app

    # --- GET /v1/models --------------------------------------------------------

    async def list_models(self, scope: Scope, receive: Receive, send: Send, model_id: str | None = None) -> None:
        """`GET /v1/models`, or with `model_id` one of them (`GET /v1/models/{model}`, the SDKs'
        `models.retrieve`): only the models visible to the key's application."""
        trace_id = new_trace_id()
        headers = request_headers(scope)
        try:
            _, app = await self.authenticate(bearer_token(headers), self.client_ip(scope, headers))
            if model_id is None:
                routes = sorted(self.rt.snapshot.models_for(app), key=lambda r: r.model_id)
                body = {"object": "list", "data": [_model_entry(r) for r in routes]}
            else:
                body = _model_entry(served_routes(self.rt.snapshot, app, model_id)[0])
        except GatewayError as err:
            await send_error(send, err, trace_id)
            return
        await send_bytes(send, 200, orjson.dumps(body), trace_id)

    # --- /v1/responses/{id}... ---------------------------------------------------------

    async def stateless_refusal(self, scope: Scope, receive: Receive, send: Send, codec: ClientCodec) -> None:
        """Calls on stored responses (retrieve, delete, cancel, input items): the gateway keeps none,
        so after the usual key checks they get a 400 that says so."""
        trace_id = new_trace_id()
        headers = request_headers(scope)
        try:
            await self.authenticate(codec.api_key(headers), self.client_ip(scope, headers))
            raise errors.invalid_request(
                f"{scope['method']} {scope['path']}: modelgate stores no responses (store is always false); "
                "send the whole conversation in 'input' instead of referring to an earlier response")
        except GatewayError as err:
            await send_error(send, err, trace_id, codec.validation_body)

    # --- POST /v1/chat/completions, /alt/v1/messages and /v1/responses ----------------

    async def infer(self, scope: Scope, receive: Receive, send: Send, codec: ClientCodec) -> None:
        started = time.perf_counter()
        trace_id = new_trace_id()
        current_trace_id.set(trace_id)
        headers = request_headers(scope)
        ip = self.client_ip(scope, headers)
        record = CallRecord(
            trace_id=trace_id, protocol=codec.protocol.value, model="", status=500, client_ip=ip, stream=False
        )
        ctx: CallContext | None = None
        admitted = recorded = False
        tracer = self.rt.tracer  # None unless OpenTelemetry is configured (then tracing costs one check)
        if tracer is not None:
            started_ns = time.time_ns()
            attempts: list[Any] = []
        try:
            key, app = await self.authenticate(codec.api_key(headers), ip)
            record.api_key_id, record.application_id = key.id, app.id
            codec.check_headers(headers)
            usual = (app.id, codec.native_wire)
            body, model, stream = read_request(codec, await read_body(receive, MAX_BODY_BYTES), headers,
                                               typed=not self._decodes_whole.get(usual, False))
            record.model, record.stream = model, stream
            routes = served_routes(self.rt.snapshot, app, model)
            converts = self._decodes_whole[usual] = not _passes_through(codec, routes[0])
            if converts and (pending := codec.prefetch(body)) is not None:
                await pending
            if self.rt.in_flight >= self.rt.max_in_flight:
                raise errors.gateway_full(self.rt.in_flight)
            self.rt.in_flight += 1
            admitted = True
            ctx = CallContext(trace_id, key, app, model, stream, self.rt.executor.deadline(app.timeout_seconds))
            call = _Call(self, codec, body, model, ctx, codec.upstream_headers(headers))
            del body  # the call's own from here: a conversion lets its tree go before the upstream answers
            open_stream, complete = call.open_stream, call.complete
            if tracer is not None:
                open_stream, complete = tracer.wrap(open_stream, attempts), tracer.wrap(complete, attempts)
            if stream:
                handle = await self.rt.executor.run(ctx, routes, open_stream)
                _note_route(record, ctx)
                await self._relay(receive, send, call, handle, record, started)
            else:
                payload, usage = await self._run_while_connected(receive, ctx, routes, complete)
                _note_route(record, ctx)
                _note_usage(record, usage)
                record.status = 200
                # Every whole answer, error or not, is recorded before it leaves: a process killed as
                # it sends keeps the row.
                self._record(record, started)
                recorded = True
                await send_bytes(send, 200, payload, trace_id)
        except GatewayError as err:
            record.status, record.error_code = err.status, err.code
            if ctx is not None:
                _note_route(record, ctx)
            logs.info(log, "call refused trace_id=%s status=%s code=%s: %s", trace_id, err.status, err.code, err.message)
            self._record(record, started)
            recorded = True
            await send_error(send, err, trace_id, codec.validation_body)
        except ClientDisconnected:
            record.status, record.error_code = 499, "CLIENT_DISCONNECTED"
            if ctx is not None:
                _note_route(record, ctx)
            logs.info(log, "client disconnected trace_id=%s; call cancelled", trace_id)
        except Exception:
            log.exception("internal error trace_id=%s", trace_id)
            record.error_code = "INTERNAL_ERROR"
            if record.first_byte_ms is None:  # else the stream's headers are out: it just ends
                record.status = 500
                self._record(record, started)
                recorded = True
                await send_error(send, errors.internal_error(), trace_id)
        finally:
            if admitted:
                self.rt.in_flight -= 1
            if not recorded:
                self._record(record, started)
            metrics.observe(record)
            if tracer is not None:
                tracer.finish(record, started_ns, attempts)
            if record.status == 200:
                logs.info(
                    log, "call trace_id=%s key=%s model=%s channel=%s status=%s tokens=%s/%s latency_ms=%.1f",
                    trace_id, record.api_key_id, record.model, record.channel_id, record.status,
                    record.prompt_tokens, record.completion_tokens, record.latency_ms,
                )

    def _record(self, record: CallRecord, started: float) -> None:
        record.latency_ms = (time.perf_counter() - started) * 1000.0
        self.rt.writer.record(record)

    async def _run_while_connected(self, receive: Receive, ctx: CallContext, routes: list[Route], attempt: Any) -> Any:
        """Run a non-streamed call; the client going away cancels it (ClientDisconnected)."""
        loop = self.rt.loop
        task = asyncio.current_task(loop)
        gone = False

        def on_disconnect(watcher: asyncio.Future[None]) -> None:
            nonlocal gone
            if not watcher.cancelled() and watcher.exception() is None and task is not None:
                gone = True
                task.cancel()

        watcher = loop.create_task(_wait_disconnect(receive))
        watcher.add_done_callback(on_disconnect)
        try:
            return await self.rt.executor.run(ctx, routes, attempt)
        except asyncio.CancelledError:
            if not gone:
                raise  # cancelled from outside (server shutdown)
            task.uncancel()  # type: ignore[union-attr]
            raise ClientDisconnected() from None
        finally:
            watcher.remove_done_callback(on_disconnect)
            watcher.cancel()

    async def _relay(
        self, receive: Receive, send: Send, call: "_Call", handle: StreamHandle, record: CallRecord, started: float,
    ) -> None:
        """Relay an opened stream chunk by chunk; a client disconnect cancels the upstream read.

        Whatever happens, the endpoint's breaker hears how the stream ended (the `finally`), so a
        HALF_OPEN trial slot is never left taken.
        """
        trace_id = call.ctx.trace_id
        failure: UpstreamError | None = None
        settled = False
        watch: _StreamWatch | None = None
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [*SSE_HEADERS, (b"x-trace-id", trace_id.encode())]})
            record.status = 200
            record.first_byte_ms = (time.perf_counter() - started) * 1000.0
            # A stream the upstream already finished (short answers of fast models) is written out at
            # once: there is no upstream call left to cancel or to keep alive.
            watch = None if handle.ended else _StreamWatch(
                handle, receive, send, self.rt.settings.gateway.stream_keepalive_seconds,
                call.ctx.app.timeout_seconds, call.codec.keepalive(), call.clock, self.rt.loop)
            try:
                failure = await call.pump(handle, send)
            except asyncio.CancelledError:
                if watch is None or watch.reason is None:
                    raise  # cancelled from outside (server shutdown)
                asyncio.current_task().uncancel()  # type: ignore[union-attr]
            reason = watch.reason if watch is not None else None
            if reason == "disconnected":
                record.status, record.error_code = 499, "CLIENT_DISCONNECTED"
                logs.info(log, "client disconnected trace_id=%s; upstream call cancelled", trace_id)
            elif reason == "stalled":
                failure = UpstreamError(ErrorType.TIMEOUT_ERROR,
                                        f"Upstream sent no complete event for {watch.gap_limit:g} s")  # type: ignore[union-attr]
                await send({"type": "http.response.body", "more_body": True, "body": handle.error_event(failure)})
                await send({"type": "http.response.body", "body": b""})
            if failure is not None:
                record.error_code = failure.error_type.value
                log.warning("stream broke trace_id=%s type=%s: %s", trace_id, failure.error_type.value,
                            failure.message)
            # A clean end or a disconnect is no upstream fault.
            self.rt.executor.report(call.ctx, failure)
            settled = True
        finally:
            if not settled:  # an error of our own: no outcome, but the trial slot goes back
                self.rt.executor.abandon(call.ctx)
            if watch is not None:
                watch.close()
            handle.response.close()
            _note_usage(record, handle.usage)


Answer = TypeVar("Answer")


async def _fetch_refused(answer: tuple[int, Mapping[str, str], bytes], adapter: Any,
                         endpoint: Endpoint) -> UpstreamError | None:
    status, headers, data = answer
    return refusal(adapter, status, data, headers, endpoint) if status >= 400 else None


async def _stream_refused(resp: aiohttp.ClientResponse, adapter: Any, endpoint: Endpoint) -> UpstreamError | None:
    if resp.status < 400:
        return None
    try:
        body = await read_capped(resp, ERROR_BODY_BYTES, truncate=True)
    finally:
        resp.close()
    return refusal(adapter, resp.status, body, resp.headers, endpoint)


class _Call:
    """The per-call attempt functions handed to the executor."""

    __slots__ = ("h", "codec", "body", "answer", "tool_names", "max_tokens", "model", "ctx", "client_headers", "clock")

    def __init__(self, handler: InferenceHandler, codec: ClientCodec, body: Mapping[str, Any], model: str,
                 ctx: CallContext, client_headers: dict[str, str]) -> None:
        self.h = handler
        self.codec = codec
        self.body = body
        self.answer: dict[str, Any] = {}  # what of the request a converted answer reads (codec.answer_context)
        self.tool_names: dict[str, str] = {}  # a converted call's tool-name stand-ins -> the client's names
        self.max_tokens: int | None = None  # the output tokens the call asks for
        self.model = model
        self.ctx = ctx
        self.client_headers = client_headers  # forwarded on pass-through only
        self.clock = handler.rt.executor.clock  # the call's deadlines and stream gaps are on it

    def _request(self, route: Route, endpoint: Endpoint) -> tuple[Any, UpstreamRequest, bool]:
        adapter: Any = get_kind(route.provider_kind).adapter_for(self.codec.native_wire)
        native = adapter.wire == self.codec.native_wire
        if native:
            self.max_tokens = self.codec.output_limit(self.body)
            req = adapter.build_native_request(self.body, route.upstream_model, endpoint, self.ctx.stream,
                                               self.client_headers, self._learnt_cap(route, endpoint),
                                               True if "reasoning" in route.capabilities else None)
            self.body = shed(self.body)  # a body the typed view left to validate: its tree goes now too
        else:
            body = whole(self.body)
            ir = self.codec.to_ir(body)
            if not getattr(adapter, "positional_system", False):
                ir = ir.with_system_hoisted()
            if "reasoning" in route.capabilities:
                ir = dataclasses.replace(ir, reasoning_model=True)
            ir, self.tool_names = fit_tool_names(ir, adapter)
            self.max_tokens = ir.max_tokens
            if (cap := self._learnt_cap(route, endpoint)) is not None:
                ir = dataclasses.replace(ir, max_tokens=cap)
            try:
                req = adapter.build_request(ir, route.upstream_model, endpoint)
            except orjson.JSONEncodeError as err:
                if "Recursion limit" not in str(err):
                    raise
                # Within the limit as sent (parse_json), a level or two deeper in the provider's format.
                raise errors.invalid_request(f"The request body, converted for this model's provider, would be "
                                             f"nested more than {MAX_JSON_DEPTH} levels deep") from None
            # The tree and the IR go now, while the CPU's caches hold them (protocols/body.py); another
            # attempt decodes the bytes again.
            self.answer = self.codec.answer_context(body)
            self.body = shed(body)
        return adapter, req, native

    def _learnt_cap(self, route: Route, endpoint: Endpoint) -> int | None:
        """The model's output cap learnt from an earlier refusal, where the call asks for more."""
        cap = self.h.rt.output_caps.get(endpoint.provider_id, route.upstream_model)
        return cap if cap is not None and self.max_tokens is not None and self.max_tokens > cap else None

    def _capped(self, error: UpstreamError, route: Route, endpoint: Endpoint) -> bool:
        """Whether the refusal names an output cap below what the call asked for: learnt, so that the call
        is sent again at it, and later calls from the start (providers/output_caps.py). On pass-through
        too: a client cannot know the cap of the model behind a gateway id (opencode asks every model
        for 32,000 tokens; DeepSeek's chat model takes 8,192)."""
        cap = stated_cap(error.message) if error.error_type == ErrorType.INVALID_REQUEST else None
        if cap is None or cap < 1 or self.max_tokens is None or cap >= self.max_tokens:
            return False
        log.info("output cap learnt trace_id=%s model=%s cap=%d", self.ctx.trace_id, route.upstream_model, cap)
        self.h.rt.output_caps.learn(endpoint.provider_id, route.upstream_model, cap)
        return True

    def _timeout(self) -> float:
        remaining = self.h.rt.executor.remaining(self.ctx)
        if remaining <= 0:
            raise UpstreamError(ErrorType.TIMEOUT_ERROR, "The application's timeout was reached")
        return remaining

    async def _answered(self, route: Route, endpoint: Endpoint, send: Callable[[UpstreamRequest], Awaitable[Answer]],
                        refused: Callable[[Answer, Any, Endpoint], Awaitable[UpstreamError | None]],
                        ) -> tuple[Any, bool, Answer]:
        """(adapter, native, answer) of this attempt's request. A call refused for asking more output than
        the model's cap is sent once more at that cap, within the same attempt (`_capped`)."""
        again = True
        while True:
            adapter, req, native = self._request(route, endpoint)
            answer = await send(req)
            error = await refused(answer, adapter, endpoint)
            if error is None:
                return adapter, native, answer
            if not again or not self._capped(error, route, endpoint):
                raise error
            again = False

    async def _fetch(self, req: UpstreamRequest) -> tuple[int, Mapping[str, str], bytes]:
        return await self.h.rt.fetch(req, self._timeout())

    async def complete(self, route: Route, endpoint: Endpoint) -> tuple[bytes, Usage]:
        await prepare(get_kind(route.provider_kind).adapter, endpoint)
        adapter, native, (_, resp_headers, data) = await self._answered(route, endpoint, self._fetch, _fetch_refused)
        if not native:
            resp_ir = read_answer(adapter, data, resp_headers, endpoint)
            if self.tool_names:
                resp_ir = own_names(resp_ir, self.tool_names)
            return self.codec.encode_response(resp_ir, self.model, self.answer), resp_ir.usage
        parsed = read_native_answer(adapter, data, resp_headers, endpoint)
        if isinstance(parsed.get("model"), str) and parsed["model"] != self.model:
            data = set_model(data, model_field(self.model), 1)
        return data, self.codec.native_usage(parsed)

    async def open_stream(self, route: Route, endpoint: Endpoint) -> StreamHandle:
        await prepare(get_kind(route.provider_kind).adapter, endpoint)
        # Up to the first event the executor may still retry or fail over, so this attempt gets
        # only the per-attempt first-byte limit of the call's remaining time.
        timeout = min(self._timeout(), self.h.rt.settings.upstream.stream_first_byte_timeout_seconds)
        resp: aiohttp.ClientResponse | None = None
        try:
            async with asyncio.timeout(timeout):
                adapter, native, opened = await self._answered(route, endpoint, self._send, _stream_refused)
                resp = opened  # closed below if anything fails
                if opened.headers.get("content-type", "").lower().startswith(NOT_A_STREAM):
                    body = await read_capped(opened, ERROR_BODY_BYTES, truncate=True)
                    raise stream_refusal(adapter, body, opened.headers, endpoint)
                if native:
                    handle = StreamHandle(opened, b"", adapter, endpoint, tap=self.codec.native_stream_tap(self.body))
                else:
                    handle = StreamHandle(opened, b"", adapter, endpoint, decoder=GuardedDecoder(adapter.stream_decoder()),
                                          encoder=self.codec.stream_encoder(self.model, self.answer))
                while not handle.first:
                    chunk = await opened.content.readany()
                    if chunk:
                        handle.first = self._translate(handle, chunk, self.clock.monotonic(), first=True)
                        continue
                    handle.first = self._finish(handle, first=True)
                    if not handle.first or handle.failure is not None:
                        raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream closed the stream without data")
            return handle
        except BaseException as exc:
            if resp is not None:
                resp.close()
            if isinstance(exc, aiohttp.ConnectionTimeoutError):
                raise UpstreamError(ErrorType.TIMEOUT_ERROR, "Upstream did not accept a connection within "
                                    f"{self.h.rt.settings.upstream.connect_timeout_seconds:g} s")
            if isinstance(exc, (TimeoutError, aiohttp.ServerTimeoutError)):
                raise UpstreamError(ErrorType.TIMEOUT_ERROR, f"Upstream sent no first event within {timeout:g} s")
            if isinstance(exc, aiohttp.ClientError):
                raise UpstreamError(ErrorType.NETWORK_ERROR, f"Upstream stream failed ({type(exc).__name__})")
            raise

    async def _send(self, req: UpstreamRequest) -> aiohttp.ClientResponse:
        return await self.h.rt.http.request(req.method, req.url, headers=req.headers, data=req.body,
                                            timeout=self.h.rt.connect_limit)

    def _translate(self, handle: StreamHandle, chunk: bytes, now: float, first: bool = False) -> bytes:
        """The client's bytes for an upstream chunk read at `now` (the call's clock)."""
        tap = handle.tap
        if tap is None:
            events = handle.decoder.feed(chunk)  # type: ignore[union-attr]
            if events:
                handle.last_data = now
            return self._encode(handle, events, first)
        try:
            out = tap.filter(chunk)
        except UpstreamError:
            raise
        except Exception as exc:  # the taps only look; still, nothing unreadable may escape untyped
            raise unreadable("stream event", exc) from None
        if tap.events != handle.events:
            handle.events = tap.events
            handle.last_data = now
        if tap.usage is not None:
            handle.usage = tap.usage
        if tap.error is not None:
            error = stream_refusal(handle.adapter, tap.error, {}, handle.endpoint)
            if first:
                raise error  # nothing reached the client yet: retry or fail over
            # The upstream's own error event is forwarded; the protocol's end follows it.
            handle.ended, handle.failure = True, error
            return out + tap.after_error
        # The protocol's end marker ends the relay, whenever the upstream closes its side.
        handle.ended = tap.finished
        return out

    def _encode(self, handle: StreamHandle, events: list[StreamEvent], first: bool = False) -> bytes:
        encoder = handle.encoder
        out = []
        for event in events:
            if isinstance(event, StreamError):
                event.message = errors.redact(event.message, handle.endpoint.api_key)
                error = UpstreamError(_error_type(event.error_type), event.message)
                if first:
                    # Nothing reached the client yet: let the executor retry or fail over.
                    raise error
                handle.ended, handle.failure = True, error
            elif isinstance(event, (StreamStart, UsageUpdate, StreamEnd)):
                handle.usage = handle.usage.merged(event.usage)
                handle.ended = handle.ended or isinstance(event, StreamEnd)
            elif self.tool_names and isinstance(event, ToolCallStart):
                event.name = self.tool_names.get(event.name, event.name)
            out.append(encoder.encode(event))  # type: ignore[union-attr]
        return b"".join(out)

    def _finish(self, handle: StreamHandle, first: bool = False) -> bytes:
        """Upstream EOF: the decoder's closing events; for pass-through, the same rule as the
        decoders apply: a stream that gave its stop reason gets its missing end marker, one cut
        before that ends with the protocol's error event."""
        handle.ended = True
        tap = handle.tap
        if tap is not None:
            if tap.finished:
                return b""
            if tap.stopped:
                return tap.end_marker
            handle.failure = UpstreamError(ErrorType.NETWORK_ERROR, "Upstream stream ended before completion")
            return handle.error_event(handle.failure)
        return self._encode(handle, handle.decoder.close(), first)  # type: ignore[union-attr]

    async def pump(self, handle: StreamHandle, send: Send) -> UpstreamError | None:
        """Forward the stream; returns the upstream failure that cut it short, if any.

        Keep-alives and the stall limit are the relay's business (InferenceHandler._relay).
        """
        clock = self.clock
        handle.last_sent = handle.last_data = clock.monotonic()
        content = handle.response.content
        # Bytes are sent as soon as it is known whether more follow: the last ones end the response in
        # the same message (and socket write) as the chunked body's terminator.
        pending = handle.first
        failure: UpstreamError | None = None  # raised while reading, not yet told to the client
        try:
            while not handle.ended:
                if pending:
                    await send({"type": "http.response.body", "body": pending, "more_body": True})
                    pending = b""
                chunk = await content.readany()
                now = clock.monotonic()  # read once a chunk
                pending = self._translate(handle, chunk, now) if chunk else self._finish(handle)
                if pending:
                    handle.last_sent = now
        except UpstreamError as err:
            failure = err
        except aiohttp.ClientError as exc:
            failure = UpstreamError(ErrorType.NETWORK_ERROR, f"Upstream stream failed ({type(exc).__name__})")
        if failure is not None:
            pending = handle.error_event(failure)
        await send({"type": "http.response.body", "body": pending})
        return failure or handle.failure


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _StreamWatch:
    """Watches a relayed stream from the side while the relay reads and writes it.

    The relay runs in the request's own task; a client disconnect or an upstream
    stall cancels that task (with `reason` saying why), and idle periods get
    keep-alives. One timer, set for whichever is due first (the next keep-alive or
    the stall limit), does this, where a timeout around every read, or a second
    task for the relay, cost more per stream. The stall limit counts from the last
    complete upstream event, so a stream dripping bytes that never finish an event
    is cut at the limit too.
    """

    def __init__(self, handle: StreamHandle, receive: Receive, send: Send, keepalive: float,
                 gap_limit: float, keepalive_bytes: bytes, clock: Clock, loop: asyncio.AbstractEventLoop) -> None:
        self.handle = handle
        self.clock = clock  # the handle's times are on it; the runtime's clock is the loop's, as the timer's
        self.send = send
        self.keepalive = keepalive
        self.gap_limit = gap_limit
        self.keepalive_bytes = keepalive_bytes
        self.reason: str | None = None  # "disconnected" | "stalled", once the relay was cancelled
        self._task = asyncio.current_task(loop)
        self._loop = loop
        self._sending: asyncio.Future[None] | None = None
        self._closed = False
        self._watcher = loop.create_task(_wait_disconnect(receive))
        self._watcher.add_done_callback(self._on_disconnect)
        self._timer = self._loop.call_later(min(keepalive, gap_limit), self._tick)

    def _stop_relay(self, reason: str) -> None:
        if self.reason is None and self._task is not None:
            self.reason = reason
            self._task.cancel()

    def _on_disconnect(self, watcher: asyncio.Future[None]) -> None:
        if not watcher.cancelled():
            self._stop_relay("disconnected")

    def _tick(self) -> None:
        now = self.clock.monotonic()
        stall_at = self.handle.last_data + self.gap_limit
        if now >= stall_at:
            self._stop_relay("stalled")
            return
        if now - self.handle.last_sent >= self.keepalive and (self._sending is None or self._sending.done()):
            self.handle.last_sent = now
            self._sending = self._loop.create_task(self._send_keepalive())
        next_at = min(self.handle.last_sent + self.keepalive, stall_at)
        self._timer = self._loop.call_later(max(next_at - now, 0.001), self._tick)

    async def _send_keepalive(self) -> None:
        if self._closed:  # the relay ended before this task got to run
            return
        with contextlib.suppress(Exception):  # a client that left is the disconnect watcher's business
            await self.send({"type": "http.response.body", "body": self.keepalive_bytes, "more_body": True})

    def close(self) -> None:
        self._closed = True
        self._timer.cancel()
        self._watcher.remove_done_callback(self._on_disconnect)
        self._watcher.cancel()


def _error_type(name: str) -> ErrorType:
    try:
        return ErrorType(name)
    except ValueError:
        return ErrorType.UNKNOWN_ERROR


def _note_usage(record: CallRecord, usage: Usage) -> None:
    record.prompt_tokens, record.completion_tokens = usage.input_tokens, usage.output_tokens
    record.cache_read_tokens, record.cache_write_tokens = usage.cache_read_tokens, usage.cache_write_tokens


def _note_route(record: CallRecord, ctx: CallContext) -> None:
    record.attempts = ctx.attempts
    if ctx.route is not None:
        record.channel_id = ctx.route.channel_id
        record.provider_kind = ctx.route.provider_kind


def read_request(codec: ClientCodec, raw: bytes, headers: dict[bytes, bytes],
                 typed: bool = True) -> tuple[Any, str, bool]:
    """(body, model, stream) of a valid request: through the codec's typed view when it knows
    the request (no dict tree; `typed`: worth trying), else parsed and validated (the codec's
    own errors). Both give the same result."""
    if typed:
        read = codec.read_typed(raw, headers)
        if read is not None:
            return read
    body = parse_json(raw)
    model, stream = codec.validate(body, headers)
    return body, model, stream


def _passes_through(codec: ClientCodec, route: Route) -> bool:
    """Whether a call on `route` forwards the client's own bytes: else a conversion decodes the
    whole body, and the typed view, which pass-through only needs, would be paid for nothing."""
    return get_kind(route.provider_kind).adapter_for(codec.native_wire).wire == codec.native_wire


def served_routes(snapshot: Snapshot, app: AppEntry, model: str) -> list[Route]:
    """The routes of `model` the app may use: 403 when only channels the app is not authorised for
    serve it, 404 when none does."""
    routes, exists = snapshot.routes_for(app, model)
    if not routes:
        if exists:
            raise errors.access_denied(f"The application is not authorised for a channel serving '{shown(model)}'")
        raise errors.not_found(f"The model '{shown(model)}' is not served by this gateway")
    return routes


def _model_entry(route: Route) -> dict[str, Any]:
    return {"id": route.model_id, "object": "model", "created": route.created, "ownedBy": route.owned_by}


def parse_json(raw: bytes) -> Any:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise errors.invalid_request("The request body is not valid JSON") from None
    # Encoding it again (C speed) is the check. Only a body of that many bytes can be that deep:
    # a cheaper bound than counting its brackets, which cost twice the encoding on agent bodies.
    if len(raw) > 2 * MAX_JSON_DEPTH:
        try:
            orjson.dumps(parsed)
        except orjson.JSONEncodeError:
            raise errors.invalid_request(
                f"The request body is nested more than {MAX_JSON_DEPTH} levels deep") from None
    return ClientBody(parsed, raw) if isinstance(parsed, dict) else parsed
