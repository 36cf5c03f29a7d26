"""Where a worker's memory goes as calls accumulate: the soak's mixed traffic, in one process.

The gateway (in-process, as tests/gateway_harness.py runs it), the soak's faulty channel (30 % of
its answers damaged, failed over to a healthy fake upstream in a child process) and 16 closed-loop
clients run in this process. Every `--every` calls the clients stop, the call-log writer empties
its queue, and the figures are taken after gc.collect():

- `python_traced_mb` (with `--tracemalloc`): the Python heap allocated since the first checkpoint
  and still live; anything retained per call or per distinct value grows here, and the tracebacks
  that grew most between the second checkpoint and the last are listed;
- `python_blocks`: pymalloc's live block count (sys.getallocatedblocks);
- `malloc_in_use_mb` / `malloc_free_mb`: glibc's heap, in use and free but kept (mallinfo2, every arena);
- `sqlite_mb`: SQLite's own allocator (its page caches: `PRAGMA cache_size`, 2 MB per connection);
- `rss_mb`: the exact resident size (/proc/self/smaps_rollup).

At the end glibc is asked to give its free memory back (malloc_trim), which tells allocator
retention from memory still referenced. Loopback only; the fake upstream is stopped by its pid.
    .venv/bin/python -m bench.memory_trend --calls 200000 --every 20000
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import _sqlite3
import aiohttp
import orjson
import uvloop

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.soak import RandomFaults, bodies  # noqa: E402
from bench.targets import MODEL, UPSTREAM_KEY, start_upstream  # noqa: E402
from tests.gateway_harness import GatewayHarness, harness_settings  # noqa: E402


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


LIBC = ctypes.CDLL("libc.so.6")
LIBC.mallinfo2.restype = _MallInfo2
SQLITE = ctypes.CDLL(_sqlite3.__file__)  # resolves the libsqlite3 the stdlib driver uses
SQLITE.sqlite3_memory_used.restype = ctypes.c_int64


def rss_mb() -> float:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            return round(int(line.split()[1]) / 1024, 1)
    return -1.0


def figures(calls: int, started: float, heap: tracemalloc.Snapshot | None = None) -> dict[str, Any]:
    info = LIBC.mallinfo2()
    row = {"calls": calls, "s": round(time.monotonic() - started), "rss_mb": rss_mb(),
           "python_blocks": sys.getallocatedblocks(), "malloc_in_use_mb": round(info.uordblks / 2**20, 2),
           "malloc_free_mb": round(info.fordblks / 2**20, 2), "sqlite_mb": round(SQLITE.sqlite3_memory_used() / 2**20, 2)}
    if heap is not None:  # the snapshots themselves are left out
        row["python_traced_mb"] = round(sum(trace.size for trace in heap.traces) / 2**20, 3)
    return row


async def run(calls: int, every: int, frames: int, log_dir: Path) -> dict[str, Any]:
    healthy = start_upstream(log_dir, None, chunks=8, delay_ms=0)
    faulty = await RandomFaults(healthy.url, 0.3, random.Random(7)).start()
    settings = harness_settings(log_dir, log_level="ERROR")
    settings.usage.flush_interval_seconds = 0.5  # the default, which the harness shortens for tests
    settings.gateway.failover.cooldown_seconds = 0  # as in the soak: the faulty channel keeps its share
    settings.gateway.rate_limit.capacity = settings.gateway.rate_limit.refill_per_second = 1e9
    gateway = await GatewayHarness(settings).start()
    try:
        svc = gateway.services
        app = await svc.applications.create("memory-trend")
        for name, origin, priority in (("faulty", faulty.origin, 0), ("healthy", healthy.url, 1)):
            await svc.providers.create(name, "openai-compatible", f"{origin}/v1", keys=[UPSTREAM_KEY])
            await svc.channels.create(name, name, [MODEL], priority=priority)
            await svc.applications.authorize_channel(app.id, name)
        key = (await svc.api_keys.create(app.id, "memory-trend")).plaintext
        await gateway.runtime.refresh()
        return await traffic(gateway, key, calls, every, frames)
    finally:
        await gateway.stop()
        await faulty.close()
        healthy.proc.stop()


async def traffic(gateway: GatewayHarness, key: str, calls: int, every: int, frames: int) -> dict[str, Any]:
    kinds = bodies(key)
    made = 0
    statuses: dict[int, int] = {}
    rows: list[dict[str, Any]] = []
    first: tracemalloc.Snapshot | None = None  # the second checkpoint's; the last one is compared with it
    last: tracemalloc.Snapshot | None = None

    async def client(session: aiohttp.ClientSession, n: int, until: int) -> None:
        nonlocal made
        i = n
        while made < until:
            path, headers, body = kinds[i % len(kinds)]
            i, made = i + 1, made + 1
            async with session.post(gateway.url + path, data=body, headers=headers) as resp:
                await resp.read()
                statuses[resp.status] = statuses.get(resp.status, 0) + 1

    started = time.monotonic()
    # Idle connections are closed by the client within 1 s, before uvicorn's 5 s keep-alive limit
    # would close them under a request sent after a checkpoint's pause.
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=1.0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        for until in [*range(every, calls, every), calls]:
            await asyncio.gather(*(client(session, n, until) for n in range(16)))
            while gateway.runtime.writer.pending:
                await asyncio.sleep(0.1)
            gc.collect()
            if frames and not tracemalloc.is_tracing():
                tracemalloc.start(frames)  # after the first stretch: what warm-up allocated is not counted
            elif frames:
                last = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
                first = first or last
            rows.append(figures(made, started, last))
    report: dict[str, Any] = {"calls": made, "statuses": statuses, "checkpoints": rows}
    if first is not None and last is not first:
        grown = last.compare_to(first, "traceback")[:10]  # type: ignore[union-attr]
        report["python_growth_from_second_to_last_checkpoint"] = [
            {"bytes": stat.size_diff, "blocks": stat.count_diff, "where": stat.traceback.format()[-4:]}
            for stat in grown]
    LIBC.malloc_trim(0)
    report["after_malloc_trim"] = figures(made, started)
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--every", type=int, default=20_000, help="calls between checkpoints")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                        help="trace the Python heap with this many frames per traceback (slows calls ~10x)")
    args = parser.parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="modelgate-memory-"))
    report = uvloop.run(run(args.calls, args.every, args.tracemalloc, log_dir))  # the worker's loop
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


if __name__ == "__main__":
    main()
