"""A misbehaving upstream: a raw HTTP/1.1 server in front of a well-behaved fake of one wire
format, that answers each request with the armed fault.

Raw sockets rather than aiohttp.web, because several faults live below HTTP: a reset before
the status line, a response dripped one byte at a time (status line included), a body cut
mid-way. Faults that need the wire's real bytes (the first stream event, a half body) ask the
healthy fake behind it for its answer and damage that, so every wire format is exercised with
its own framing (SSE, NDJSON, AWS event stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

CHUNK = 64 * 1024
# Its pauses are timers of the event loop, so on the fault suite's fake loop clock they are
# exact and take no real time.
DRIP_SECONDS = 1.0  # one byte a second
FIRST_EVENT_PAUSE = 0.05  # after a stream's first event, before the fault (the client has the event)
UPSTREAM_KEEPALIVE_SECONDS = 5.0  # an endless stream's keep-alives


@dataclass(frozen=True)
class Fault:
    name: str
    streams: bool  # applies to stream requests
    whole: bool  # applies to non-streamed requests
    after_first_byte: bool = False  # (streams) hits once the client has its first event


FAULTS = [
    Fault("html_200", True, True),
    Fault("truncated_json_200", True, True),
    Fault("invalid_json_200", True, True),
    Fault("wrong_shape_200", True, True),
    Fault("error_body_200", True, True),
    Fault("reset_before_headers", True, True),
    Fault("hang_before_headers", True, True),
    Fault("drip", True, True),
    Fault("drip_body", False, True),  # the head at once, then the body one byte at a time
    Fault("reset_mid_body", False, True),
    Fault("body_100mb", False, True),
    Fault("garbage_stream", True, False),
    Fault("event_16mb", True, False),
    Fault("reset_mid_stream", True, False, after_first_byte=True),
    Fault("close_without_end", True, False, after_first_byte=True),
    Fault("bad_chunk", True, False, after_first_byte=True),
    Fault("endless_keepalives", True, False, after_first_byte=True),
    Fault("error_event_mid_stream", True, False, after_first_byte=True),
    Fault("garbage_mid_stream", True, False, after_first_byte=True),
]

# Each provider's error object, as it sends it with an HTTP 5xx (here with 200).
ERROR_BODIES: dict[str, Any] = {
    "openai-chat": {"error": {"message": "The server had an error while processing your request.",
                              "type": "server_error", "param": None, "code": None}},
    "anthropic-messages": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    "gemini": {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                         "status": "UNAVAILABLE"}},
    "cohere": {"id": "f3c1", "message": "internal server error, this has been reported to our developers"},
    "ollama": {"error": "server busy, please try again. maximum pending requests exceeded"},
    "bedrock-converse": {"message": "The system encountered an unexpected error during processing."},
}

# Each wire's own in-stream error event, as the provider sends it mid-stream.
def error_event(wire: str, path: str) -> bytes:
    if path.endswith("/responses"):  # the Responses API's `error` event, as the service nests it
        return b"event: error\ndata: " + orjson.dumps({"type": "error", "sequence_number": 99, "error": {
            "type": "server_error", "code": "server_error", "message": "The server had an error", "param": None}}) + b"\n\n"
    if wire == "anthropic-messages":
        return b"event: error\ndata: " + orjson.dumps(ERROR_BODIES[wire]) + b"\n\n"
    if wire == "bedrock-converse":
        return aws_frame({":message-type": "exception", ":exception-type": "serviceUnavailableException",
                          ":content-type": "application/json"}, b'{"message": "Bedrock is unavailable"}')
    if wire == "ollama":
        return orjson.dumps(ERROR_BODIES[wire]) + b"\n"
    return b"data: " + orjson.dumps(ERROR_BODIES[wire]) + b"\n\n"


def garbage(wire: str) -> bytes:
    if wire == "bedrock-converse":
        return b"\x00\x00\x00\x20\x00\x00\x00\x00garbage frame, bad crc\xff\xff\xff\xff"
    return b"this is not json\n" if wire == "ollama" else b"data: this is not json\n\n"


# A chunk the wire's decoder cannot use: the shape is wrong (the issue's `{"choices":["oops"]}`).
BAD_CHUNK = {"choices": ["oops"], "candidates": ["oops"], "type": "content_block_delta", "index": 0,
             "delta": "oops", "message": "oops"}


def aws_frame(headers: dict[str, str], payload: bytes) -> bytes:
    from tests.fakes.bedrock_upstream import event_frame

    return event_frame(headers, payload)


def split_frames(wire: str, body: bytes) -> list[bytes]:
    """A stream's events, each with its own framing bytes."""
    if wire == "bedrock-converse":
        frames = []
        while body:
            (length,) = struct.unpack(">I", body[:4])
            frames.append(body[:length])
            body = body[length:]
        return frames
    sep = b"\n" if wire == "ollama" else b"\n\n"
    parts = body.replace(b"\r\n", b"\n").split(sep)
    return [p + sep for p in parts if p.strip()]


def frame(wire: str, data: Any) -> bytes:
    raw = orjson.dumps(data)
    if wire == "ollama":
        return raw + b"\n"
    if wire == "bedrock-converse":
        return aws_frame({":event-type": "contentBlockDelta", ":content-type": "application/json",
                          ":message-type": "event"}, raw)
    return b"data: " + raw + b"\n\n"


def keepalive(wire: str) -> bytes:
    if wire == "ollama":
        return b"\n"
    if wire == "bedrock-converse":
        return b""  # the AWS event stream has no keep-alive: silence
    return b": keep-alive\n\n"


