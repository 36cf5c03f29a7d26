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

from bench import report, targets, workloads
from bench.run import Plan, Runner, build_parser

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None,
                                reason="wrk is not installed (apt-get install -y wrk); the benchmark needs it")


@pytest.fixture
def upstream(tmp_path: Path):
    up = targets.start_upstream(tmp_path, None, chunks=4, delay_ms=0.0)
    yield up
    up.stop()


def test_fake_upstream_speaks_the_three_wire_formats(upstream: targets.Target) -> None:
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

    # The Responses API's answers echo the request's instructions and tools, whole and in the stream's
    # lifecycle events, as the service's response object does: checked against the SDK's types.
    from openai.types.responses import Response, ResponseStreamEvent
    from pydantic import TypeAdapter

    request = orjson.loads(workloads.agent_responses_body(workloads.AGENT_80, targets.RESPONSES_MODEL))
    call = upstream.calls["responses"]
    status, body = targets.request(upstream.port, "POST", call.path, orjson.dumps(request), call.headers)
    assert status == 200
    answer = Response.model_validate_json(body)
    assert answer.instructions == request["instructions"] and len(answer.tools) == len(request["tools"])
    assert answer.output_text and answer.usage is not None
    status, body = targets.request(upstream.port, "POST", call.path, orjson.dumps({**request, "stream": True}),
                                   call.headers)
    assert status == 200
    events = [TypeAdapter(ResponseStreamEvent).validate_json(block.split("\ndata: ", 1)[1])
              for block in body.decode().split("\n\n") if block]
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.completed" and events[-1].response.usage is not None
    assert events[-1].response.instructions == request["instructions"]
    assert [e.sequence_number for e in events] == list(range(len(events)))

    # Without its credentials header the upstream refuses, as the real one does.
    status, body = targets.request(upstream.port, "POST", chat.path, chat.body, [])
    assert status == 401
    assert targets.upstream_calls(upstream) - before == 5


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


# --- the agent benchmark (issue 14) ------------------------------------------------------------

def test_agent_bodies_have_the_agent_shape_and_pass_validation() -> None:
    from bench import workloads
    from modelgate.protocols.chat import ChatCodec
    from modelgate.protocols.messages import MessagesCodec
    from modelgate.protocols.responses import ResponsesCodec

    for shape in (workloads.AGENT_150, workloads.AGENT_80):
        chat = orjson.loads(workloads.agent_chat_body(shape, "m"))
        msgs = orjson.loads(workloads.agent_messages_body(shape, "m"))
        for body in (workloads.agent_chat_body(shape, "m"), workloads.agent_messages_body(shape, "m")):
            assert 0.9 * shape.total_kb * 1024 <= len(body) <= 1.1 * shape.total_kb * 1024
        assert len(chat["tools"]) == len(msgs["tools"]) == shape.tools
        assert len(chat["messages"][0]["content"]) == shape.system_kb * 1024
        assert sum(1 for m in chat["messages"] if m.get("tool_calls")) == shape.turns
        assert sum(1 for m in chat["messages"] if m["role"] == "tool") == shape.turns
        assert ChatCodec().validate(chat) == ("m", False)
        assert MessagesCodec().validate(msgs) == ("m", False)
        responses = orjson.loads(workloads.agent_responses_body(shape, "m"))
        assert ResponsesCodec().validate(responses) == ("m", False)
        assert len(responses["tools"]) == shape.tools and len(responses["instructions"]) == shape.system_kb * 1024
        assert sum(1 for item in responses["input"] if item["type"] == "function_call_output") == shape.turns


def test_long_streams_are_paced(upstream: targets.Target, tmp_path: Path) -> None:
    import subprocess
    import sys

    body = tmp_path / "long.json"
    body.write_bytes(orjson.dumps({"model": targets.LONG_MODEL, "stream": True,
                                   "messages": [{"role": "user", "content": "x"}]}))
    done = subprocess.run([sys.executable, "-m", "bench.streamload", "--url", upstream.url + "/v1/chat/completions",
                           "--body-file", str(body), "--header", upstream.calls["chat"].headers[0],
                           "--concurrency", "2", "--seconds", "0.5"], capture_output=True, timeout=60, check=True)
    out = orjson.loads(done.stdout)
    assert out["completed"] >= 2 and out["non_2xx"] == out["socket_errors"] == 0
    # 300 chunks 2 ms apart: the first byte at once, the last about 0.6 s later.
    assert out["first_byte_ms"]["p50"] < 100 < 400 < out["latency_ms"]["p50"]


