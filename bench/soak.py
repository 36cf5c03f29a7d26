"""Soak: mixed traffic through one modelgate worker while one of its channels misbehaves.

Phase 1 (`--minutes`): closed-loop clients send chat, messages and Responses calls, streamed and not,
for a model served by a faulty channel (priority 0: a fault upstream in front of the fake,
damaging a share of its answers with the faults of tests/faults) and a healthy one (priority 1).
Reports calls made against call-log rows written (must be equal), answers by status, the 5xx
the gateway made itself (must be 0: every upstream fault is failed over to the healthy
channel), and the worker's RSS sampled through the run (must stay flat) with its call-log queue
at each sample (rows waiting in memory: a writer falling behind grows RSS with every call).

Phase 2 (`--streams`, default 5,000): that many streams of a 2 s upstream opened over 5 s on
one worker; reports errors (an opened breaker would show as 503s), the calls that needed a
second attempt and the breaker transitions (from the call log and resilience events: the
breaker must stay closed), the added latency percentiles (total time minus the upstream's 2 s)
and memory per in-flight stream. The fake upstream shares the machine's cores with the gateway
and the clients, so its accept queue and first bytes can lag far behind a real provider's:
this phase gives each attempt `--attempt-limit` seconds (60) to connect and to send its first
event, instead of the 10 s / 30 s defaults, so what it measures is the gateway holding the
streams, not the fake upstream's share of a starved CPU.

Loopback only; every process is ours and stopped by its pid; the run stops by itself.
    .venv/bin/python -m bench.soak --minutes 2 --streams 5000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.targets import (  # noqa: E402
    MODEL,
    PYTHON,
    UPSTREAM_KEY,
    child_env,
    count_call_log,
    free_port,
    spawn,
    start_upstream,
    wait_ready,
    chat_call,
)
from tests.faults.fault_upstream import FaultUpstream  # noqa: E402

# Faults a healthy backup must hide from callers (each before the first byte reached them).
FAULTS = ["html_200", "truncated_json_200", "invalid_json_200", "wrong_shape_200", "error_body_200",
          "reset_before_headers", "reset_mid_body", "garbage_stream"]


class RandomFaults(FaultUpstream):
    """Damages `share` of the answers, each with a fault drawn at random."""

    def __init__(self, target: str, share: float, rng: random.Random) -> None:
        super().__init__("openai-chat", target, "text/event-stream")
        self.share, self.rng = share, rng

    async def _answer(self, writer: Any, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        stream = b'"stream":true' in body.replace(b" ", b"")
        pool = [f for f in FAULTS if f != ("reset_mid_body" if stream else "garbage_stream")]
        self.fault = self.rng.choice(pool) if self.rng.random() < self.share else None
        await super()._answer(writer, method, path, headers, body)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def configure(env: dict[str, str], healthy: str, faulty: str) -> str:
    from modelgate.auth.crypto import SecretBox, load_encryption_key
    from modelgate.config import load_settings
    from modelgate.server import prepare
    from modelgate.services import Services
    from modelgate.storage.db import Database

    settings = load_settings(environ=child_env(env))
    await prepare(settings)
    db = Database.from_settings(settings)
    try:
        svc = Services(db, SecretBox(load_encryption_key(settings)), settings)
        app = await svc.applications.create("soak")
        await svc.providers.create("faulty", "openai-compatible", f"{faulty}/v1", keys=[UPSTREAM_KEY])
        await svc.providers.create("healthy", "openai-compatible", f"{healthy}/v1", keys=[UPSTREAM_KEY])
        await svc.channels.create("faulty", "faulty", [MODEL], priority=0)
        await svc.channels.create("healthy", "healthy", [MODEL], priority=1)
        await svc.applications.authorize_channel(app.id, "faulty")
        await svc.applications.authorize_channel(app.id, "healthy")
        return (await svc.api_keys.create(app.id, "soak")).plaintext
    finally:
        await db.dispose()


def start_gateway(data_dir: Path, healthy: str, faulty: str, log_dir: Path,
                  extra_env: dict[str, str] | None = None) -> tuple[Any, int, str]:
    port = free_port()
    config = data_dir / "soak.yaml"
    config.write_text("# settings come from the environment\n")
    env = {
        "MODELGATE_CONFIG": str(config), "MODELGATE_DATA_DIR": str(data_dir), "SERVER_HOST": "127.0.0.1",
        "SERVER_PORT": str(port), "SERVER_WORKERS": "1", "LOG_LEVEL": "ERROR",
        "GATEWAY_RATE_LIMIT_CAPACITY": "1000000000", "GATEWAY_RATE_LIMIT_REFILL_PER_SECOND": "1000000000",
        # The faulty channel keeps its share of the traffic instead of cooling down after a fault.
        "GATEWAY_FAILOVER_COOLDOWN_SECONDS": "0",
        **(extra_env or {}),
    }
    key = asyncio.run(configure(env, healthy, faulty))
    proc = spawn("modelgate-soak", [str(Path(PYTHON).parent / "modelgate"), "serve"], None, log_dir, env, data_dir)
    wait_ready(proc, port, chat_call("/v1/chat/completions", [f"Authorization: Bearer {key}"]), 90)
    return proc, port, key


def bodies(key: str) -> list[tuple[str, dict[str, str], bytes]]:
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 32}
    messages = {"model": MODEL, "max_tokens": 32, "messages": [{"role": "user", "content": "Say hello."}]}
    auth = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    responses = {"model": MODEL, "input": "Say hello.", "max_output_tokens": 32, "store": False}
    alt = {"x-api-key": key, "alt-version": "2023-06-01", "content-type": "application/json"}
    return [
        ("/v1/chat/completions", auth, orjson.dumps(chat)),
        ("/v1/chat/completions", auth, orjson.dumps({**chat, "stream": True})),
        ("/alt/v1/messages", alt, orjson.dumps(messages)),
        ("/alt/v1/messages", alt, orjson.dumps({**messages, "stream": True})),
        ("/v1/responses", auth, orjson.dumps(responses)),
        ("/v1/responses", auth, orjson.dumps({**responses, "stream": True})),
    ]


# How each protocol's stream ends when it broke: chat's error frame, messages' and the Responses
# API's `error` event, the Responses API's `response.failed`.
BROKEN = (b'data: {"error"', b"event: error", b"event: response.failed")


async def mixed_traffic(url: str, key: str, pid: int, seconds: float, concurrency: int) -> dict[str, Any]:
    statuses: dict[int, int] = {}
    broken_streams = 0
    rss: list[tuple[float, float]] = []
    queue: list[int] = []  # call-log rows waiting in memory, at each RSS sample
    kinds = bodies(key)
    started = time.monotonic()
    deadline = started + seconds

    async def client(session: aiohttp.ClientSession, n: int) -> None:
        nonlocal broken_streams
        i = n
        while time.monotonic() < deadline:
            path, headers, body = kinds[i % len(kinds)]
            i += 1
            async with session.post(url + path, data=body, headers=headers) as resp:
                data = await resp.read()
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
                if resp.status == 200 and b'"stream":true' in body and any(mark in data for mark in BROKEN):
                    broken_streams += 1

    async def sample(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline:
            rss.append((round(time.monotonic() - started), round(rss_mb(pid), 1)))
            queue.append(await queue_depth(session, url))
            await asyncio.sleep(max(1.0, seconds / 20))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        await asyncio.gather(sample(session), *(client(session, n) for n in range(concurrency)))
    return {"seconds": seconds, "concurrency": concurrency, "calls": sum(statuses.values()),
            "statuses": dict(sorted(statuses.items())), "streams_ended_by_an_error_event": broken_streams,
            "rss_mb": rss, "call_log_queue": queue}


async def queue_depth(session: aiohttp.ClientSession, url: str) -> int:
    """The worker's call-log queue (/metrics): a writer falling behind grows RSS with every call."""
    async with session.get(url + "/metrics") as resp:
        for line in (await resp.text()).splitlines():
            if line.startswith("modelgate_call_log_queue_depth "):
                return int(float(line.split()[1]))
    return -1


