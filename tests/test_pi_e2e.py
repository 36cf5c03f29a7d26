"""The real pi coding agent (npm `@mariozechner/pi-coding-agent`, installed by `make agent-clis` from
tests/agents/package.json) against the gateway, configured as the README says ("Use with pi"): a custom
provider in `~/.pi/agent/models.json` whose `baseUrl` is the gateway and whose `api` is one of the three pi
speaks (`openai-completions`, `openai-responses`, `anthropic-messages`), with a gateway key.

pi runs headless (`-p`, JSON events) with its own system prompt and tools (`read`, `bash`, `edit`, `write`),
thinking on. A scripted upstream makes it run two commands in one answer, then one more, then finish: on a
chat-completions channel and converted to an `anthropic`, a Gemini and a Bedrock Converse channel, whose
fakes check its requests. For a model id it does not know pi asks Claude for manual thinking
(`enabled` + `budget_tokens`), which Claude refuses from Opus 4.7 on: behind a gateway id that is every model.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from tests.test_opencode_e2e import readme_json, scripted_with, start_upstream
from tests.test_responses_clients import run

CLI = Path(__file__).parent / "agents" / "node_modules" / ".bin" / "pi"
CONTENT, NOTES = "hello from the gateway\n", "written beside it\n"
DONE = "Task complete: hello.txt written and counted."
TASK = "Write hello.txt and notes.txt, then count the bytes of hello.txt"
APIS = {"openai-completions": "/v1", "openai-responses": "/v1", "anthropic-messages": "/alt"}

pytestmark = pytest.mark.skipif(
    not os.access(CLI, os.X_OK),
    reason=f"pi CLI not installed at {CLI} (run `make agent-clis`; it needs the npm registry)")


def readme_config(gateway_url: str, api: str) -> dict:
    """The README's pi configuration ("Use with pi"), pointed at this gateway with `api`."""
    parsed = orjson.loads(readme_json("Use with pi"))
    provider = parsed["providers"]["modelgate"]
    assert provider["baseUrl"] == "http://localhost:8080/v1" and provider["models"] == [{"id": "team-coder", "reasoning": True}]
    provider.update(baseUrl=gateway_url + APIS[api], api=api)
    return parsed


def _pi_turn(tools: set[str], results: int, workdir: Path) -> tuple[str | None, list[tuple[str, dict]]]:
    if "bash" not in tools:
        return "Gateway task", []
    if results == 0:
        return "I will write the files.", [("bash", {"command": "printf 'hello from the gateway\\n' > hello.txt"}),
                                          ("bash", {"command": "printf 'written beside it\\n' > notes.txt"})]
    if results == 2:
        return "Now I count its bytes.", [("bash", {"command": "wc -c < hello.txt > count.txt"})]
    return DONE, []


SCRIPTED = scripted_with(_pi_turn)


async def task_on(gateway, tmp_path: Path, route: str, api: str, claude: str | None = None):
    """Wire a scripted upstream of `route`, run the task with pi speaking `api`; the upstream."""
    workdir, home = tmp_path / "work", tmp_path / "home"
    workdir.mkdir()
    (home / ".pi" / "agent").mkdir(parents=True)
    upstream, model, wiring = await start_upstream(route, workdir, SCRIPTED, claude)
    try:
        wired = await gateway.wire(upstream.base_url, [model], **wiring)
        (home / ".pi" / "agent" / "models.json").write_text(orjson.dumps(readme_config(gateway.url, api)).decode())
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "MODELGATE_API_KEY": wired.key,
               "PI_OFFLINE": "1", "PI_TELEMETRY": "0"}
        code, out, err = await run([str(CLI), "--no-session", "--mode", "json", "--model", "modelgate/team-coder",
                                    "-p", TASK], env, workdir)
        assert code == 0, err[-3000:]
        events = [orjson.loads(line) for line in out.splitlines() if line.startswith("{")]
        ends = [e["message"] for e in events if e.get("type") == "message_end" and e["message"]["role"] == "assistant"]
        assert [m.get("errorMessage") for m in ends] == [None] * len(ends), ends[-1:]
        last = ends[-1]["content"][-1]
        assert (last["type"], last["text"]) == ("text", DONE)
        assert all(m["usage"]["output"] > 0 for m in ends)  # usage reached pi on every step
        assert (workdir / "hello.txt").read_text() == CONTENT and (workdir / "notes.txt").read_text() == NOTES
        assert (workdir / "count.txt").read_text().strip() == str(len(CONTENT))
        return upstream
    finally:
        await upstream.close()
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("route", ["chat", "anthropic", "gemini", "bedrock"])
@pytest.mark.parametrize("api", list(APIS))
async def test_pi_runs_a_task_through_the_gateway(gateway, tmp_path, api, route, typed_view_misses):
    await task_on(gateway, tmp_path, route, api)
    assert typed_view_misses == []  # pi's requests took the typed view (a conversion's first one reads it)


# pi's manual thinking reaches each generation of Claude behind the gateway id in the form it takes: Opus 4.8
# and 5.5 refuse `enabled` (the fake says so in the vendor's words), Sonnet 4.5 takes it.
@pytest.mark.parametrize("claude", ["claude-opus-5-5", "claude-opus-4-8", "claude-sonnet-4-5"])
async def test_pi_s_thinking_reaches_every_claude_generation(gateway, tmp_path, claude, typed_view_misses):
    upstream = await task_on(gateway, tmp_path, "anthropic", "anthropic-messages", claude)
    sent = [r.json() for r in upstream.requests if r.path == "/v1/messages"]
    assert sent and all(body["model"] == claude for body in sent)
    kinds = {body["thinking"]["type"] for body in sent}
    assert kinds == ({"enabled"} if claude == "claude-sonnet-4-5" else {"adaptive"})
    assert typed_view_misses == []