def test_agent_bench_interleaves_targets_and_accounts_every_call(tmp_path: Path) -> None:
    from bench import agent, agent_report, workloads

    args = agent.build_parser().parse_args(
        ["--quick", "--no-pin", "--long-chunks", "20", "--out-dir", str(tmp_path)])
    bench = agent.AgentBench(args, tmp_path)
    up = targets.start_upstream(tmp_path, None, chunks=4, delay_ms=0.0, long_chunks=20, gap_ms=1.0)
    bench.upstream = up
    try:
        bare = targets.start_bare(up, tmp_path, None)
        mg = targets.start_modelgate(up, tmp_path, None, 1)
        try:
            key = mg.info["api_key"]
            chat_body = workloads.agent_chat_body(workloads.AGENT_80, targets.MODEL)
            msgs_body = workloads.agent_messages_body(workloads.AGENT_80, targets.MODEL)
            cases = [
                ("bare chat", bare, targets.Call("/v1/chat/completions", up.calls["chat"].headers, chat_body, False)),
                ("bare messages", bare, targets.Call("/v1/messages", up.calls["messages"].headers, msgs_body, False)),
                ("modelgate pass-through chat", mg, targets.Call(
                    "/v1/chat/completions", [f"Authorization: Bearer {key}"], chat_body, False)),
                ("modelgate messages→chat", mg, targets.Call(
                    "/alt/v1/messages", [f"x-api-key: {key}", "alt-version: 2023-06-01"], msgs_body, False)),
                ("modelgate pass-through chat, renamed model", mg, targets.Call(
                    "/v1/chat/completions", [f"Authorization: Bearer {key}"],
                    workloads.agent_chat_body(workloads.AGENT_80, targets.RENAMED_MODEL), False)),
                ("modelgate responses→chat", mg, targets.Call(
                    "/v1/responses", [f"Authorization: Bearer {key}"],
                    workloads.agent_responses_body(workloads.AGENT_80, targets.MODEL), False)),
                ("bare responses", bare, targets.Call("/v1/responses", up.calls["responses"].headers,
                                                      workloads.agent_responses_body(workloads.AGENT_80,
                                                                                     targets.MODEL), False)),
                ("modelgate pass-through responses", mg, targets.Call(
                    "/v1/responses", [f"Authorization: Bearer {key}"],
                    workloads.agent_responses_body(workloads.AGENT_80, targets.RESPONSES_MODEL), False)),
            ]
            for label, target, call in cases:  # one call each first: a refusal shows with its body
                status, answer = targets.request(target.port, "POST", call.path, call.body, call.headers)
                assert status == 200, (label, status, answer[:500])
            runs = bench.interleaved(cases, 4)
            long_call = targets.Call("/v1/chat/completions", [f"Authorization: Bearer {key}"], orjson.dumps(
                {"model": targets.LONG_MODEL, "stream": True, "messages": [{"role": "user", "content": "x"}]}), True)
            long_responses = targets.Call("/v1/responses", [f"Authorization: Bearer {key}"], orjson.dumps(
                {"model": targets.RESPONSES_LONG_MODEL, "stream": True, "input": "x"}), True)
            streamed = bench.streams([("modelgate pass-through chat", mg, long_call),
                                      ("modelgate pass-through responses", mg, long_responses)], 2)
        finally:
            bare.stop()
            stop = agent.stop_modelgate(mg)
    finally:
        up.stop()
    for label, results in runs.items():
        assert len(results) == 1 and results[0]["rps"] > 0, label
        assert results[0]["non_2xx"] == results[0]["socket_errors"] == 0, label
    assert streamed["modelgate pass-through chat"][0]["cpu_us_per_chunk"] > 0
    assert streamed["modelgate pass-through responses"][0]["completed"] > 0
    assert stop["upstream_calls"] > 0 and stop["lost_call_log_rows"] == 0
    results = {"date": "2026-01-01T00:00:00+00:00", "command": "smoke", "machine": {
        "cpu": "cpu", "cores": 2, "memory_gb": 1.0, "kernel": "k", "python": "3", "wrk": "wrk"},
        "plan": {"quick": True, "rounds": 1, "duration_s": 1, "stream_seconds": 1, "connections": 4,
                 "long_chunks": 20, "gap_ms": 1.0, "layout": bench.layout.describe()},
        "agent150": runs, "streams": {"x20": streamed}, "stop": {"modelgate-w1": stop}}
    table = agent_report.markdown(results)
    assert "| 150 KB agent, pass-through CPU/req ≤ 1.3× bare (chat) | " in table
    assert "| 150 KB agent, conversion responses→chat CPU/req ≤ 2× bare | " in table
    assert "| 150 KB agent, pass-through CPU/req ≤ 1.3× bare (Responses) | " in table
    assert "| 150 KB agent, pass-through with a renamed model: CPU/req vs the same model id | " in table
    assert f"| lost call-log rows, errors (every run) | 0 of {stop['upstream_calls']} calls; 0 errors | yes |" in table