async def many_streams(url: str, key: str, pid: int, n: int, ramp: float) -> dict[str, Any]:
    path, headers, body = bodies(key)[1]
    idle = rss_mb(pid)
    peak = idle
    latencies: list[float] = []
    errors: dict[str, int] = {}

    async def one(session: aiohttp.ClientSession, delay: float) -> None:
        await asyncio.sleep(delay)
        t0 = time.monotonic()
        try:
            async with session.post(url + path, data=body, headers=headers) as resp:
                data = await resp.read()
                if resp.status != 200 or not data.rstrip().endswith(b"data: [DONE]") or b'"error"' in data:
                    errors[str(resp.status)] = errors.get(str(resp.status), 0) + 1
                    return
        except Exception as exc:  # counted, not raised: the figure is the number of failures
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            return
        latencies.append(time.monotonic() - t0)

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_mb(pid))
            await asyncio.sleep(0.25)

    watcher = asyncio.ensure_future(watch())
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=120)) as session:
        await asyncio.gather(*(one(session, ramp * i / n) for i in range(n)))
    watcher.cancel()
    latencies.sort()

    def pct(p: float) -> float:
        return round((latencies[min(len(latencies) - 1, int(p * len(latencies)))] - 2.0) * 1000, 1) if latencies else -1

    return {"streams": n, "opened_over_s": ramp, "ok": len(latencies), "errors": errors,
            "added_latency_ms": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": pct(1.0)},
            "rss_idle_mb": round(idle, 1), "rss_peak_mb": round(peak, 1),
            "kb_per_in_flight_stream": round((peak - idle) * 1024 / n, 1)}


