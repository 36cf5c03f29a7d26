"""The agent-request cases of both benchmarks (bench/agent.py in full, bench/ab.py in A/B), in one
table, so that a case means the same client body, model and bare-proxy reference in both."""

from __future__ import annotations

from dataclasses import dataclass

from bench import workloads
from bench.targets import ALT_MODEL, MODEL, RENAMED_MODEL, RESPONSES_MODEL, Call, Target


@dataclass(frozen=True)
class AgentCase:
    name: str  # its figures' name in bench/agent.py's results and tables
    short: str  # its name in bench/ab.py's --cases (with the 150 KB shape)
    protocol: str  # the client's: chat, messages or responses
    model: str  # the model asked for: its channel on the benchmark's gateway decides pass-through or conversion
    bare: str  # the bare-proxy case it is compared with: the same client body through the floor


AGENT_CASES = (
    AgentCase("modelgate pass-through chat", "agent150", "chat", MODEL, "bare chat"),
    AgentCase("modelgate pass-through messages", "agent150-messages", "messages", ALT_MODEL, "bare messages"),
    AgentCase("modelgate messages→chat", "agent150-messages-to-chat", "messages", MODEL, "bare messages"),
    AgentCase("modelgate chat→messages", "agent150-chat-to-messages", "chat", ALT_MODEL, "bare chat"),
    # A model the channel serves under another upstream name: the request's model rewritten, the
    # answer's set back to the client's id (issue 10).
    AgentCase("modelgate pass-through chat, renamed model", "agent150-renamed", "chat", RENAMED_MODEL,
              "bare chat"),
    AgentCase("modelgate pass-through responses", "agent150-responses", "responses", RESPONSES_MODEL,
              "bare responses"),
    AgentCase("modelgate responses→chat", "agent150-responses-to-chat", "responses", MODEL, "bare chat"),
)

# The bare proxy's cases: each protocol's agent body to the fake upstream's endpoint of that protocol.
BARE_CASES = ("bare chat", "bare messages", "bare responses")

_PATHS = {"chat": "/v1/chat/completions", "messages": "/alt/v1/messages", "responses": "/v1/responses"}
_BODIES = {"chat": workloads.agent_chat_body, "messages": workloads.agent_messages_body,
           "responses": workloads.agent_responses_body}


def gateway_call(case: AgentCase, shape: workloads.AgentShape, key: str, stream: bool = False) -> Call:
    headers = ([f"x-api-key: {key}", "alt-version: 2023-06-01"] if case.protocol == "messages"
               else [f"Authorization: Bearer {key}"])
    return Call(_PATHS[case.protocol], headers, _BODIES[case.protocol](shape, case.model, stream), stream)


def bare_call(bare: str, shape: workloads.AgentShape, upstream: Target, stream: bool = False) -> Call:
    """One of BARE_CASES: the body of that protocol through the bare proxy."""
    protocol = bare.removeprefix("bare ")
    path = "/v1/messages" if protocol == "messages" else _PATHS[protocol]
    return Call(path, upstream.calls[protocol].headers, _BODIES[protocol](shape, MODEL, stream), stream)
