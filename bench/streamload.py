"""Closed-loop stream client: `--concurrency` keep-alive connections, each one streaming call after another.

Long streams are what agents wait on: each call is a `stream: true` POST whose
answer arrives over hundreds of chunks. Every connection sends its next call
as soon as the last one ended, for `--seconds`; calls still running then are
waited for (bounded by `--timeout`). Prints one JSON object: completed calls,
errors, time to first body byte and total time (ms).

Runs in its own process on uvloop; loopback addresses only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import orjson

if __package__ in (None, ""):
    from loadgen import Conn, build_request, summarize  # type: ignore[no-redef]
else:
    from bench.loadgen import Conn, build_request, summarize

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency of modelgate
    uvloop = None


async def run(url: str, body: bytes, headers: list[str], concurrency: int, seconds: float,
              timeout: float) -> dict:
    loop = asyncio.get_running_loop()
    host, port, request = build_request(url, body, headers)
    ttfb: list[float] = []
    total: list[float] = []
    non_2xx = socket_errors = 0
    samples: list[str] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal non_2xx, socket_errors
        conn = None
        while time.perf_counter() < deadline:
            if conn is None or conn.closed:
                try:
                    _, conn = await loop.create_connection(lambda: Conn(loop), host, port)
                except OSError as exc:
                    socket_errors += 1
                    samples.append(f"connect: {exc}")
                    return
            start = time.perf_counter()
            try:
                res = await asyncio.wait_for(conn.send(request), timeout)
            except asyncio.TimeoutError:
                socket_errors += 1
                samples.append("timeout")
                conn.transport.close()
                conn = None
                continue
            if res.error is not None:
                socket_errors += 1
                samples.append(res.error)
                continue
            if not 200 <= res.status < 300:
                non_2xx += 1
                continue
            total.append((res.done - start) * 1000.0)
            ttfb.append((res.first_byte - start) * 1000.0)
        if conn is not None and not conn.closed:
            conn.transport.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {
        "concurrency": concurrency, "completed": len(total), "wall_s": round(time.perf_counter() - started, 3),
        "non_2xx": non_2xx, "socket_errors": socket_errors, "error_samples": samples[:5],
        "first_byte_ms": summarize(ttfb), "latency_ms": summarize(total),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--body-file", required=True)
    parser.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    args = parser.parse_args(argv)
    if not 0 < args.concurrency <= 2000 or not 0 < args.seconds <= 600:
        parser.error("concurrency in 1..2000 and seconds in 0..600")
    with open(args.body_file, "rb") as fh:
        body = fh.read()
    runner = uvloop.run if uvloop is not None else asyncio.run
    out = runner(run(args.url, body, args.header, args.concurrency, args.seconds, args.timeout))
    sys.stdout.buffer.write(orjson.dumps(out) + b"\n")


if __name__ == "__main__":
    main()
