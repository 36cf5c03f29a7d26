"""The real opencode CLI (its npm build for Linux x64, installed by `make agent-clis` from tests/agents/package.json)
against the gateway, configured as the README says ("Use with opencode"): a provider of
`@ai-sdk/openai-compatible` whose `baseURL` is `{gateway}/v1`, with a gateway key.

It speaks chat completions, streamed, with its own system prompt and tool set (`bash`, `read`, `glob`...,
about 30 KB a request). A scripted upstream makes it run two commands in parallel, then one more, then
finish: on a chat-completions channel (pass-through) and converted to an `anthropic`, a Gemini and a
Bedrock Converse channel, whose fakes check its tool schemas and histories. Each run is bounded.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import orjson
import pytest

from tests.fakes.anthropic_upstream import API_KEY
from tests.test_claude_code_e2e import ScriptedAnthropic, ScriptedBedrock, ScriptedGemini, ScriptedOpenAI
from tests.test_responses_clients import run

def _cli() -> Path:
    """opencode's Linux x64 build, as its npm wrapper would pick it: the baseline one for CPUs without AVX2."""
    try:
        avx2 = "avx2" in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        avx2 = False
    build = "opencode-linux-x64" if avx2 else "opencode-linux-x64-baseline"
    return Path(__file__).parent / "agents" / "node_modules" / build / "bin" / "opencode"


CLI = _cli()
CONTENT, NOTES = "hello from the gateway\n", "written beside it\n"
DONE = "Task complete: hello.txt written and counted."

pytestmark = pytest.mark.skipif(
    not os.access(CLI, os.X_OK),
    reason=f"opencode CLI not installed at {CLI} (run `make agent-clis` on Linux x64; it needs the npm registry)")


def readme_json(section: str) -> str:
    """The one JSON block of the README's section `## {section}`."""
    text = (Path(__file__).parent.parent / "README.md").read_text()
    start = text.index(f"## {section}\n")
    (config,) = re.findall(r"```json\n(.*?)```", text[start:text.find("\n## ", start + 1)], re.S)
    return config


def readme_config(base_url: str, model: str) -> str:
    """The README's opencode configuration ("Use with opencode"), pointed at this gateway and model."""
    config = readme_json("Use with opencode")
    assert '"baseURL": "http://localhost:8080/v1"' in config and '"gpt-4o-mini"' in config
    return config.replace("http://localhost:8080/v1", base_url).replace("gpt-4o-mini", model)


def _opencode_turn(tools: set[str], results: int, workdir: Path) -> tuple[str | None, list[tuple[str, dict]]]:
    """Write two files with two commands at once, count one's bytes, finish. Side requests (titles) get text."""
    if "bash" not in tools:
        return "Gateway task", []
    if results == 0:
        return "I will write the files.", [
            ("bash", {"command": "printf 'hello from the gateway\\n' > hello.txt", "description": "Write hello.txt"}),
            ("bash", {"command": "printf 'written beside it\\n' > notes.txt", "description": "Write notes.txt"})]
    if results == 2:
        return "Now I count its bytes.", [("bash", {"command": "wc -c < hello.txt > count.txt",
                                                    "description": "Count the bytes of hello.txt"})]
    return DONE, []


def scripted_with(turn) -> dict[str, type]:
    """The scripted upstreams of each route (tests/test_claude_code_e2e.py) answering by `turn`."""
    bases = {"chat": ScriptedOpenAI, "anthropic": ScriptedAnthropic, "gemini": ScriptedGemini, "bedrock": ScriptedBedrock}
    return {route: type(f"Scripted{route.title()}", (base,), {"turn": staticmethod(turn)}) for route, base in bases.items()}


SCRIPTED = scripted_with(_opencode_turn)


async def start_upstream(route: str, workdir: Path, scripted: dict[str, type] = SCRIPTED, claude: str | None = None):
    """The scripted upstream of `route` (its class from `scripted`), the model wiring and the channel's; on the
    anthropic route `claude` picks the Claude model."""
    if route == "chat":
        return await scripted["chat"](workdir).start(), {"model_id": "team-coder", "upstream_model": "gpt-test"}, {}
    if route == "anthropic":
        upstream = await (scripted["anthropic"](workdir, claude) if claude else scripted["anthropic"](workdir)).start()
        return upstream, {"model_id": "team-coder", "upstream_model": upstream.models[0]}, {
            "kind": "anthropic", "upstream_keys": (API_KEY,), "name": "claude"}
    model = {"gemini": "gemini-3.8-flash", "bedrock": "anthropic.claude-3-5-haiku-20241022-v1:0"}[route]
    kind = {"gemini": "gemini", "bedrock": "aws-bedrock"}[route]
    upstream = await scripted[route](workdir, model).start()
    return upstream, {"model_id": "team-coder", "upstream_model": model}, {
        "kind": kind, "upstream_keys": (upstream.api_key,), "name": kind}


