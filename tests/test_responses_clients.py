"""Real clients of the Responses protocol: the Codex CLI (npm `@openai/codex`) and the Vercel AI
SDK (npm `ai` + `@ai-sdk/openai`), installed from tests/clients/package.json by `make clients`.

Each runs against the real gateway, with a scripted fake upstream behind it that makes the
model call a tool and then finish: through a chat-format channel and through an `anthropic`
channel (both converted), and through a Gemini and a Bedrock Converse channel, whose fakes check the
clients' own tool schemas and histories. Codex also runs as the README sets it up, on an `openai` channel
(passed through). Runs are bounded; a missing CLI or runtime skips with the reason.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from modelgate.providers.openai_models import reasoning_model
from tests.fakes.anthropic_upstream import API_KEY as ANTHROPIC_KEY
from tests.fakes.anthropic_upstream import Reply
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.openai_upstream import FakeOpenAI, responses_refusal
from tests.test_chat_e2e import call_rows

CLIENTS = Path(__file__).parent / "clients"
CODEX = CLIENTS / "node_modules" / ".bin" / "codex"
AI_SDK = CLIENTS / "node_modules" / "@ai-sdk" / "openai"
RUN_LIMIT = 180  # seconds for one client run
COMMAND = "printf 'hello from codex' > result.txt && cat result.txt"
# What models say before a call. The AI SDK stores by default and sends it back, on the next step, as a
# reference to the item it came in (tests/test_responses_e2e.py): the gateway must read it back.
PREAMBLE = "Let me check."


def readme_codex_config(base_url: str, model: str) -> str:
    """The README's Codex configuration ("Use with Codex"), pointed at this gateway and model."""
    text = (Path(__file__).parent.parent / "README.md").read_text()
    start = text.index("## Use with Codex\n")
    (config,) = re.findall(r"```toml\n(.*?)```", text[start:text.find("\n## ", start + 1)], re.S)
    assert 'base_url = "http://localhost:8080/v1"' in config and 'model = "gpt-4o-mini"' in config
    return config.replace("http://localhost:8080/v1", base_url).replace('"gpt-4o-mini"', f'"{model}"')


def need(path: Path, what: str) -> None:
    if not path.exists():
        pytest.skip(f"{what} is not installed ({path} missing): run `make clients` (npm install in tests/clients)")
    if shutil.which("node") is None:
        pytest.skip("node is not installed")


async def run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RUN_LIMIT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{argv[0]} did not finish within {RUN_LIMIT} s")
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


