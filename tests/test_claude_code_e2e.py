"""The real Claude Code CLI (npm `@anthropic-ai/claude-code`, installed by `make agent-clis` from
tests/agents/package.json) against the gateway, as a user would run it:
`ANTHROPIC_BASE_URL={gateway}/alt` and a gateway key, nothing else.

A scripted upstream makes the agent write a file, run a command, then finish. Once on an
`anthropic`-kind channel with the CLI's default model (pass-through), then on a chat-completions, a
Gemini and a Bedrock Converse channel with a model name the CLI does not know (conversion: the CLI's own
tool schemas and histories must pass each vendor's checks, tests/fakes/tool_rules.py and the fakes'
own validators). Each run is bounded.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.fakes.anthropic_upstream import API_KEY, FakeAnthropic, Reply
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.vertex_upstream import LOCATION, PROJECT, FakeVertexClaude

CLI = Path(__file__).parent / "agents" / "node_modules" / ".bin" / "claude"
# The default model of the pinned CLI release (tests/agents/package.json), seen in its first request.
DEFAULT_MODEL = "claude-opus-5-5"
RUN_LIMIT_S = 240
PROMPT = "Write hello.txt saying hello from the gateway, then count its bytes into count.txt."
CONTENT = "hello from the gateway\n"
NOTES = "written beside it\n"

pytestmark = pytest.mark.skipif(
    not os.access(CLI, os.X_OK),
    reason=f"Claude Code CLI not installed at {CLI} (run `make agent-clis`; it needs the npm registry)")


def _agent_turn(tools: set[str], results: int, workdir: Path) -> tuple[str | None, list[tuple[str, dict]]]:
    """The script: write two files in parallel (two calls in one answer, as agents do), run a command, finish.
    Side requests (titles, summaries) get text."""
    if not {"Write", "Bash"} <= tools:
        return "ok", []
    if results == 0:
        return "I will write the files.", [("Write", {"file_path": str(workdir / "hello.txt"), "content": CONTENT}),
                                          ("Write", {"file_path": str(workdir / "notes.txt"), "content": NOTES})]
    if results == 2:
        return "Now I count its bytes.", [("Bash", {"command": "wc -c < hello.txt > count.txt",
                                                    "description": "Count the bytes of the file"})]
    return "Task complete: hello.txt written and counted.", []


def _tool_results(messages: list[dict[str, Any]]) -> int:
    count = 0
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool":
            count += 1
        elif isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return count


class _Scripted:
    """A fake upstream of `model` that answers by `turn` (tool names offered, tool results so far, workdir) ->
    (text, calls); tests/test_opencode_e2e.py gives the subclasses below its own."""

    turn = staticmethod(_agent_turn)

    def __init__(self, workdir: Path, model: str) -> None:
        super().__init__(models=(model,))  # the fake upstream's own constructor
        self.workdir = workdir


class _ScriptedClaude(_Scripted):
    def _auto_reply(self, body: dict[str, Any]) -> Reply:
        text, calls = self.turn({t.get("name") for t in body.get("tools") or []},
                                _tool_results(body["messages"]), self.workdir)
        return Reply(text=text, tool_uses=calls)


class ScriptedAnthropic(_ScriptedClaude, FakeAnthropic):
    def __init__(self, workdir: Path, model: str = DEFAULT_MODEL) -> None:
        super().__init__(workdir, model)


class ScriptedVertexClaude(_ScriptedClaude, FakeVertexClaude):
    def __init__(self, workdir: Path, model: str) -> None:
        super().__init__(workdir, model.split("@", 1)[0])  # its rules are the model's, whatever snapshot

    def offered(self) -> list[set[str]]:
        """The tool names of each request this fake answered."""
        return [{t["name"] for t in r.json().get("tools") or []} for r in self.requests
                if r.path.endswith("Predict") and "count-tokens" not in r.path]


class ScriptedOpenAI(_Scripted, FakeOpenAI):
    def __init__(self, workdir: Path, model: str = "gpt-test") -> None:
        super().__init__(workdir, model)

    def _answer(self, body: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]], str]:
        names = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        text, calls = self.turn(names, _tool_results(body["messages"]), self.workdir)
        tool_calls = [{"id": f"call_{i}_{name}", "type": "function",
                       "function": {"name": name, "arguments": orjson.dumps(args).decode()}}
                      for i, (name, args) in enumerate(calls)]
        return text, tool_calls, "tool_calls" if tool_calls else "stop"


class ScriptedGemini(_Scripted, FakeGemini):
    def offered(self) -> list[set[str]]:
        """The tool names of each request this fake answered."""
        return [{d["name"] for t in r.json().get("tools") or [] for d in t["functionDeclarations"]}
                for r in self.requests if r.path.rsplit(":", 1)[-1] in ("generateContent", "streamGenerateContent")]

    def _answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        names = {d.get("name") for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []}
        results = sum(1 for c in body["contents"] for p in c["parts"] if "functionResponse" in p)
        text, calls = self.turn(names, results, self.workdir)
        return [{"text": text}] + [{"functionCall": {"name": name, "args": args}} for name, args in calls]


class ScriptedBedrock(_Scripted, FakeBedrock):
    def offered(self) -> list[set[str]]:
        """The tool names of each request this fake answered."""
        return [{t["toolSpec"]["name"] for t in (b.get("toolConfig") or {}).get("tools") or []} for b in self.bodies]

    def _answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        names = {t["toolSpec"]["name"] for t in (body.get("toolConfig") or {}).get("tools") or [] if "toolSpec" in t}
        results = sum(1 for m in body["messages"] for b in m["content"] if "toolResult" in b)
        text, calls = self.turn(names, results, self.workdir)
        uses = [{"toolUse": {"toolUseId": f"tooluse_{results}_{i}", "name": name, "input": args}}
                for i, (name, args) in enumerate(calls)]
        return [{"text": text}, *uses], "tool_use" if uses else "end_turn"


async def run_claude(gateway_url: str, key: str, workdir: Path, home: Path, model: str | None) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update({
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": f"{gateway_url}/alt",
        "ANTHROPIC_API_KEY": key,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    })
    args = [str(CLI), "-p", PROMPT, "--output-format", "stream-json", "--verbose",
            "--allowedTools", "Write,Bash", "--max-turns", "6"]
    if model:
        args += ["--model", model]
    proc = await asyncio.create_subprocess_exec(*args, cwd=workdir, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RUN_LIMIT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"Claude Code did not finish within {RUN_LIMIT_S} s")
    events = [orjson.loads(line) for line in out.splitlines() if line.startswith(b"{")]
    assert proc.returncode == 0, f"exit {proc.returncode}: {err.decode()[-2000:]} {events[-1:]}"
    return events


def assert_task_done(events: list[dict], workdir: Path) -> None:
    result = events[-1]
    assert result["type"] == "result" and result["subtype"] == "success" and not result["is_error"], result
    assert result["result"] == "Task complete: hello.txt written and counted."
    assert (workdir / "hello.txt").read_text() == CONTENT and (workdir / "notes.txt").read_text() == NOTES
    assert (workdir / "count.txt").read_text().strip() == str(len(CONTENT))


@pytest.fixture
def dirs(tmp_path):
    workdir, home = tmp_path / "work", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    yield workdir, home
    shutil.rmtree(home, ignore_errors=True)


async def test_claude_code_default_model_on_an_anthropic_channel(gateway, dirs, typed_view_misses):
    workdir, home = dirs
    upstream = await ScriptedAnthropic(workdir).start()
    try:
        wired = await gateway.wire(upstream.base_url, [DEFAULT_MODEL], kind="anthropic",
                                   upstream_keys=(API_KEY,), name="claude")
        events = await run_claude(gateway.url, wired.key, workdir, home, model=None)
        assert_task_done(events, workdir)
        agent_calls = [r for r in upstream.requests if r.path == "/v1/messages"
                       and {"Write", "Bash"} <= {t.get("name") for t in r.json().get("tools") or []}]
        assert len(agent_calls) >= 3  # write both, run, finish
        for call in agent_calls:
            assert "claude-code-20250219" in call.headers["anthropic-beta"]
            assert call.json()["model"] == DEFAULT_MODEL and wired.key not in call.body.decode()
        assert typed_view_misses == []  # every request Claude Code sent took the typed view
    finally:
        await upstream.close()


# Behind a gateway id Claude Code cannot tell the model, and asks for adaptive thinking and an effort, which
# Claude before 4.6 refuses (the fake says so in the vendor's words). It recovers by itself after two refused
# round trips per conversation; the gateway sends the form the model takes at once.
async def test_claude_code_behind_an_alias_of_an_older_claude(gateway, dirs, typed_view_misses):
    workdir, home = dirs
    upstream = await ScriptedAnthropic(workdir, "claude-sonnet-4-5").start()
    try:
        wired = await gateway.wire(upstream.base_url, [{"model_id": "team-coder", "upstream_model": "claude-sonnet-4-5"}],
                                   kind="anthropic", upstream_keys=(API_KEY,), name="claude")
        events = await run_claude(gateway.url, wired.key, workdir, home, model="team-coder")
        assert_task_done(events, workdir)
        sent = [r.json() for r in upstream.requests if r.path == "/v1/messages"]
        assert sent and {(body.get("thinking") or {}).get("type") for body in sent} <= {"enabled", None}
        assert not any("effort" in (body.get("output_config") or {}) for body in sent)  # Sonnet 4.5 has none
        assert typed_view_misses == []
    finally:
        await upstream.close()


# With reasoning: the `reasoning_content` of DeepSeek, Qwen, vLLM and SGLang reaches the CLI as thinking, which
# it sends back on every later turn.
@pytest.mark.parametrize("reasoning", [None, "The user wants two files written, then a count."])
async def test_claude_code_on_a_chat_completions_channel(gateway, dirs, reasoning, typed_view_misses):
    workdir, home = dirs
    upstream = await ScriptedOpenAI(workdir).start()
    upstream.reasoning = reasoning
    try:
        wired = await gateway.wire(upstream.base_url, [{"model_id": "team-coder", "upstream_model": "gpt-test"}])
        events = await run_claude(gateway.url, wired.key, workdir, home, model="team-coder")
        assert_task_done(events, workdir)
        calls = [r.json() for r in upstream.requests if r.path.endswith("/chat/completions")]
        tools = [c for c in calls if "Write" in {t["function"]["name"] for t in c.get("tools") or []}]
        assert len(tools) >= 3
        last = tools[-1]["messages"]
        assert [m["role"] for m in last if m["role"] == "tool"] == ["tool", "tool", "tool"]
        assert any(m.get("tool_calls") for m in last if m["role"] == "assistant")
        assert typed_view_misses == []  # a conversion's first request reads the view
    finally:
        await upstream.close()


# Gemini 3.8 Flash signs its function calls and checks them on the next step (tests/fakes/gemini_upstream.py);
# Converse checks the body against the service model (botocore) and its own rules.
# Claude on Vertex AI: the CLI's requests taken apart and built again for the vendor's own rules, behind Google's
# URLs and a service account's tokens (tests/fakes/vertex_upstream.py).
@pytest.mark.parametrize("kind,model", [("gemini", "gemini-2.5-flash"), ("gemini", "gemini-3.8-flash"),
                                        ("aws-bedrock", "anthropic.claude-3-5-haiku-20241022-v1:0"),
                                        ("vertex-ai", "claude-sonnet-4-5@20250929")])
async def test_claude_code_on_another_vendor_s_channel(gateway, dirs, kind, model):
    workdir, home = dirs
    fake = {"gemini": ScriptedGemini, "aws-bedrock": ScriptedBedrock, "vertex-ai": ScriptedVertexClaude}[kind]
    upstream = await fake(workdir, model).start()
    if kind == "vertex-ai":
        keys, options = (orjson.dumps(upstream.service_account).decode(),), {"project": PROJECT, "location": LOCATION}
    else:
        keys, options = (upstream.api_key,), None
    try:
        wired = await gateway.wire(upstream.base_url, [{"model_id": "team-model", "upstream_model": model}],
                                   kind=kind, upstream_keys=keys, name=kind, options=options)
        events = await run_claude(gateway.url, wired.key, workdir, home, model="team-model")
        assert_task_done(events, workdir)
        # Every request with the CLI's whole tool set and its history passed the vendor's checks.
        assert sum("Write" in names for names in upstream.offered()) >= 3
    finally:
        await upstream.close()
