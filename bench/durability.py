"""Answered calls vs call-log rows under faults, and the hot-path cost of the call-log journal.

    .venv/bin/python -m bench.durability [--seconds 6] [--only sigterm,sigkill,pg,redis,journal]

Each scenario starts `modelgate serve` (one worker) in front of bench/fake_upstream.py, sends
chat calls from a few concurrent clients and, mid-load, stops the gateway (SIGTERM, SIGKILL) or
cuts a dependency through a TCP proxy (tests/fakes/tcp_proxy.py): PostgreSQL blackholed for a
while (old connections silent, new ones unanswered), Redis blackholed likewise. After the
gateway is gone, a usage writer on the same data directory replays what its journal left (as the
next start would), then the call log is counted: every answered call (its X-Trace-Id) must have its
row. The journal scenario measures closed-loop throughput with `usage.journal` on and off,
interleaved. Every load is bounded in time; everything listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import procstats, targets  # noqa: E402
from bench.targets import CHAT_BODY, Proc, Target  # noqa: E402
from tests.fakes.tcp_proxy import TcpProxy  # noqa: E402

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = ("127.0.0.1", 6379)


class Load:
    """Closed-loop chat calls from `concurrency` clients; records the trace ids answered 200."""

    def __init__(self, url: str, key: str, concurrency: int = 8) -> None:
        self.url, self.key, self.concurrency = url, key, concurrency
        self.answered: set[str] = set()
        self.other_status: dict[int, int] = {}
        self.failed = 0
        self._running = False
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._running = True
        self._tasks = [asyncio.create_task(self._client()) for _ in range(self.concurrency)]

    async def stop(self) -> None:
        self._running = False
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _client(self) -> None:
        body = orjson.dumps(CHAT_BODY)
        headers = {"authorization": f"Bearer {self.key}", "content-type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            while self._running:
                try:
                    async with http.post(f"{self.url}/v1/chat/completions", data=body, headers=headers) as resp:
                        await resp.read()
                        if resp.status == 200:
                            self.answered.add(resp.headers["x-trace-id"])
                        else:
                            self.other_status[resp.status] = self.other_status.get(resp.status, 0) + 1
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    self.failed += 1
                    await asyncio.sleep(0.05)


async def _recorded(data_dir: Path, database_url: str | None) -> set[str]:
    """What the next start would hold: replay the journals left behind, then read the trace ids."""
    from sqlalchemy import select

    from modelgate.config import Settings
    from modelgate.storage.db import Database
    from modelgate.storage.models import CallLog
    from modelgate.storage.usage_writer import UsageWriter

    settings = Settings(data_dir=str(data_dir), database_url=database_url)
    db = Database.from_settings(settings)
    try:
        writer = UsageWriter(db, settings)
        writer.start()
        await writer.stop()
        async with db.session() as s:
            return set((await s.scalars(select(CallLog.trace_id))).all())
    finally:
        await db.dispose()


async def _pg_database() -> tuple[str, Any] | None:
    try:
        import asyncpg

        admin = await asyncpg.connect(PG_ADMIN, timeout=3)
    except Exception as exc:  # noqa: BLE001 - reported, the scenario is skipped
        print(f"  PostgreSQL unavailable ({exc!r}); skipped", flush=True)
        return None
    name = f"mg_bench_{uuid.uuid4().hex[:10]}"
    await admin.execute(f"CREATE DATABASE {name}")
    return name, admin


def _start(upstream: Target, log_dir: Path, tag: str, env: dict[str, str]) -> Target:
    return targets.start_modelgate(upstream, log_dir, None, 1, extra_env=env, tag=f"-{tag}")


def _signal(proc: Proc, sig: int, wait: float) -> tuple[float, int | None]:
    started = time.monotonic()
    proc.popen.send_signal(sig)
    try:
        code = proc.popen.wait(wait)
    except Exception:  # noqa: BLE001 - still running: reported, then killed
        proc.popen.kill()
        code = None
    return time.monotonic() - started, code


async def scenario(name: str, upstream: Target, log_dir: Path, seconds: float) -> dict[str, Any]:
    env: dict[str, str] = {"USAGE_DB_TIMEOUT_SECONDS": "2", "DATABASE_TIMEOUT_SECONDS": "5"}
    proxy: TcpProxy | None = None
    pg: tuple[str, Any] | None = None
    database_url = None
    if name == "pg":
        pg = await _pg_database()
        if pg is None:
            return {"skipped": "no PostgreSQL"}
        proxy = await TcpProxy("127.0.0.1", 5432).start()
        database_url = f"postgresql+asyncpg://postgres@127.0.0.1:{proxy.port}/{pg[0]}"
        env["DATABASE_URL"] = database_url
    if name == "redis":
        proxy = await TcpProxy(*REDIS).start()
        env["REDIS_URL"] = f"redis://127.0.0.1:{proxy.port}/0"
        env["REDIS_PREFIX"] = f"mgbench{uuid.uuid4().hex[:8]}:"
    target = await asyncio.to_thread(_start, upstream, log_dir, name, env)
    load = Load(target.url, target.info["api_key"])
    out: dict[str, Any] = {}
    try:
        load.start()
        await asyncio.sleep(seconds / 2)
        if name in ("pg", "redis"):
            proxy.blackhole()  # type: ignore[union-attr]
            await asyncio.sleep(seconds)
            proxy.restore()  # type: ignore[union-attr]
            await asyncio.sleep(seconds / 2)
            await load.stop()
            out["stop_seconds"], out["exit"] = await asyncio.to_thread(_signal, target.proc, signal.SIGTERM, 60)
        else:
            sig = signal.SIGTERM if name == "sigterm" else signal.SIGKILL
            out["stop_seconds"], out["exit"] = await asyncio.to_thread(_signal, target.proc, sig, 60)
            await load.stop()
    finally:
        await load.stop()
        if target.proc.alive():
            target.proc.popen.kill()
    url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{pg[0]}" if pg else None
    recorded = await _recorded(Path(target.info["data_dir"]), url)
    missing = load.answered - recorded
    out.update(answered=len(load.answered), rows_for_answered=len(load.answered & recorded),
               rows_total=len(recorded), missing=len(missing), failed_requests=load.failed,
               other_status=load.other_status)
    if proxy is not None:
        await proxy.close()
    if pg is not None:
        await pg[1].execute(f"DROP DATABASE {pg[0]} WITH (FORCE)")
        await pg[1].close()
    return out


async def journal_cost(upstream: Target, log_dir: Path, seconds: float, rounds: int) -> dict[str, Any]:
    """Closed-loop throughput and the gateway's CPU per call with the journal on and off, in interleaved
    rounds (one gateway each; which goes first alternates). CPU per call (utime + stime of the gateway
    process) is the steadier figure on a shared machine."""
    gateways = {
        on: await asyncio.to_thread(_start, upstream, log_dir, f"journal-{on}", {"USAGE_JOURNAL": str(on).lower()})
        for on in (True, False)
    }
    rates: dict[bool, list[float]] = {True: [], False: []}
    cpu_ms: dict[bool, list[float]] = {True: [], False: []}
    try:
        for i in range(rounds):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                target = gateways[on]
                load = Load(target.url, target.info["api_key"])
                cpu_before = procstats.cpu_seconds(target.proc.pid)
                load.start()
                await asyncio.sleep(seconds)
                await load.stop()
                cpu = procstats.cpu_seconds(target.proc.pid) - cpu_before
                rates[on].append(len(load.answered) / seconds)
                cpu_ms[on].append(round(cpu * 1000 / max(1, len(load.answered)), 4))
    finally:
        for target in gateways.values():
            target.stop()
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    cpu_on, cpu_off = statistics.median(cpu_ms[True]), statistics.median(cpu_ms[False])
    # Ratios within a round cancel most of the drift of a shared machine between rounds.
    paired_rate = [a / b for a, b in zip(rates[True], rates[False], strict=True) if b]
    paired_cpu = [a / b for a, b in zip(cpu_ms[True], cpu_ms[False], strict=True) if b]
    return {"calls_per_second_journal_on": rates[True], "calls_per_second_journal_off": rates[False],
            "median_on": round(on, 1), "median_off": round(off, 1),
            "cost_percent": round((off - on) / off * 100, 1) if off else None,
            "cpu_ms_per_call_journal_on": cpu_ms[True], "cpu_ms_per_call_journal_off": cpu_ms[False],
            "cpu_cost_percent": round((cpu_on - cpu_off) / cpu_off * 100, 1) if cpu_off else None,
            "paired_throughput_cost_percent": round((1 - statistics.median(paired_rate)) * 100, 1),
            "paired_throughput_cost_range": [round((1 - r) * 100, 1) for r in (max(paired_rate), min(paired_rate))],
            "paired_cpu_cost_percent": round((statistics.median(paired_cpu) - 1) * 100, 1),
            "paired_cpu_cost_range": [round((r - 1) * 100, 1) for r in (min(paired_cpu), max(paired_cpu))]}


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="load phase length (partition: this long)")
    parser.add_argument("--only", default="sigterm,sigkill,pg,redis,journal")
    parser.add_argument("--journal-rounds", type=int, default=3)
    parser.add_argument("--out-dir", type=Path, default=targets.BENCH_DIR / "results")
    args = parser.parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="mg-durability-"))
    upstream = await asyncio.to_thread(targets.start_upstream, log_dir, None, 8, 0.0)
    results: dict[str, Any] = {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                               "cpus": os.cpu_count(), "seconds": args.seconds}
    try:
        for name in args.only.split(","):
            print(f"{name} ...", flush=True)
            if name == "journal":
                results[name] = await journal_cost(upstream, log_dir, args.seconds, args.journal_rounds)
            else:
                results[name] = await scenario(name, upstream, log_dir, args.seconds)
            print(f"  {results[name]}", flush=True)
    finally:
        upstream.stop()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / "durability-latest.json"
    out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(f"written to {out}")
    lost = [n for n, r in results.items() if isinstance(r, dict) and r.get("missing")]
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