def tool_result_text(body: dict[str, Any]) -> str | None:
    """The latest tool result the model was given, in either wire format, if any."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "tool":
            return message["content"]
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    inner = block.get("content")
                    return inner if isinstance(inner, str) else " ".join(b.get("text", "") for b in inner or [])
    return None


def script_chat(tool: str, arguments: dict[str, Any], final: str):
    """A chat upstream that calls `tool` first and, given its result, answers `final: <result>`."""
    def answer(body: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]], str]:
        result = tool_result_text(body)
        if result is not None:
            return f"{final}: {result.strip().splitlines()[-1]}", [], "stop"
        call = {"id": "call_step1", "type": "function",
                "function": {"name": tool, "arguments": orjson.dumps(arguments).decode()}}
        return PREAMBLE, [call], "tool_calls"
    return answer


def script_messages(tool: str, arguments: dict[str, Any], final: str):
    def answer(body: dict[str, Any]) -> Reply:
        result = tool_result_text(body)
        if result is not None:
            return Reply(text=f"{final}: {result.strip().splitlines()[-1]}")
        return Reply(text=PREAMBLE, tool_uses=[(tool, arguments)])
    return answer


class ScriptedGemini(FakeGemini):
    """Gemini that calls `tool` first and, given its result, answers `final: <result>`."""

    tool, final = "", ""
    arguments: dict[str, Any] = {}

    def _answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        results = [p["functionResponse"]["response"] for p in body["contents"][-1]["parts"] if "functionResponse" in p]
        if results:
            return [{"text": f"{self.final}: {str(results[0].get('output')).strip().splitlines()[-1]}"}]
        return [{"text": PREAMBLE}, {"functionCall": {"name": self.tool, "args": self.arguments}}]


class ScriptedBedrock(FakeBedrock):
    """Converse that calls `tool` first and, given its result, answers `final: <result>`."""

    tool, final = "", ""
    arguments: dict[str, Any] = {}

    def _answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        results = [b["toolResult"] for b in body["messages"][-1]["content"] if "toolResult" in b]
        if results:
            text = " ".join(c.get("text", "") for c in results[0]["content"])
            return [{"text": f"{self.final}: {text.strip().splitlines()[-1]}"}], "end_turn"
        return [{"text": PREAMBLE}, {"toolUse": {"toolUseId": "tooluse_step1", "name": self.tool, "input": self.arguments}}], \
            "tool_use"


@pytest.fixture
async def bedrock_upstream():
    fake = await ScriptedBedrock().start()
    yield fake
    await fake.close()


@pytest.fixture
async def gemini_upstream():
    fake = await ScriptedGemini(models=("gemini-3.8-flash",)).start()
    yield fake
    await fake.close()


async def wire(gateway, route: str, openai_upstream, anthropic_upstream, tool: str, arguments: dict, final: str,
               gemini_upstream=None, bedrock_upstream=None, anthropic_options: dict | None = None):
    if route == "bedrock":
        bedrock_upstream.tool, bedrock_upstream.arguments, bedrock_upstream.final = tool, arguments, final
        model = bedrock_upstream.models[0]
        wired = await gateway.wire(bedrock_upstream.base_url, [model], kind="aws-bedrock",
                                   upstream_keys=(bedrock_upstream.api_key,), name="bedrock")
        return wired, model, bedrock_upstream
    if route == "gemini":  # 3.8 Flash signs its function calls and checks them on the next step
        gemini_upstream.tool, gemini_upstream.arguments, gemini_upstream.final = tool, arguments, final
        wired = await gateway.wire(gemini_upstream.base_url, ["gemini-3.8-flash"], kind="gemini",
                                   upstream_keys=(gemini_upstream.api_key,), name="gemini")
        return wired, "gemini-3.8-flash", gemini_upstream
    if route == "chat":  # a reasoning model of the chat-completions vendors (DeepSeek, Qwen)
        openai_upstream.script = script_chat(tool, arguments, final)
        openai_upstream.reasoning = "The user asks for something a tool can do."
        return await gateway.wire(openai_upstream.base_url, ["gpt-test"]), "gpt-test", openai_upstream
    anthropic_upstream.script = script_messages(tool, arguments, final)
    wired = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                               upstream_keys=(ANTHROPIC_KEY,), name="claude", options=anthropic_options)
    return wired, "claude-haiku-4-5", anthropic_upstream


@pytest.mark.parametrize("route", ["chat", "anthropic", "gemini", "bedrock"])
async def test_codex_cli_completes_a_two_step_tool_task(gateway, openai_upstream, anthropic_upstream, gemini_upstream,
                                                       bedrock_upstream, tmp_path, route, typed_view_misses):
    need(CODEX, "The Codex CLI (@openai/codex)")
    wired, model, upstream = await wire(gateway, route, openai_upstream, anthropic_upstream,
                                        "exec_command", {"cmd": COMMAND}, "Done", gemini_upstream, bedrock_upstream)
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(readme_codex_config(f"{gateway.url}/v1", model))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CODEX_HOME": str(home),
           "MODELGATE_API_KEY": wired.key, "NO_COLOR": "1"}
    code, out, err = await run([str(CODEX), "exec", "--json", "--skip-git-repo-check", "--ephemeral",
                                "--dangerously-bypass-approvals-and-sandbox", "-C", str(work),
                                "Write hello from codex into result.txt"], env, work)
    assert code == 0, err[-2000:]
    events = [orjson.loads(line) for line in out.splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    commands = [i for i in items if i["type"] == "command_execution"]
    assert commands and COMMAND in commands[0]["command"] and commands[0]["exit_code"] == 0
    assert items[-1]["type"] == "agent_message" and items[-1]["text"] == "Done: hello from codex"
    assert (work / "result.txt").read_text() == "hello from codex"
    assert events[-1]["type"] == "turn.completed" and events[-1]["usage"]["output_tokens"] > 0
    assert len(upstream.requests) == 2  # the tool call, then the answer
    rows = await call_rows(gateway, 2)
    assert {(r.protocol, r.stream, r.status) for r in rows} == {("responses", True, 200)}
    assert typed_view_misses == []  # a conversion's first request reads the view


@pytest.mark.parametrize("upstream_model, effort", [
    ("gpt-4o-mini", "xhigh"), ("gpt-5", "xhigh"), ("gpt-5.1", "xhigh"),
    ("gpt-6-sol", "max"), ("gpt-5.1", "max"),  # Codex's max and ultra presets send max (openai/codex#30585)
])
async def test_codex_cli_as_the_readme_sets_it_up_on_an_openai_channel(gateway, tmp_path, upstream_model, effort,
                                                                     typed_view_misses):
    # The README's own model id on an `openai` channel (passed through), served by the model itself or by an
    # OpenAI model of another generation behind it, which refuses what the first takes (tests/fakes/openai_upstream:
    # an effort or encrypted reasoning where the model does not reason, an effort level of another generation).
    need(CODEX, "The Codex CLI (@openai/codex)")
    fake = await FakeOpenAI(models=(upstream_model,)).start()
    try:
        wired = await gateway.wire(fake.base_url, [{"model_id": "gpt-4o-mini", "upstream_model": upstream_model}],
                                   kind="openai")
        home, work = tmp_path / "codex-home", tmp_path / "work"
        home.mkdir()
        work.mkdir()
        # A Codex user's usual setting: Codex then asks every model for that effort (0.169 does, whatever the model).
        (home / "config.toml").write_text(f'model_reasoning_effort = "{effort}"\n'
                                          + readme_codex_config(f"{gateway.url}/v1", "gpt-4o-mini"))
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CODEX_HOME": str(home),
               "MODELGATE_API_KEY": wired.key, "NO_COLOR": "1"}
        code, out, err = await run([str(CODEX), "exec", "--json", "--skip-git-repo-check", "--ephemeral",
                                    "-C", str(work), "say hi"], env, work)
        assert code == 0, err[-2000:]
        events = [orjson.loads(line) for line in out.splitlines() if line.startswith("{")]
        items = [e["item"] for e in events if e["type"] == "item.completed"]
        assert items[-1]["type"] == "agent_message" and items[-1]["text"] == "Echo: say hi", events
        sent = fake.last.json()
        assert responses_refusal(sent) is None and len(fake.requests) == 1
        rules = reasoning_model(upstream_model)
        if rules is not None:  # the nearest level the model takes (max kept on gpt-6, high on gpt-5.1)
            assert sent["reasoning"]["effort"] == rules.effort(effort), sent["reasoning"]
        assert typed_view_misses == []  # Codex's request took the typed view
    finally:
        await fake.close()


@pytest.mark.parametrize("route", ["chat", "anthropic", "gemini", "bedrock"])
async def test_ai_sdk_generate_and_stream_text_with_a_tool(gateway, openai_upstream, anthropic_upstream,
                                                          gemini_upstream, bedrock_upstream, tmp_path, route):
    need(AI_SDK, "The Vercel AI SDK (ai, @ai-sdk/openai)")
    wired, model, upstream = await wire(gateway, route, openai_upstream, anthropic_upstream,
                                        "weather", {"city": "Paris"}, "Forecast", gemini_upstream, bedrock_upstream)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GATEWAY_URL": gateway.url,
           "GATEWAY_KEY": wired.key, "GATEWAY_MODEL": model}
    code, out, err = await run(["node", str(CLIENTS / "ai_sdk.mjs")], env, CLIENTS)
    assert code == 0, err[-2000:]
    result = orjson.loads(out.strip().splitlines()[-1])
    for mode in ("generate", "stream"):
        seen = result[mode]
        assert seen["text"] == "Forecast: sunny in Paris", seen
        assert seen["steps"] == 2 and seen["finish"] == "stop"
        assert seen["calls"] == [{"name": "weather", "input": {"city": "Paris"}}]
    assert {"text-delta", "tool-call", "tool-result", "finish"} <= set(result["stream"]["parts"])
    assert result["generate"]["usage"]["outputTokens"] > 0
    assert len(upstream.requests) == 4
    assert PREAMBLE.encode() in upstream.requests[1].body  # the SDK's reference to it, read back
    rows = await call_rows(gateway, 4)
    assert [(r.protocol, r.stream) for r in rows] == [("responses", False)] * 2 + [("responses", True)] * 2
