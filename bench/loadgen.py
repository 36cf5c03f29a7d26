"""Open-loop latency client: sends at a fixed rate, whatever the target does.

Request i is due at t0 + i/rate. Its latency is measured from the moment its
timer fired (not from when a connection became free), so a slow target cannot
hide its queueing by slowing the client down (no coordinated omission).
Times come from perf_counter: uvloop's loop clock ticks in whole milliseconds. Connections
are HTTP/1.1 keep-alive, taken from a pool that grows when every one is busy.
For streams it also records the time to the first body byte.

Runs in its own process on uvloop and prints one JSON object. The count and
the duration are both bounded; only loopback addresses are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
import time
from urllib.parse import urlsplit

import httptools
import orjson

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency of modelgate
    uvloop = None


class Result:
    __slots__ = ("status", "first_byte", "done", "error")

    def __init__(self) -> None:
        self.status = 0
        self.first_byte = 0.0
        self.done = 0.0
        self.error: str | None = None


class Conn(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Result] | None = None
        self.result = Result()
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(f"parse error: {exc}")
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._finish("connection closed")

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.result.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if not self.result.first_byte:
            self.result.first_byte = time.perf_counter()

    def on_message_complete(self) -> None:
        self.result.done = time.perf_counter()
        if not self.parser.should_keep_alive():
            self.closed = True
            self.transport.close()
        self._finish(None)

    def _finish(self, error: str | None) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            if error is not None:
                self.result.error = error
            waiter.set_result(self.result)

    def send(self, request: bytes) -> asyncio.Future[Result]:
        self.result = Result()
        self.waiter = self.loop.create_future()
        self.transport.write(request)
        return self.waiter


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), -(-len(sorted_values) * p // 100)))
    return sorted_values[int(rank) - 1]


def summarize(values: list[float]) -> dict[str, float | None]:
    values = sorted(values)
    return {
        "p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99),
        "max": values[-1] if values else None,
        "mean": sum(values) / len(values) if values else None,
    }


def build_request(url: str, body: bytes, headers: list[str]) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    if not ipaddress.ip_address("127.0.0.1" if host == "localhost" else host).is_loopback:
        raise SystemExit("loadgen sends to loopback addresses only")
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", *headers]
    return host, port, ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def run(url: str, body: bytes, headers: list[str], rate: float, count: int,
              warmup: int, max_conns: int, timeout: float) -> dict:
    loop = asyncio.get_running_loop()
    host, port, request = build_request(url, body, headers)
    idle: list[Conn] = []
    opened = 0
    slots = asyncio.Semaphore(max_conns)

    async def acquire() -> Conn:
        nonlocal opened
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        opened += 1
        _, conn = await loop.create_connection(lambda: Conn(loop), host, port)
        return conn

    async def one(start: float) -> tuple[float, Result]:
        async with slots:
            try:
                conn = await acquire()
            except OSError as exc:
                failed = Result()
                failed.error = f"connect: {exc}"
                return start, failed
            try:
                result = await asyncio.wait_for(conn.send(request), timeout)
            except asyncio.TimeoutError:
                conn.transport.close()
                failed = Result()
                failed.error = "timeout"
                return start, failed
            if not conn.closed:
                idle.append(conn)
            return start, result

    for _ in range(warmup):
        await one(time.perf_counter())

    t0 = loop.time() + 0.05
    tasks: list[asyncio.Task] = []

    def fire() -> None:
        tasks.append(loop.create_task(one(time.perf_counter())))

    for i in range(count):
        loop.call_at(t0 + i / rate, fire)
    # Bounded: every request is due by count/rate and each one times out on its own.
    await asyncio.sleep(count / rate + 0.1)
    results = await asyncio.gather(*tasks)
    wall = loop.time() - t0

    latencies, first_bytes, non_2xx, socket_errors = [], [], 0, 0
    error_samples: list[str] = []
    for start, res in results:
        if res.error is not None:
            socket_errors += 1
            if len(error_samples) < 5:
                error_samples.append(res.error)
            continue
        if not 200 <= res.status < 300:
            non_2xx += 1
            continue
        latencies.append((res.done - start) * 1000.0)
        if res.first_byte:
            first_bytes.append((res.first_byte - start) * 1000.0)
    for conn in idle:
        conn.transport.close()
    return {
        "rate": rate, "count": count, "completed": len(latencies), "wall_s": round(wall, 3),
        "non_2xx": non_2xx, "socket_errors": socket_errors, "error_samples": error_samples,
        "connections_opened": opened,
        "latency_ms": summarize(latencies), "first_byte_ms": summarize(first_bytes),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--body-file", required=True)
    parser.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=20, help="sequential requests before measuring")
    parser.add_argument("--max-conns", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    args = parser.parse_args(argv)
    if args.rate <= 0 or not 0 < args.count <= 100_000:
        parser.error("rate must be positive and count in 1..100000")
    with open(args.body_file, "rb") as fh:
        body = fh.read()
    runner = uvloop.run if uvloop is not None else asyncio.run
    started = time.time()
    out = runner(run(args.url, body, args.header, args.rate, args.count, args.warmup,
                     args.max_conns, args.timeout))
    out["started_at"] = started
    sys.stdout.buffer.write(orjson.dumps(out) + b"\n")


if __name__ == "__main__":
    main()
