"""Local input-token estimates for `count_tokens` where the upstream has no count endpoint.

OpenAI's tokenizer (`tiktoken`) counts system, messages and tools the way OpenAI's cookbook
counts chat prompts (a few tokens of framing per message). tiktoken downloads its encoding
files on first use; here they are read from the copies the `bpe-openai` wheel ships
(o200k_base, cl100k_base; its own large native module is never imported) and checked
against the SHA-256 tiktoken expects, so nothing is downloaded at run time. Other model
families (Llama, Qwen, Mistral...) tokenise differently; o200k_base is the estimate for them
too, which is why the answer says `estimate`. Loading an encoding and encoding a large
prompt run in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import hashlib
import importlib.util
import threading
from pathlib import Path
from typing import Any

import orjson

from modelgate.protocols.ir import ChatRequest, ImagePart, TextPart, ThinkingPart, ToolCall, ToolResult

PER_MESSAGE = 3  # role and separators of one message (OpenAI cookbook, chat prompts)
REPLY_PRIMING = 3  # the assistant turn every prompt ends with
IMAGE_TOKENS = 85  # OpenAI's base cost of one image at low detail


def encoding_name(upstream_model: str) -> str:
    """o200k_base for current OpenAI models (gpt-4o, o-series, gpt-5...) and as the default;
    cl100k_base for the gpt-4 and gpt-3.5 families it was made for."""
    name = upstream_model.lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt-4", "gpt-3.5")) and not name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5")):
        return "cl100k_base"
    return "o200k_base"


_LOAD = threading.Lock()


def _data_file(name: str) -> Path:
    spec = importlib.util.find_spec("bpe_openai")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the bpe-openai package (tokenizer data) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"


def _local_ranks(name: str, expected_hash: str | None) -> dict[bytes, int]:
    data = gzip.decompress(_data_file(name).read_bytes())
    if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
        raise RuntimeError(f"tokenizer data {name} does not match the hash tiktoken expects")
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}


@functools.cache
def _encoding(name: str) -> Any:
    from unittest import mock  # here, not at the top: a worker that never counts tokens never loads it

    import tiktoken
    from tiktoken_ext import openai_public

    # tiktoken's own definition of the encoding (pattern, special tokens, expected hash), with
    # its download replaced by the local copy.
    with _LOAD, mock.patch.object(openai_public, "load_tiktoken_bpe",
                                  lambda _url, expected_hash=None: _local_ranks(name, expected_hash)):
        return tiktoken.Encoding(**getattr(openai_public, name)())


def _texts(req: ChatRequest) -> tuple[list[str], int]:
    """Every text of the prompt, and the framing and image tokens around them."""
    texts: list[str] = []
    extra = REPLY_PRIMING
    for text in req.system:
        texts.append(text)
        extra += PER_MESSAGE
    for message in req.messages:
        extra += PER_MESSAGE
        for part in message.parts:
            if isinstance(part, (TextPart, ThinkingPart)):
                texts.append(part.text)
            elif isinstance(part, ImagePart):
                extra += IMAGE_TOKENS
            elif isinstance(part, ToolCall):
                texts += [part.name, part.arguments]
            elif isinstance(part, ToolResult):
                extra += PER_MESSAGE
                for inner in part.content:
                    if isinstance(inner, TextPart):
                        texts.append(inner.text)
                    else:
                        extra += IMAGE_TOKENS
    for tool in req.tools:
        texts.append(orjson.dumps({"name": tool.name, "description": tool.description or "",
                                   "parameters": tool.parameters}).decode())
    return texts, extra


def _count(req: ChatRequest, name: str) -> int:
    encoding = _encoding(name)
    texts, extra = _texts(req)
    return extra + sum(len(encoding.encode_ordinary(text)) for text in texts if text)


async def estimate(req: ChatRequest, upstream_model: str) -> int:
    return await asyncio.to_thread(_count, req, encoding_name(upstream_model))
