"""Smoke test of the benchmark harness: its pieces still start, talk and measure.

Runs the fake upstream and the bare proxy, one short wrk load and one short
open-loop run (about 5 s in all), and renders the report from what they
measured. Needs Debian's wrk; skipped with the reason when it is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from bench import report, targets
from bench.run import Plan, Runner, build_parser

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None,
                                reason="wrk is not installed (apt-get install -y wrk); the benchmark needs it")


@pytest.fixture
def upstream(tmp_path: Path):
    up = targets.start_upstream(tmp_path, None, chunks=4, delay_ms=0.0)
    yield up
    up.stop()


def test_fake_upstream_speaks_both_wire_formats(upstream: targets.Target) -> None:
    before = targets.upstream_calls(upstream)
    chat = upstream.calls["chat"]
    status, body = targets.request(upstream.port, "POST", chat.path, chat.body, chat.headers)
    assert status == 200
    answer = orjson.loads(body)
    assert answer["choices"][0]["message"]["role"] == "assistant"
    assert answer["usage"]["total_tokens"] == answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"]

    stream = chat.streamed()
    status, body = targets.request(upstream.port, "POST", stream.path, stream.body, stream.headers)
    events = [line for line in body.decode().split("\n\n") if line]
    assert status == 200
    assert events[-1] == "data: [DONE]"
    assert len(events) == 4 + 2  # content chunks, finish chunk, [DONE]

    msgs = upstream.calls["messages"].streamed()
    status, body = targets.request(upstream.port, "POST", msgs.path, msgs.body, msgs.headers)
    names = [block.split("\n")[0] for block in body.decode().split("\n\n") if block]
    assert status == 200
    assert names[0] == "event: message_start" and names[-1] == "event: message_stop"

    # Without its credentials header the upstream refuses, as the real one does.
    status, body = targets.request(upstream.port, "POST", chat.path, chat.body, [])
    assert status == 401
    assert targets.upstream_calls(upstream) - before == 3


def test_bare_proxy_under_wrk_and_open_loop(upstream: targets.Target, tmp_path: Path) -> None:
    plan = Plan(build_parser().parse_args(["--quick", "--latency-seconds", "0.5"]))
    runner = Runner(plan, tmp_path)
    bare = targets.start_bare(upstream, tmp_path, None)
    try:
        sat = runner.wrk(bare, bare.calls["chat"], 4, 1, None)
        assert sat["requests"] > 0 and sat["rps"] > 0
        assert sat["non_2xx"] == 0 and sat["socket_errors"] == 0
        assert sat["cpu_ms_per_request"] is not None and sat["cpu_ms_per_request"] > 0

        lat = runner.open_loop(bare, bare.calls["chat"].streamed(), 100.0, None)
        assert lat["completed"] == lat["count"] == 50
        assert lat["non_2xx"] == 0 and lat["socket_errors"] == 0
        assert 0 < lat["first_byte_ms"]["p50"] <= lat["latency_ms"]["p50"] <= lat["latency_ms"]["p99"]
    finally:
        bare.stop()

    results = {
        "date": "2026-01-01T00:00:00+00:00", "command": "smoke", "elapsed_s": 1.0,
        "machine": {"cpu": "cpu", "cores": 2, "memory_gb": 1.0, "kernel": "k", "python": "3", "wrk": "wrk"},
        "plan": {"quick": True, "duration_s": 1, "latency_seconds": 0.5, "connections": [4], "chunks": 4,
                 "delay_ms": 0.0, "pinning": {"target": None, "load_and_upstream": None}},
        "targets": {"bare": {"chat": {"plain": {"saturation": {"c8": sat}, "latency": {}},
                                      "stream": {"saturation": {}, "latency": {"r50": lat}}}}},
    }
    table = report.markdown(results)
    assert f"| bare | {sat['rps']:,.0f} |" in table


def test_profile_summary_counts_own_and_total_time() -> None:
    collapsed = "\n".join([
        "process 1:main;run (a.py:1);handle (b.py:10);loads (json.py:5) 6",
        "process 1:main;run (a.py:1);handle (b.py:12) 3",
        "process 1:main;run (a.py:1) 1",
    ])
    summary = report.collapsed_summary(collapsed)
    assert summary["samples"] == 10
    own = {row["function"]: row["self_pct"] for row in summary["self"]}
    assert own == {"loads (json.py)": 60.0, "handle (b.py)": 30.0, "run (a.py)": 10.0}
    total = {row["function"]: row["total_pct"] for row in summary["cumulative"]}
    assert total["run (a.py)"] == 100.0 and total["handle (b.py)"] == 90.0