def attempt_figures(data_dir: Path) -> dict[str, Any]:
    """Calls that needed more than one attempt, and the breaker transitions recorded."""
    with sqlite3.connect(data_dir / "modelgate.db") as conn:
        retried = conn.execute("SELECT COUNT(*) FROM call_log WHERE attempts > 1").fetchone()[0]
        events = dict(conn.execute("SELECT event_type, COUNT(*) FROM resilience_events GROUP BY event_type").fetchall())
    return {"calls_with_more_than_one_attempt": retried, "resilience_events": events,
            "breaker_opened": events.get("BREAKER_OPENED", 0)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="length of the mixed-traffic phase")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--fault-share", type=float, default=0.3, help="share of the faulty channel's answers damaged")
    parser.add_argument("--streams", type=int, default=5000, help="0 skips the in-flight streams phase")
    parser.add_argument("--attempt-limit", type=float, default=60.0,
                        help="phase 2: seconds each attempt may take to connect and to send its first event")
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the client holds one socket per stream
    log_dir = Path(tempfile.mkdtemp(prefix="modelgate-soak-"))
    report: dict[str, Any] = {"log_dir": str(log_dir)}
    healthy = start_upstream(log_dir, None, chunks=8, delay_ms=0)
    slow = start_upstream(log_dir, None, chunks=8, delay_ms=2000)
    procs = [healthy.proc, slow.proc]

    async def phase_one() -> None:
        faulty = await RandomFaults(healthy.url, args.fault_share, random.Random(7)).start()
        try:
            proc, port, key = await asyncio.to_thread(start_gateway, log_dir / "mixed", healthy.url, faulty.origin,
                                                      log_dir)
            procs.append(proc)
            report["mixed"] = await mixed_traffic(f"http://127.0.0.1:{port}", key, proc.popen.pid,
                                                  args.minutes * 60, args.concurrency)
            report["mixed"]["calls"] += 1  # the readiness call of start_gateway has its row too
            report["mixed"]["faulty_channel_answers"] = faulty.requests
            proc.stop()
            report["mixed"]["call_log_rows"] = count_call_log(log_dir / "mixed")
        finally:
            await faulty.close()

    try:
        (log_dir / "mixed").mkdir()
        asyncio.run(phase_one())
        if args.streams:
            (log_dir / "streams").mkdir()
            limit = str(args.attempt_limit)
            proc, port, key = start_gateway(log_dir / "streams", slow.url, slow.url, log_dir, {
                "UPSTREAM_CONNECT_TIMEOUT_SECONDS": limit, "UPSTREAM_STREAM_FIRST_BYTE_TIMEOUT_SECONDS": limit})
            procs.append(proc)
            report["in_flight"] = asyncio.run(many_streams(f"http://127.0.0.1:{port}", key, proc.popen.pid,
                                                           args.streams, 5.0))
            proc.stop()
            report["in_flight"].update(attempt_figures(log_dir / "streams"), attempt_limit_s=args.attempt_limit)
    finally:
        for proc in procs:
            if proc is not None and proc.alive():
                proc.stop()
    mixed = report.get("mixed", {})
    if mixed:
        mixed["gateway_5xx"] = sum(n for status, n in mixed["statuses"].items() if status >= 500)
        sizes = [mb for _, mb in mixed["rss_mb"]]
        half = len(sizes) // 2
        mixed["rss_trend_mb"] = round(max(sizes[half:]) - max(sizes[:half]), 1) if half else 0.0
        mixed["rss_mb"] = " ".join(f"{t}s:{mb}" for t, mb in mixed["rss_mb"])
        mixed["call_log_queue"] = " ".join(map(str, mixed["call_log_queue"]))
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


if __name__ == "__main__":
    main()