@pytest.mark.parametrize("route", ["chat", "anthropic", "gemini", "bedrock"])
async def test_opencode_runs_a_task_through_the_gateway(gateway, tmp_path, route, typed_view_misses):
    await task_on(gateway, tmp_path, route, orjson.loads(readme_config(f"{gateway.url}/v1", "team-coder")))
    assert typed_view_misses == []  # opencode's requests took the typed view (a conversion's first one reads it)


# opencode's Anthropic provider (`@ai-sdk/anthropic`) pointed at `{gateway}/alt/v1` speaks the messages protocol:
# passed through to an `anthropic` channel, converted to a chat one.
@pytest.mark.parametrize("route", ["anthropic", "chat"])
async def test_opencode_through_its_anthropic_provider(gateway, tmp_path, route, typed_view_misses):
    provider = {"npm": "@ai-sdk/anthropic", "name": "modelgate",
                "options": {"baseURL": f"{gateway.url}/alt/v1", "apiKey": "{env:MODELGATE_API_KEY}"},
                "models": {"team-coder": {"name": "team-coder", "tool_call": True}}}
    upstream = await task_on(gateway, tmp_path, route, {"provider": {"modelgate": provider},
                                                        "model": "modelgate/team-coder"})
    expected = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions"}[route]
    assert any(r.path == expected for r in upstream.requests)
    assert typed_view_misses == []


# On OpenAI's own API (an `openai` channel), opencode's `max_tokens: 32000` is more than gpt-4o-mini takes (the
# README's example model: 16,384) and a parameter OpenAI's reasoning models refuse; the fake refuses both in
# the service's words. The gateway sends what the model behind the id takes, under its own id or an alias.
@pytest.mark.parametrize(("model_id", "upstream_model"), [("gpt-4o-mini", "gpt-4o-mini"), ("team-coder", "gpt-5"),
                                                          ("team-coder", "o3")])
async def test_opencode_on_openai_s_own_models(gateway, tmp_path, model_id, upstream_model, typed_view_misses):
    workdir, home = tmp_path / "work", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    upstream = await SCRIPTED["chat"](workdir, upstream_model).start()
    try:
        wired = await gateway.wire(upstream.base_url, [{"model_id": model_id, "upstream_model": upstream_model}],
                                   kind="openai", name="openai")
        await run_task(orjson.loads(readme_config(f"{gateway.url}/v1", model_id)), wired.key, workdir, home)
        sent = [r.json() for r in upstream.requests if r.path.endswith("/chat/completions")]
        assert sent and all(body["model"] == upstream_model for body in sent)
        limits = {body.get("max_tokens") or body.get("max_completion_tokens") for body in sent}
        assert limits == ({16384} if upstream_model == "gpt-4o-mini" else {32000})
        assert typed_view_misses == []
    finally:
        await upstream.close()
        shutil.rmtree(home, ignore_errors=True)


async def task_on(gateway, tmp_path, route: str, config: dict):
    """Wire a scripted upstream of `route`, run the task with opencode configured by `config`; the upstream."""
    workdir, home = tmp_path / "work", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    upstream, model, wiring = await start_upstream(route, workdir)
    try:
        wired = await gateway.wire(upstream.base_url, [model], **wiring)
        await run_task(config, wired.key, workdir, home)
        return upstream
    finally:
        await upstream.close()
        shutil.rmtree(home, ignore_errors=True)


async def run_task(config: dict, key: str, workdir: Path, home: Path) -> None:
    """Run opencode headless with `config` and check the task got done, its usage seen on every step."""
    config["permission"] = {"bash": "allow"}  # a headless run asks no one
    (workdir / "opencode.json").write_text(orjson.dumps(config).decode())
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "MODELGATE_API_KEY": key,
           "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}
    code, out, err = await run([str(CLI), "run", "--pure", "--format", "json",
                                "Write hello.txt and notes.txt, then count the bytes of hello.txt"], env, workdir)
    assert code == 0, err[-3000:]
    events = [orjson.loads(line) for line in out.splitlines() if line.startswith("{")]
    texts = [e["part"]["text"] for e in events if e.get("type") == "text"]
    assert texts[-1] == DONE, (texts, err[-2000:])
    tools = [e["part"] for e in events if e.get("type") == "tool_use"]
    assert [t["state"]["status"] for t in tools] == ["completed"] * 3
    assert (workdir / "hello.txt").read_text() == CONTENT and (workdir / "notes.txt").read_text() == NOTES
    assert (workdir / "count.txt").read_text().strip() == str(len(CONTENT))
    finished = [e["part"] for e in events if e.get("type") == "step_finish"]
    assert all(step["tokens"]["output"] > 0 for step in finished)