def response_head(status: int, content_type: str, length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}", f"Content-Type: {content_type}",
             "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class FaultUpstream:
    """Listens on 127.0.0.1; each request is answered per `fault` (None = forwarded unharmed)."""

    def __init__(self, wire: str, target: str, stream_type: str) -> None:
        self.wire = wire
        self.target = target.rstrip("/")  # origin of the healthy fake
        self.stream_type = stream_type
        self.fault: str | None = None
        self.requests = 0
        self._server: asyncio.Server | None = None
        self._http: aiohttp.ClientSession | None = None
        self._conns: set[asyncio.Task[Any]] = set()
        self.port = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> "FaultUpstream":
        self._http = aiohttp.ClientSession(auto_decompress=False)
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        if self._server is not None:
            self._server.close()
        if self._http is not None:
            await self._http.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._conns.add(task)  # type: ignore[arg-type]
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            headers = {}
            for line in header_lines:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests += 1
            await self._answer(writer, method, path, headers, body)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._conns.discard(task)  # type: ignore[arg-type]
            with contextlib.suppress(Exception):
                writer.close()

    async def _healthy(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        forward = {k: v for k, v in headers.items() if k not in ("host", "content-length", "connection")}
        async with self._http.request(method, self.target + path, headers=forward, data=body) as resp:  # type: ignore[union-attr]
            return resp.status, resp.headers.get("content-type", "application/json"), await resp.read()

    async def _answer(self, writer: asyncio.StreamWriter, method: str, path: str, headers: dict[str, str],
                      body: bytes) -> None:
        fault, wire = self.fault, self.wire
        write = writer.write
        if fault is None:
            status, ctype, data = await self._healthy(method, path, headers, body)
            write(response_head(status, ctype, len(data)) + data)
        elif fault == "html_200":
            page = b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
            write(response_head(200, "text/html", len(page)) + page)
        elif fault in ("truncated_json_200", "reset_mid_body"):
            _, _, data = await self._healthy(method, path, headers, _not_streamed(wire, body))
            half = data[: len(data) // 2]
            if fault == "truncated_json_200":
                write(response_head(200, "application/json", len(half)) + half)
            else:  # announces the whole length, sends half, resets
                write(response_head(200, "application/json", len(data)) + half)
                await writer.drain()
                writer.transport.abort()
        elif fault == "invalid_json_200":
            data = b'{"id": "x", "choices": [oops'
            write(response_head(200, "application/json", len(data)) + data)
        elif fault == "wrong_shape_200":
            data = b'{"object": "unexpected", "result": 42}'
            write(response_head(200, "application/json", len(data)) + data)
        elif fault == "error_body_200":
            data = orjson.dumps(ERROR_BODIES[wire])
            write(response_head(200, "application/json", len(data)) + data)
        elif fault == "reset_before_headers":
            writer.transport.abort()
        elif fault == "hang_before_headers":
            await asyncio.sleep(3600)
        elif fault == "drip":
            status, ctype, data = await self._healthy(method, path, headers, body)
            whole = response_head(status, ctype, len(data)) + data
            for i in range(len(whole)):
                write(whole[i : i + 1])
                await writer.drain()
                await asyncio.sleep(DRIP_SECONDS)
        elif fault == "drip_body":
            status, ctype, data = await self._healthy(method, path, headers, body)
            write(response_head(status, ctype, len(data)))
            for i in range(len(data)):
                write(data[i : i + 1])
                await writer.drain()
                await asyncio.sleep(DRIP_SECONDS)
        elif fault == "body_100mb":
            write(response_head(200, "application/json"))
            write(b'{"id": "big", "choices": [{"message": {"content": "')
            filler = b"x" * CHUNK
            for _ in range(100 * 1024 * 1024 // CHUNK):
                write(filler)
                await writer.drain()
        elif fault == "garbage_stream":
            write(response_head(200, self.stream_type))
            write(b"\x00\xffgarbage \xfe not a stream\n\n" if wire == "bedrock-converse" else
                  b"data: this is not json\n\ndata: {{{\n\n" if wire != "ollama" else b"this is not json\n")
        elif fault == "event_16mb":
            write(response_head(200, self.stream_type))
            write(b"data: {\"x\": \"" if wire not in ("ollama", "bedrock-converse") else b"{\"x\": \"")
            filler = b"y" * CHUNK
            for _ in range(16 * 1024 * 1024 // CHUNK):
                write(filler)
                await writer.drain()
        else:  # the faults after the first event: the healthy stream, damaged
            status, ctype, data = await self._healthy(method, path, headers, body)
            frames = split_frames(wire, data)
            write(response_head(200, ctype))
            write(frames[0])
            await writer.drain()
            await asyncio.sleep(FIRST_EVENT_PAUSE)
            if fault == "reset_mid_stream":
                writer.transport.abort()
            elif fault == "close_without_end":
                write_eof = writer.write_eof
                write_eof()
            elif fault == "bad_chunk":
                write(frame(wire, BAD_CHUNK))
                for rest in frames[1:]:
                    write(rest)
            elif fault == "error_event_mid_stream":
                write(error_event(wire, path))
            elif fault == "garbage_mid_stream":
                write(garbage(wire))
                for rest in frames[1:]:
                    write(rest)
            elif fault == "endless_keepalives":
                beat = keepalive(wire)
                while True:
                    if beat:
                        write(beat)
                        await writer.drain()
                    await asyncio.sleep(UPSTREAM_KEEPALIVE_SECONDS)
        await writer.drain()


def _not_streamed(wire: str, body: bytes) -> bytes:
    """The same request, asked without streaming (for a half of the whole answer)."""
    if wire in ("gemini", "bedrock-converse"):
        return body
    parsed = orjson.loads(body)
    parsed["stream"] = False
    parsed.pop("stream_options", None)
    return orjson.dumps(parsed)
