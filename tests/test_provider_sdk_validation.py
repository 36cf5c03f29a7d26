"""The request bodies our adapters build, validated by each provider's official SDK types or
validators, not by our own reading of the API (issue 13, "Independent tests")."""

from __future__ import annotations

import base64

import orjson
import pytest

from modelgate.protocols import messages
from modelgate.protocols.ir import (
    ChatRequest,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from modelgate.providers.base import Endpoint
from modelgate.providers.registry import KINDS
from tests.sdk_check import dropped_fields, typed_dict_problems, unknown_fields

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
WEATHER = Tool("get_weather", "Weather of a city", {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "city name"},
                   "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
})


def conversation(stream: bool = False, choice: ToolChoice | None = None, **extra) -> ChatRequest:
    """A request using most of what the IR can say: system, image, reasoning, tool call and result."""
    return ChatRequest(
        model="alias",
        system=["You are terse."],
        messages=[
            Message("user", [TextPart("What is in this picture, and the weather in Paris?"),
                             ImagePart(data=PNG, media_type="image/png")]),
            Message("assistant", [ThinkingPart("Look, then call the tool.", signature="sig-1"),
                                  TextPart("A square. Checking the weather."),
                                  ToolCall("toolu_01AbC", "get_weather", '{"city": "Paris"}')]),
            Message("tool", [ToolResult("toolu_01AbC", [TextPart("18 C, sunny")])]),
        ],
        max_tokens=256, temperature=0.5, top_p=0.9, stop=["END"], tools=[WEATHER],
        tool_choice=choice or ToolChoice("auto"), stream=stream, **extra,
    )


def body(kind: str, req: ChatRequest, model: str = "model-x", options: dict | None = None,
         key: str = "k") -> dict:
    spec = KINDS[kind]
    ep = Endpoint("p1:k1", 1, 1, kind, spec.default_base_url or "http://h/v1", key, options or {})
    return orjson.loads(spec.adapter.build_request(req, model, ep).body)


CHOICES = [ToolChoice("auto"), ToolChoice("required"), ToolChoice("tool", "get_weather"), ToolChoice("none")]


# --- OpenAI and the chat-completions kinds: openai's CompletionCreateParams -------------------

@pytest.mark.parametrize("kind", ["openai", "groq", "together", "fireworks", "xai", "openrouter", "vllm",
                                  "azure-openai", "perplexity", "siliconflow", "dashscope", "zhipu",
                                  "deepseek", "moonshot", "minimax"])
@pytest.mark.parametrize("stream", [False, True])
def test_chat_kinds_bodies_fit_openai_params(kind, stream):
    from openai.types.chat import completion_create_params as params

    sent = body(kind, conversation(stream, seed=7, frequency_penalty=0.1, presence_penalty=0.2,
                                   response_format={"type": "json_object"}))
    tp = params.CompletionCreateParamsStreaming if stream else params.CompletionCreateParamsNonStreaming
    if kind in ("deepseek", "moonshot"):
        # They require the reasoning of tool-call turns back, in a field of theirs OpenAI's types lack.
        assert sent["messages"][2].pop("reasoning_content") == "Look, then call the tool."
    assert typed_dict_problems(sent, tp) == []


@pytest.mark.parametrize("choice", CHOICES)
def test_openai_tool_choices_fit_openai_params(choice):
    from openai.types.chat import completion_create_params as params

    assert typed_dict_problems(body("openai", conversation(choice=choice)),
                               params.CompletionCreateParamsNonStreaming) == []


# --- Anthropic: the anthropic SDK's MessageCreateParams ------------------------------------

@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_body_fits_anthropic_params(choice, stream):
    from anthropic.types import message_create_params as params

    sent = body("anthropic", conversation(stream, choice=choice, top_k=40))
    tp = params.MessageCreateParamsStreaming if stream else params.MessageCreateParamsNonStreaming
    # The current SDK (2.x) no longer declares the sampling parameters, which the API still takes
    # for the models that support them; everything else must be the SDK's.
    sampling = {f"body.{name}: not a field of {tp.__name__}" for name in ("temperature", "top_p", "top_k")}
    assert [p for p in typed_dict_problems(sent, tp) if p not in sampling] == []


# --- Gemini and Vertex Gemini: google-genai types (unknown fields are refused) ----------------

def _genai_check(sent: dict) -> None:
    from google.genai import types

    for content in sent["contents"]:
        types.Content.model_validate(content)
    if "systemInstruction" in sent:
        types.Content.model_validate(sent["systemInstruction"])
    if "generationConfig" in sent:
        types.GenerationConfig.model_validate(sent["generationConfig"])
    for tool in sent.get("tools", []):
        types.Tool.model_validate(tool)
    if "toolConfig" in sent:
        types.ToolConfig.model_validate(sent["toolConfig"])
    assert set(sent) <= {"contents", "systemInstruction", "generationConfig", "tools", "toolConfig",
                         "safetySettings", "cachedContent", "labels"}


