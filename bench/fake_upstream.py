"""A fast fake model upstream for the benchmarks.

It speaks both wire formats a gateway forwards to:
- chat completions: POST /v1/chat/completions (Bearer auth), GET /v1/models;
- messages: POST /v1/messages (x-api-key + anthropic-version headers);
- the Responses API: POST /v1/responses (Bearer auth). Its answers echo the request's `instructions`
  and `tools`, as the service's response object does (so an agent's answer is as large as its
  instructions and tools), in the whole answer and in a stream's lifecycle events.

Answers are small, fixed and carry usage. `stream: true` gives N content
chunks as SSE (chat: `data:` lines, a usage chunk when the client asks for
`stream_options.include_usage`, then `data: [DONE]`; messages: the vendor's
named events ending with `message_stop`; Responses: the service's typed events ending with
`response.completed`).

It is a raw asyncio Protocol on uvloop answering HTTP/1.1 keep-alive with
precomputed bytes, so it is not the bottleneck of any target it sits behind.
GET /_bench/stats returns the number of inference calls served since start
(or the last POST /_bench/reset), which the harness compares with the
gateway's call log.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from typing import Callable

import orjson

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency of modelgate
    uvloop = None

MODEL = "bench-model"
ANSWER = "Hello from the fake upstream."
PROMPT_TOKENS = 12
COMPLETION_TOKENS = 7
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024


def _response(status: str, body: bytes, content_type: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 " + status.encode() + b"\r\n"
        b"Content-Type: " + content_type + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        b"\r\n" + body
    )


def _chunked(events: list[bytes], content_type: bytes = b"text/event-stream") -> bytes:
    """One HTTP chunk per SSE event, as real providers flush them."""
    return b"".join(_chunked_parts(events, content_type))


class Stream:
    """A streamed answer: whole, or in parts a paced upstream writes `--chunk-gap-ms` apart."""

    __slots__ = ("parts", "whole", "paced")

    def __init__(self, parts: list[bytes], paced: bool) -> None:
        self.parts = parts
        self.whole = b"".join(parts)
        self.paced = paced


def _chunked_parts(events: list[bytes], content_type: bytes = b"text/event-stream") -> list[bytes]:
    """The bytes of a chunked SSE answer, one item per event: a paced stream writes them apart."""
    head = (
        b"HTTP/1.1 200 OK\r\n"
        b"Content-Type: " + content_type + b"\r\n"
        b"Cache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    parts = [b"%x\r\n" % len(event) + event + b"\r\n" for event in events]
    parts[0] = head + parts[0]
    parts[-1] += b"0\r\n\r\n"
    return parts


def _split(text: str, n: int) -> list[str]:
    """`text` cut into `n` non-empty pieces (n is clamped to the text length)."""
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    pieces, pos = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        pieces.append(text[pos:pos + step])
        pos += step
    return pieces


def _usage() -> dict:
    return {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
    }


class Answers:
    """All response bytes, computed once."""

    def __init__(self, chunks: int, paced: bool = False) -> None:
        created = int(time.time())
        cid = "chatcmpl-bench0000000000000000"
        self.chat = _response("200 OK", orjson.dumps({
            "id": cid, "object": "chat.completion", "created": created, "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(),
        }))

        def chat_chunk(delta: dict, finish: str | None, with_usage: bool = False, usage: dict | None = None,
                       choices: bool = True) -> bytes:
            body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
                    if choices else []}
            if with_usage:
                body["usage"] = usage
            return b"data: " + orjson.dumps(body) + b"\n\n"

        # Long streams (hundreds of chunks) carry one short word per chunk, as token streams do.
        pieces = _split(ANSWER if chunks <= len(ANSWER) else "word " * chunks, chunks)

        def chat_events(with_usage: bool) -> list[bytes]:
            events = [chat_chunk({"role": "assistant", "content": pieces[0]}, None, with_usage)]
            events += [chat_chunk({"content": p}, None, with_usage) for p in pieces[1:]]
            events.append(chat_chunk({}, "stop", with_usage))
            return events

        done = b"data: [DONE]\n\n"
        self.chat_stream = Stream(_chunked_parts(chat_events(False) + [done]), paced)
        # With `stream_options.include_usage`, every chunk carries `"usage": null`, and one more chunk with no
        # choices the usage (OpenAI's API reference, ChatCompletionStreamOptions; tests/captures/azure_stream.sse).
        self.chat_stream_usage = Stream(_chunked_parts(
            chat_events(True) + [chat_chunk({}, None, True, _usage(), choices=False), done]), paced)

        mid = "msg_bench0000000000000000"
        self.messages = _response("200 OK", orjson.dumps({
            "id": mid, "type": "message", "role": "assistant", "model": MODEL,
            "content": [{"type": "text", "text": ANSWER}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": COMPLETION_TOKENS},
        }))

        def event(name: str, data: dict) -> bytes:
            return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **data}) + b"\n\n"

        msg_events = [
            event("message_start", {"message": {
                "id": mid, "type": "message", "role": "assistant", "model": MODEL, "content": [],
                "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1}}}),
            event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            event("ping", {}),
        ]
        msg_events += [event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}})
                       for p in pieces]
        msg_events += [
            event("content_block_stop", {"index": 0}),
            event("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                    "usage": {"output_tokens": COMPLETION_TOKENS}}),
            event("message_stop", {}),
        ]
        self.messages_stream = Stream(_chunked_parts(msg_events), paced)

        # The Responses API's response object (its API reference, "The response object"); `instructions`,
        # `tools` and the rest the request decides are filled in per request (`responses_answer`).
        rid = "resp_bench0000000000000000"
        item = {"id": "msg_bench0000000000000000", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": ANSWER, "annotations": [], "logprobs": []}]}
        self.response = {
            "id": rid, "object": "response", "created_at": created, "status": "completed", "error": None,
            "incomplete_details": None, "instructions": None, "max_output_tokens": None, "model": MODEL,
            "output": [item], "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": False, "temperature": 1.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
            "truncation": "disabled", "usage": {
                "input_tokens": PROMPT_TOKENS, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": COMPLETION_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS},
            "user": None, "metadata": {},
        }
        ref = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        middle = [{"type": "response.output_item.added", "output_index": 0,
                   "item": {**item, "status": "in_progress", "content": []}},
                  {"type": "response.content_part.added", **ref, "part": part}]
        middle += [{"type": "response.output_text.delta", **ref, "delta": p, "logprobs": []} for p in pieces]
        middle += [{"type": "response.output_text.done", **ref, "text": "".join(pieces), "logprobs": []},
                   {"type": "response.content_part.done", **ref, "part": {**part, "text": "".join(pieces)}},
                   {"type": "response.output_item.done", "output_index": 0, "item": item}]
        # Numbered after response.created and response.in_progress; response.completed comes last.
        self.responses_middle = [_typed_event({**e, "sequence_number": n}) for n, e in enumerate(middle, 2)]
        self.responses_paced = paced

        self.models = _response("200 OK", orjson.dumps({
            "object": "list",
            "data": [{"id": MODEL, "object": "model", "created": created, "owned_by": "bench"}],
        }))
        # Error bodies in each vendor's own shape, so a mis-wired target shows as errors.
        self.chat_unauthorized = _response("401 Unauthorized", orjson.dumps({"error": {
            "message": "Missing bearer token.", "type": "invalid_request_error",
            "param": None, "code": "invalid_api_key"}}))
        self.messages_unauthorized = _response("401 Unauthorized", orjson.dumps({
            "type": "error", "error": {"type": "authentication_error", "message": "x-api-key header is required"}}))
        self.bad_request = _response("400 Bad Request", orjson.dumps({"error": {
            "message": "Body is not valid JSON.", "type": "invalid_request_error",
            "param": None, "code": None}}))
        self.not_found = _response("404 Not Found", orjson.dumps({"error": {
            "message": "Unknown path.", "type": "invalid_request_error", "param": None, "code": "not_found"}}))


def _typed_event(data: dict) -> bytes:
    return b"event: " + data["type"].encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def responses_answer(answers: Answers, req: dict) -> "bytes | Stream":
    """The answer to a Responses request: its response object echoes what the request set."""
    response = {**answers.response, "model": req.get("model"), "instructions": req.get("instructions"),
                "tools": req.get("tools") or [], "tool_choice": req.get("tool_choice", "auto"),
                "max_output_tokens": req.get("max_output_tokens"), "store": req.get("store", True),
                "metadata": req.get("metadata") or {}}
    if not req.get("stream"):
        return _response("200 OK", orjson.dumps(response))
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    events = [_typed_event({"type": "response.created", "response": started, "sequence_number": 0}),
              _typed_event({"type": "response.in_progress", "response": started, "sequence_number": 1}),
              *answers.responses_middle,
              _typed_event({"type": "response.completed", "response": response,
                            "sequence_number": len(answers.responses_middle) + 2})]
    return Stream(_chunked_parts(events), answers.responses_paced)


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.streamed = 0


class Pacer:
    """Writes the next part of every paced stream once per gap: one timer for all streams."""

    def __init__(self, gap: float) -> None:
        self.gap = gap
        self.active: list[list] = []  # [protocol, parts, next index]
        self.timer: asyncio.TimerHandle | None = None

    def start(self, proto: "UpstreamProtocol", stream: Stream) -> None:
        proto.transport.write(stream.parts[0])
        self.active.append([proto, stream.parts, 1])
        if self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.gap, self._tick)

    def _tick(self) -> None:
        still = []
        for entry in self.active:
            proto, parts, i = entry
            if proto.transport is None or proto.transport.is_closing():
                continue
            proto.transport.write(parts[i])
            if i + 1 < len(parts):
                entry[2] = i + 1
                still.append(entry)
            else:
                proto.busy = False
                proto._drain()
        self.active = still
        self.timer = asyncio.get_running_loop().call_later(self.gap, self._tick) if still else None


class UpstreamProtocol(asyncio.Protocol):
    __slots__ = ("answers", "long", "counter", "delay", "pacer", "transport", "buf", "busy")

    def __init__(self, answers: Answers, counter: Counter, delay: float, pacer: Pacer | None = None,
                 long: Answers | None = None) -> None:
        self.answers = answers
        self.long = long or answers  # streams of models named `*-long`: many chunks, paced
        self.counter = counter
        self.delay = delay
        self.pacer = pacer
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.busy = False  # a delayed answer is pending; later pipelined requests wait

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._drain()

    def _drain(self) -> None:
        while self.buf and not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEADER_BYTES:
                    self.transport.close()
                return
            head = self.buf[:end]
            length = 0
            headers: dict[bytes, bytes] = {}
            lines = head.split(b"\r\n")
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
            if b"content-length" in headers:
                length = int(headers[b"content-length"])
            elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
                # Clients of this benchmark send a Content-Length; refuse rather than misparse.
                self.transport.write(self.answers.bad_request)
                self.transport.close()
                return
            if length > MAX_BODY_BYTES:
                self.transport.close()
                return
            total = end + 4 + length
            if len(self.buf) < total:
                return
            body = self.buf[end + 4:total]
            self.buf = self.buf[total:]
            method, _, rest = lines[0].partition(b" ")
            path = rest.partition(b" ")[0].partition(b"?")[0]
            answer = self._answer(method, path, headers, body)
            if self.delay > 0 and answer is not None and answer[1]:
                self.busy = True
                asyncio.get_running_loop().call_later(self.delay, self._send_later, answer[0])
                return
            if answer is not None:
                self._send(answer[0])

    def _send(self, data: "bytes | Stream") -> None:
        if not isinstance(data, Stream):
            self.transport.write(data)
        elif self.pacer is None or not data.paced:
            self.transport.write(data.whole)
        else:
            self.busy = True  # pipelined requests wait for the end of the stream
            self.pacer.start(self, data)

    def _send_later(self, data: "bytes | Stream") -> None:
        self.busy = False
        if self.transport is not None and not self.transport.is_closing():
            self._send(data)
            self._drain()

    def _answer(self, method: bytes, path: bytes, headers: dict[bytes, bytes],
                body: bytes) -> tuple["bytes | Stream", bool] | None:
        """The response bytes and whether it is an inference call (the delay applies to those)."""
        a = self.answers
        inference = self._inference(path, headers) if method == b"POST" else None
        if inference is not None:
            refusal, answer = inference
            if refusal is not None:
                return refusal, False
            try:
                req = orjson.loads(body)
            except orjson.JSONDecodeError:
                return a.bad_request, False
            self.counter.calls += 1
            if req.get("stream"):
                self.counter.streamed += 1
            return answer(req), True
        if method == b"GET" and path.endswith(b"/models"):
            return a.models, False
        if path == b"/_bench/stats":
            return _response("200 OK", orjson.dumps(
                {"calls": self.counter.calls, "streamed": self.counter.streamed})), False
        if method == b"POST" and path == b"/_bench/reset":
            self.counter.calls = self.counter.streamed = 0
            return _response("200 OK", b"{}"), False
        return a.not_found, False

    def _inference(self, path: bytes, headers: dict[bytes, bytes],
                   ) -> tuple[bytes | None, Callable[[dict], "bytes | Stream"]] | None:
        """The refusal of a call without the wire format's credentials (None: none) and the answer of one
        with them, for the inference endpoints of the three wire formats."""
        a = self.answers
        bearer = headers.get(b"authorization", b"").startswith(b"Bearer ")
        if path.endswith(b"/chat/completions"):
            return (None if bearer else a.chat_unauthorized), self._chat
        if path.endswith(b"/messages"):
            keyed = headers.get(b"x-api-key") and headers.get(b"anthropic-version")
            return (None if keyed else a.messages_unauthorized), self._messages
        if path.endswith(b"/responses"):
            return (None if bearer else a.chat_unauthorized), lambda req: responses_answer(self._streams(req), req)
        return None

    def _chat(self, req: dict) -> "bytes | Stream":
        if not req.get("stream"):
            return self.answers.chat
        s = self._streams(req)
        return s.chat_stream_usage if (req.get("stream_options") or {}).get("include_usage") else s.chat_stream

    def _messages(self, req: dict) -> "bytes | Stream":
        return self._streams(req).messages_stream if req.get("stream") else self.answers.messages

    def _streams(self, req: dict) -> Answers:
        model = req.get("model")
        return self.long if isinstance(model, str) and model.endswith("-long") else self.answers

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(host: str, port: int, chunks: int, delay_ms: float, ready: asyncio.Event | None = None,
                long_chunks: int = 300, gap_ms: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    answers, counter = Answers(chunks), Counter()
    long = Answers(long_chunks, paced=gap_ms > 0)
    pacer = Pacer(gap_ms / 1000.0) if gap_ms > 0 else None
    server = await loop.create_server(
        lambda: UpstreamProtocol(answers, counter, delay_ms / 1000.0, pacer, long), host, port, backlog=4096,
        reuse_address=True,
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"fake upstream listening on http://{host}:{port} (chunks={chunks}, delay={delay_ms} ms; "
          f"models *-long: {long_chunks} chunks {gap_ms} ms apart)", flush=True)
    if ready is not None:
        ready.set()
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--chunks", type=int, default=8, help="content chunks per streamed answer")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="fixed delay before each inference answer")
    parser.add_argument("--long-chunks", type=int, default=300,
                        help="content chunks of the streams of models named *-long")
    parser.add_argument("--chunk-gap-ms", type=float, default=2.0,
                        help="write the events of *-long streams this far apart (0: in one write)")
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("the benchmark upstream listens on loopback only")
    runner = uvloop.run if uvloop is not None else asyncio.run
    runner(serve(args.host, args.port, args.chunks, args.delay_ms, long_chunks=args.long_chunks,
                 gap_ms=args.chunk_gap_ms))


if __name__ == "__main__":
    main()
