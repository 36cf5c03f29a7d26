"""Which upstream HTTP client: aiohttp or httpx, measured on the gateway's own pattern.

One shared pooled client, 32 concurrent callers, a JSON POST each, the body read
whole (non-streamed) or chunk by chunk (streamed), against the bench's fake
upstream in its own process. Reports CPU time of this process per request.

    .venv/bin/python -m bench.clients [--requests 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
from pathlib import Path

import uvloop

from bench.targets import MODEL, UPSTREAM_KEY, start_upstream

BODY = ('{"model":"%s","messages":[{"role":"user","content":"hi"}]}' % MODEL).encode()
STREAM_BODY = ('{"model":"%s","stream":true,"messages":[{"role":"user","content":"hi"}]}' % MODEL).encode()
HEADERS = {"content-type": "application/json", "authorization": f"Bearer {UPSTREAM_KEY}"}
CONCURRENCY = 32


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def drive(one, requests: int) -> tuple[float, float]:
    remaining = requests

    async def caller() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await one()

    cpu, wall = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CONCURRENCY)))
    return (cpu_seconds() - cpu) / requests * 1000, requests / (time.perf_counter() - wall)


async def with_aiohttp(url: str, requests: int) -> dict[str, list[float]]:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256)) as session:
        async def plain() -> None:
            async with session.post(url, data=BODY, headers=HEADERS) as resp:
                assert resp.status == 200
                await resp.read()

        async def stream() -> None:
            async with session.post(url, data=STREAM_BODY, headers=HEADERS) as resp:
                while await resp.content.readany():
                    pass

        await drive(plain, 500)  # warm the pool
        return {"plain": list(await drive(plain, requests)), "stream": list(await drive(stream, requests))}


async def with_httpx(url: str, requests: int) -> dict[str, list[float]]:
    import httpx

    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        async def plain() -> None:
            resp = await client.post(url, content=BODY, headers=HEADERS)
            assert resp.status_code == 200
            resp.read()

        async def stream() -> None:
            async with client.stream("POST", url, content=STREAM_BODY, headers=HEADERS) as resp:
                async for _ in resp.aiter_raw():
                    pass

        await drive(plain, 500)
        return {"plain": list(await drive(plain, requests)), "stream": list(await drive(stream, requests))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    log_dir = Path("bench/results/tmp/clients")
    log_dir.mkdir(parents=True, exist_ok=True)
    cpus = "1" if os.cpu_count() and os.cpu_count() > 1 else None
    upstream = start_upstream(log_dir, cpus, chunks=8, delay_ms=0.0)
    if cpus:
        os.sched_setaffinity(0, {0})
    try:
        url = f"http://127.0.0.1:{upstream.port}/v1/chat/completions"
        print("| client | CPU ms/req (plain) | req/s (plain) | CPU ms/req (stream) | req/s (stream) |")
        print("|---|---|---|---|---|")
        for name, run in (("aiohttp", with_aiohttp), ("httpx", with_httpx)):
            result = uvloop.run(run(url, args.requests))
            (cpu_p, rate_p), (cpu_s, rate_s) = result["plain"], result["stream"]
            print(f"| {name} | {cpu_p:.3f} | {rate_p:,.0f} | {cpu_s:.3f} | {rate_s:,.0f} |")
    finally:
        upstream.stop()


if __name__ == "__main__":
    main()