@pytest.mark.parametrize("choice", CHOICES)
def test_gemini_body_fits_google_genai_types(choice):
    _genai_check(body("gemini", conversation(choice=choice, top_k=40, seed=3,
                                             response_format={"type": "json_schema", "json_schema": {
                                                 "name": "answer", "schema": WEATHER.parameters}})))


def test_gemini_schemas_without_types_fit_google_genai_types():
    from google.genai import types

    from tests.test_tool_rules import TYPELESS_TOOL

    schema = TYPELESS_TOOL["input_schema"]
    sent = body("gemini", ChatRequest("alias", [Message("user", [TextPart("hi")])],
                                      tools=[Tool("update_record", None, schema)],
                                      response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}))
    _genai_check(sent)
    declared = types.Tool.model_validate(sent["tools"][0]).function_declarations[0]
    assert declared.parameters is None and declared.parameters_json_schema is not None  # mutually exclusive
    # The structured output's schema is the typed Schema, whose every node needs a type (or a union).
    answer = types.GenerationConfig.model_validate(sent["generationConfig"]).response_schema
    assert answer is not None and answer.properties
    assert all(node.type or node.any_of for node in answer.properties.values())


# --- AWS Bedrock: botocore's ParamValidator on the bedrock-runtime service model -------------

@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("stream", [False, True])
def test_bedrock_body_passes_botocore_param_validation(choice, stream):
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    operation = model.operation_model("ConverseStream" if stream else "Converse")
    sent = body("aws-bedrock", conversation(stream, choice=choice), key="AKIDEXAMPLE:secret")
    report = ParamValidator().validate({"modelId": "anthropic.claude-3-haiku-20240307-v1:0", **sent},
                                       operation.input_shape)
    assert not report.has_errors(), report.generate_report()


# --- Cohere: the cohere SDK's v2 chat types ---------------------------------------------------

@pytest.mark.parametrize("choice", CHOICES)
def test_cohere_body_fits_cohere_v2_types(choice):
    import cohere
    import pydantic

    sent = body("cohere", conversation(choice=choice, top_k=40, seed=3))
    messages = pydantic.TypeAdapter(list[cohere.ChatMessageV2]).validate_python(sent["messages"])
    tools = pydantic.TypeAdapter(list[cohere.ToolV2]).validate_python(sent.get("tools", []))
    problems = [p for m in messages for p in unknown_fields(m, "messages[]")]
    problems += [p for t in tools for p in unknown_fields(t, "tools[]")]
    assert problems == []
    # top-level fields: the parameters of the SDK's own v2 chat call
    import inspect
    accepted = set(inspect.signature(cohere.ClientV2.chat).parameters) - {"self", "request_options"}
    assert set(sent) - {"stream"} <= accepted


# --- Mistral: mistralai's ChatCompletionRequest -----------------------------------------------

@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("stream", [False, True])
def test_mistral_body_fits_mistralai_request(choice, stream):
    from mistralai.client import models

    sent = body("mistral", conversation(stream, choice=choice, seed=3))
    request = (models.ChatCompletionStreamRequest if stream else models.ChatCompletionRequest).model_validate(sent)
    dumped = orjson.loads(request.model_dump_json(by_alias=True, exclude_unset=True))
    assert dropped_fields(sent, dumped) == [] and unknown_fields(request) == []


# --- Ollama: the ollama SDK's ChatRequest -----------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
def test_ollama_body_fits_ollama_chat_request(stream):
    from ollama._types import ChatRequest as OllamaChatRequest

    sent = body("ollama", conversation(stream, top_k=40, seed=3, response_format={"type": "json_object"}))
    request = OllamaChatRequest.model_validate(sent)
    dumped = orjson.loads(request.model_dump_json(by_alias=True, exclude_unset=True))
    assert dropped_fields(sent, dumped) == [] and unknown_fields(request) == []
    # `options` is typed as a plain mapping there: its keys must be fields of the SDK's Options
    from ollama import Options
    assert set(sent.get("options", {})) <= set(Options.model_fields)


# --- a messages client's structured outputs, as the other wires take them -------------------

STRUCTURED = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "weather in Paris?"}],
              "output_config": {"effort": "low", "format": {"type": "json_schema", "schema": WEATHER.parameters}}}


def test_a_messages_structured_output_fits_openai_params():
    from openai.types.chat import completion_create_params as params

    sent = body("openai", messages.to_ir(STRUCTURED))
    assert sent["response_format"]["json_schema"]["schema"] == WEATHER.parameters
    assert typed_dict_problems(sent, params.CompletionCreateParamsNonStreaming) == []


def test_a_messages_structured_output_fits_google_genai_types():
    sent = body("gemini", messages.to_ir(STRUCTURED))
    assert sent["generationConfig"]["responseMimeType"] == "application/json"
    _genai_check(sent)
