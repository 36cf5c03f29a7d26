"""The built-in provider kinds and the wire adapter each one speaks.

Many providers speak the chat-completions wire format at their own base URL;
they share the `openai_chat` adapter (or a `CompatChatAdapter` with a few
provider-specific knobs) and differ only in defaults here. The full table,
with what each kind maps and drops, is docs/providers.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from modelgate.errors import ErrorType
from modelgate.protocols.responses import COMPACT_WIRE
from modelgate.providers.anthropic_messages import AnthropicMessagesAdapter
from modelgate.providers.azure_openai import AzureOpenAIAdapter
from modelgate.providers.base import PassThroughAdapter, WireAdapter
from modelgate.providers.bedrock import BedrockAdapter
from modelgate.providers.cohere import CohereAdapter
from modelgate.providers.gemini import GeminiAdapter
from modelgate.providers.mock import DISPLAY_BASE_URL as MOCK_BASE_URL
from modelgate.providers.mock import OPTION_NAMES as MOCK_OPTIONS
from modelgate.providers.mock import MockAdapter
from modelgate.providers.ollama import MODEL_OPTIONS as OLLAMA_MODEL_OPTIONS
from modelgate.providers.ollama import TOP_LEVEL_OPTIONS as OLLAMA_TOP_LEVEL_OPTIONS
from modelgate.providers.ollama import OllamaAdapter
from modelgate.providers.openai_chat import OpenAIChatAdapter, OpenAIPlatformAdapter
from modelgate.providers.openai_compat import (
    CompatChatAdapter,
    alternating_turns,
    dashscope_streaming_thinking,
    dashscope_thinking,
    fireworks_unstreamed_tokens,
    minimax_sampling,
    mistral_tool_id,
    one_system_message,
    thinking_type,
    user_text_into_tool_results,
    zhipu_sampling,
)
from modelgate.providers.openai_responses import ResponsesPassThrough, azure_url, openai_url
from modelgate.providers.vertex import VertexAdapter


@dataclass(frozen=True, slots=True)
class ProviderKind:
    name: str  # the `kind` stored on a provider record
    label: str  # human name for the console
    adapter: WireAdapter
    default_base_url: str | None  # None: the admin must give one
    docs_url: str
    key_required: bool = True
    base_url_note: str = ""  # what to enter as base URL (why there is no default, or regional variants)
    keyless_auth: tuple[str, ...] = ()  # `options.auth` values that need no stored key (cloud identity)
    options: tuple[str, ...] = ()  # provider-record options the kind reads (besides its adapter's body options)
    # Further client wires the provider speaks natively (the Responses API of openai and azure-openai):
    # clients of those protocols are passed through instead of converted.
    pass_through: tuple[PassThroughAdapter, ...] = ()

    def adapter_for(self, wire: str) -> WireAdapter | PassThroughAdapter:
        """The adapter for a client of `wire`: one that forwards it as is where the kind speaks it."""
        for adapter in self.pass_through:
            if adapter.wire == wire:
                return adapter
        return self.adapter

    def needs_key(self, options: Mapping[str, Any]) -> bool:
        return self.key_required and options.get("auth") not in self.keyless_auth

    @property
    def option_names(self) -> tuple[str, ...]:
        """Every provider-record option this kind acts on (the console lists them; docs/providers.md
        "Provider options" documents each)."""
        return self.options + tuple(getattr(self.adapter, "body_options", ()))


_openai_chat = OpenAIChatAdapter()
_azure = AzureOpenAIAdapter()
_openai_platform = OpenAIPlatformAdapter()
_NOT_FOUND = ErrorType.MODEL_NOT_FOUND
_QUOTA = ErrorType.QUOTA_EXCEEDED
_RATE = ErrorType.RATE_LIMIT_ERROR
_INVALID = ErrorType.INVALID_REQUEST
_AUTH = ErrorType.AUTHENTICATION_ERROR
_UPSTREAM = ErrorType.UPSTREAM_ERROR
_GEMINI_THINKING = ("thinking_budget", "thinking_level", "include_thoughts")

KINDS: dict[str, ProviderKind] = {
    kind.name: kind
    for kind in (
        ProviderKind("openai", "OpenAI", _openai_platform, "https://api.openai.com/v1",
                     "https://platform.openai.com/docs/api-reference/chat",
                     pass_through=(ResponsesPassThrough(_openai_platform, openai_url),
                                   ResponsesPassThrough(_openai_platform, openai_url, COMPACT_WIRE, "/compact"))),
        ProviderKind("openai-compatible", "OpenAI-compatible (any base URL)", _openai_chat, None,
                     "https://platform.openai.com/docs/api-reference/chat", key_required=False,
                     base_url_note="the server's chat-completions base, e.g. http://host:8000/v1"),
        ProviderKind("azure-openai", "Azure OpenAI", _azure, None,
                     "https://learn.microsoft.com/azure/ai-services/openai/reference",
                     base_url_note="the resource endpoint, https://{resource}.openai.azure.com; "
                                   "model names are deployment names; options.api_version (\"v1\": the v1 API); "
                                   "options.auth \"entra\": Microsoft Entra ID instead of the resource key",
                     keyless_auth=("entra",), pass_through=(ResponsesPassThrough(_azure, azure_url),
                                                            ResponsesPassThrough(_azure, azure_url, COMPACT_WIRE,
                                                                                 "/compact")),
                     options=("api_version", "auth", "tenant_id", "client_id", "scope", "authority_host",
                              "disable_instance_discovery")),
        ProviderKind("anthropic", "Anthropic", AnthropicMessagesAdapter(), "https://api.anthropic.com",
                     "https://docs.anthropic.com/en/api/messages", options=("message_threads",)),
        ProviderKind("gemini", "Google Gemini", GeminiAdapter(), "https://generativelanguage.googleapis.com/v1beta",
                     "https://ai.google.dev/api/generate-content", options=_GEMINI_THINKING),
        ProviderKind("vertex-ai", "Google Cloud Vertex AI", VertexAdapter(), "https://aiplatform.googleapis.com",
                     "https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference",
                     key_required=False,
                     base_url_note="key: a service-account key file's JSON, or none for application-default "
                                   "credentials; options.project, options.location (default global); "
                                   "claude-* models go to the anthropic publisher",
                     options=("project", "location", "claude_structured_outputs", *_GEMINI_THINKING)),
        ProviderKind("aws-bedrock", "AWS Bedrock", BedrockAdapter(), "https://bedrock-runtime.us-east-1.amazonaws.com",
                     "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html",
                     base_url_note="https://bedrock-runtime.{region}.amazonaws.com (the signing region is taken "
                                   "from it, or options.region); key ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN] "
                                   "or a Bedrock API key, or options.auth \"aws\" for the AWS credential chain",
                     keyless_auth=("aws",), options=("region", "auth", "profile", "additional_model_request_fields")),
        ProviderKind("cohere", "Cohere", CohereAdapter(), "https://api.cohere.com",
                     "https://docs.cohere.com/reference/chat"),
        ProviderKind("mistral", "Mistral AI",
                     # Mistral names the seed `random_seed`, has no `user`, reports stream usage unasked,
                     # takes only 9-character tool-call ids and no user turn right after tool results.
                     CompatChatAdapter(renames={"seed": "random_seed"}, drop=("user",), stream_usage_option=False,
                                       error_codes={"invalid_model": _NOT_FOUND}, tool_id=mistral_tool_id,
                                       messages=user_text_into_tool_results,
                                       finish_reasons={"model_length": "length", "error": _UPSTREAM}),
                     "https://api.mistral.ai/v1", "https://docs.mistral.ai/api/"),
        ProviderKind("deepseek", "DeepSeek",
                     # Thinking mode with tools needs the reasoning of tool-call turns sent back; it is on by
                     # default on V4 and refuses a forced tool choice ("Thinking mode does not support this
                     # tool_choice", deepseek-ai/DeepSeek-V3#1376).
                     CompatChatAdapter(replay_reasoning=True, forced_tools=False,
                                       finish_reasons={"insufficient_system_resource": ErrorType.SERVICE_UNAVAILABLE}),
                     "https://api.deepseek.com",
                     "https://api-docs.deepseek.com/api/create-chat-completion"),
        ProviderKind("groq", "Groq", _openai_chat, "https://api.groq.com/openai/v1",
                     "https://console.groq.com/docs/api-reference"),
        ProviderKind("together", "Together AI",
                     CompatChatAdapter(error_codes={"model_not_available": _NOT_FOUND}),
                     # the official SDK's host (together 3.x); api.together.xyz still answers too
                     "https://api.together.ai/v1", "https://docs.together.ai/reference/chat-completions-1"),
        ProviderKind("fireworks", "Fireworks AI", CompatChatAdapter(clamp=fireworks_unstreamed_tokens),
                     "https://api.fireworks.ai/inference/v1",
                     "https://docs.fireworks.ai/api-reference/post-chatcompletions"),
        ProviderKind("openrouter", "OpenRouter",
                     CompatChatAdapter(not_found_hints=("is not a valid model id",),
                                       # 404 "No endpoints found that support tool use": this model
                                       # cannot serve what the request asks for.
                                       invalid_hints=("no endpoints found that support",),
                                       finish_reasons={"error": _UPSTREAM}, body_options=("provider",)),
                     "https://openrouter.ai/api/v1", "https://openrouter.ai/docs/api-reference/chat-completion"),
        ProviderKind("xai", "xAI",
                     # xAI answers a bad or revoked key with HTTP 400 "Incorrect API key provided". Its reasoning
                     # models (grok-4 on) refuse `stop` and penalties ("Model grok-4.5 does not support parameter
                     # stop.") and most of them `reasoning_effort` (docs.x.ai, reasoning).
                     CompatChatAdapter(auth_hints=("incorrect api key", "incorrect%20api%20key"),
                                       drop=("stop", "presence_penalty", "frequency_penalty", "reasoning_effort")),
                     "https://api.x.ai/v1", "https://docs.x.ai/docs/api-reference"),
        ProviderKind("perplexity", "Perplexity",
                     # Usage comes on the stream's chunks without asking; search results become text; turns
                     # must alternate.
                     CompatChatAdapter(stream_usage_option=False, error_codes={"invalid_model": _NOT_FOUND},
                                       sources=True, messages=alternating_turns),
                     "https://api.perplexity.ai", "https://docs.perplexity.ai/api-reference/chat-completions-post"),
        ProviderKind("moonshot", "Moonshot AI (Kimi)",
                     # Kimi K2.6 and K3 fix their sampling ("invalid temperature: only 1 is allowed for this
                     # model") and refuse a forced tool choice while thinking (platform.kimi.ai, Tool Choice).
                     CompatChatAdapter(error_codes={"exceeded_current_quota_error": _QUOTA,
                                                    "content_filter": _INVALID},
                                       replay_reasoning=True, body_options=("thinking",), thinking=thinking_type,
                                       drop=("temperature", "top_p", "presence_penalty", "frequency_penalty"),
                                       forced_tools=False),
                     "https://api.moonshot.cn/v1", "https://platform.moonshot.cn/docs/api/chat",
                     base_url_note="international platform: https://api.moonshot.ai/v1"),
        ProviderKind("zhipu", "Zhipu AI (GLM)",
                     # Zhipu reports failures by numeric business code in error.code.
                     CompatChatAdapter(stream_usage_option=False, error_codes={
                         "1000": _AUTH, "1001": _AUTH, "1002": _AUTH, "1003": _AUTH, "1004": _AUTH,
                         "1113": _QUOTA, "1211": _NOT_FOUND, "1301": _INVALID,
                         "1302": _RATE, "1303": _RATE, "1305": _RATE},
                         finish_reasons={"sensitive": "content_filter", "network_error": _UPSTREAM},
                         clamp=zhipu_sampling, body_options=("thinking",), thinking=thinking_type,
                         forced_tools=False),  # "Tool choice must be auto" (vectorize-io/hindsight#4246)
                     "https://open.bigmodel.cn/api/paas/v4", "https://docs.bigmodel.cn/api-reference",
                     base_url_note="international platform: https://api.z.ai/api/paas/v4"),
        ProviderKind("dashscope", "Alibaba Cloud Model Studio (DashScope)",
                     CompatChatAdapter(error_codes={"Arrearage": _QUOTA, "data_inspection_failed": _INVALID,
                                                    "DataInspectionFailed": _INVALID},
                                       body_options=("enable_thinking", "thinking_budget"),
                                       thinking=dashscope_thinking, clamp=dashscope_streaming_thinking,
                                       # "The tool_choice parameter does not support being set to required or
                                       # object in thinking mode" (cloudwego/eino#994)
                                       forced_tools=False),
                     "https://dashscope.aliyuncs.com/compatible-mode/v1",
                     "https://help.aliyun.com/zh/model-studio/compatibility-of-openai-with-dashscope",
                     base_url_note="international: https://dashscope-intl.aliyuncs.com/compatible-mode/v1"),
        ProviderKind("siliconflow", "SiliconFlow",
                     CompatChatAdapter(quota_hints=("balance is insufficient", "insufficient balance")),
                     "https://api.siliconflow.cn/v1", "https://docs.siliconflow.cn/cn/api-reference/chat-completions/chat-completions",
                     base_url_note="international: https://api.siliconflow.com/v1"),
        ProviderKind("minimax", "MiniMax",
                     # MiniMax error codes (platform.minimax.io "Error Codes"), also sent with HTTP 200.
                     CompatChatAdapter(clamp=minimax_sampling, body_options=("reasoning_split",),
                                       messages=one_system_message, error_codes={
                         "1002": _RATE, "1004": _AUTH, "2049": _AUTH, "1008": _QUOTA,
                         "1026": _INVALID, "1027": _INVALID, "1039": _INVALID, "2013": _INVALID}),
                     "https://api.minimax.io/v1", "https://platform.minimax.io/docs/api-reference/text-openai-api",
                     base_url_note="mainland China: https://api.minimaxi.com/v1"),
        ProviderKind("ollama", "Ollama", OllamaAdapter(), "http://localhost:11434",
                     "https://github.com/ollama/ollama/blob/main/docs/api.md", key_required=False,
                     options=OLLAMA_MODEL_OPTIONS + OLLAMA_TOP_LEVEL_OPTIONS),
        ProviderKind("vllm", "vLLM", _openai_chat, None,
                     "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html", key_required=False,
                     base_url_note="self-hosted: the server's base, e.g. http://host:8000/v1"),
        ProviderKind("mock", "Mock (built in, no key)", MockAdapter(), MOCK_BASE_URL,
                     "https://github.com/modelgate/modelgate/blob/main/docs/providers.md#mock", key_required=False,
                     base_url_note="answered inside the gateway; the base URL is not contacted. Options: "
                                   "latency_ms, chunk_delay_ms, error_status, error_every, error_message",
                     options=tuple(sorted(MOCK_OPTIONS))),
    )
}


def get_kind(name: str) -> ProviderKind:
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"unknown provider kind {name!r}; known: {', '.join(sorted(KINDS))}") from None