def test_agent_report_files_never_overwrite_another_run_or_machine_size(tmp_path: Path) -> None:
    # A 2-core run once replaced the 16-core run's table the README links to.
    from bench import agent_report

    layout = {"upstream": "0", "load": "1", "target": "0", "workers": None}

    def run(date: str, cores: int) -> tuple[Path, Path]:
        return agent_report.write({"date": date, "command": "c", "machine": {
            "cpu": "cpu", "cores": cores, "memory_gb": 1.0, "kernel": "k", "python": "3", "wrk": "wrk"},
            "plan": {"quick": False, "rounds": 1, "duration_s": 1, "stream_seconds": 1, "connections": 4,
                     "long_chunks": 20, "gap_ms": 1.0, "layout": layout}}, tmp_path, False)

    first = run("2026-11-24T00:49:12+00:00", 2)
    second = run("2026-11-24T01:11:55+00:00", 2)
    large = run("2026-11-24T01:11:55+00:00", 16)
    assert [p.name for p in (*first, *second, *large)] == [
        "agent-2026-11-24T0049-2core.json", "agent-latest-2core.md",
        "agent-2026-11-24T0111-2core.json", "agent-latest-2core.md",
        "agent-2026-11-24T0111-16core.json", "agent-latest-16core.md"]
    assert all(p.exists() for p in (first[0], second[0], large[0]))
    assert "2026-11-24T01:11:55" in second[1].read_text() and "16 cores" in large[1].read_text()


def test_ab_compares_two_source_trees_round_by_round(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import ab

    repo = str(Path(__file__).resolve().parent.parent)
    assert ab.main(["--variant", f"one={repo}", "--variant", f"two={repo}", "--cases", "small",
                    "--rounds", "1", "--duration", "1", "--connections", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("small: bare ")
    assert lines[1].startswith("  one: ") and "× bare" in lines[1] and lines[1].endswith("errors 0")
    assert lines[2].startswith("  two: ") and "× one" in lines[2] and lines[2].endswith("errors 0")


def test_ab_refuses_a_directory_without_the_package(tmp_path: Path) -> None:
    from bench import ab

    with pytest.raises(SystemExit, match="holds no modelgate package"):
        ab.main(["--variant", f"one={tmp_path}", "--variant", f"two={tmp_path}"])


def test_the_goal_counts_modelgate_s_errors_not_a_peer_s() -> None:
    # A peer's failed streams (LiteLLM at 200 concurrent, 2026-11-25) are its own row's, not the goal's.
    from bench import agent_report

    ok = {"requests": 10, "non_2xx": 0, "socket_errors": 0}
    failing = {"requests": 10, "non_2xx": 3, "socket_errors": 145}
    results = {"small": {"modelgate": [ok], "litellm": [failing]},
               "streams": {"x200": {"modelgate messages→chat": [ok], "litellm": [failing]}},
               "stop": {"modelgate-w1": {"lost_call_log_rows": 0, "upstream_calls": 20}}}
    row = next(r for r in agent_report.goals(results) if r[0].startswith("lost call-log rows"))
    assert row == ("lost call-log rows, errors (every run)", "0 of 20 calls; 0 errors", "yes")
    results["small"]["modelgate"] = [{**ok, "non_2xx": 2}]
    assert next(r for r in agent_report.goals(results) if r[0].startswith("lost call-log rows"))[1:] == (
        "0 of 20 calls; 2 errors", "no")
    assert "| 148 |" in "\n".join(agent_report.stream_table(results["streams"]["x200"]))
