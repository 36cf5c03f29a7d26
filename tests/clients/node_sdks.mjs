// The vendors' official Node SDKs and the AI SDK's other providers against the gateway, each running a
// tool loop the way its users write one: the SDK calls the model, runs the tool, sends its result back.
// `node node_sdks.mjs <client>`; prints one JSON line with what the SDK saw, which
// tests/test_node_sdks.py asserts on.
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import Anthropic from '@anthropic-ai/sdk';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import { generateObject, generateText, jsonSchema, stepCountIs, streamObject, streamText, tool } from 'ai';
import OpenAI from 'openai';

const { GATEWAY_URL, GATEWAY_KEY, GATEWAY_MODEL } = process.env;
const PROMPT = 'What is the weather in Paris?';
const CITY_SCHEMA = {
  type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false,
};
const forecast = (city) => `sunny in ${city}`;
const textOf = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

async function anthropicSdk() {
  // The vendor's own client: its tool runner runs over a message thread unless the server refuses one.
  const client = new Anthropic({ baseURL: `${GATEWAY_URL}/alt`, apiKey: GATEWAY_KEY, maxRetries: 0 });
  const weather = betaTool({
    name: 'weather', description: 'The weather in a city', inputSchema: CITY_SCHEMA, run: ({ city }) => forecast(city),
  });
  const params = { model: GATEWAY_MODEL, max_tokens: 200, tools: [weather],
                   messages: [{ role: 'user', content: PROMPT }] };
  const runner = [];
  for await (const message of client.beta.messages.toolRunner(params)) runner.push(message);
  const streamed = [];
  for await (const stream of client.beta.messages.toolRunner({ ...params, stream: true })) {
    streamed.push(await stream.finalMessage());
  }
  const counted = await client.messages.countTokens({ model: GATEWAY_MODEL, messages: params.messages });
  const models = [];
  for await (const model of client.models.list({ limit: 1 })) models.push(model.id);
  return {
    runner: { turns: runner.length, text: textOf(runner.at(-1)), stop: runner.at(-1).stop_reason },
    streamed: { turns: streamed.length, text: textOf(streamed.at(-1)), stop: streamed.at(-1).stop_reason,
                calls: streamed[0].content.filter((b) => b.type === 'tool_use').map((b) => b.input) },
    inputTokens: counted.input_tokens,
    models,
  };
}

async function openaiSdk() {
  const client = new OpenAI({ baseURL: `${GATEWAY_URL}/v1`, apiKey: GATEWAY_KEY, maxRetries: 0 });
  const tools = [{ type: 'function', function: {
    name: 'weather', description: 'The weather in a city', parameters: CITY_SCHEMA,
    function: ({ city }) => forecast(city), parse: JSON.parse,
  } }];
  const messages = [{ role: 'user', content: PROMPT }];
  const runner = client.chat.completions.runTools({ model: GATEWAY_MODEL, messages, tools });
  const text = await runner.finalContent();
  const calls = (await runner.allChatCompletions()).length;
  const streaming = client.chat.completions.runTools({ model: GATEWAY_MODEL, messages, tools, stream: true,
                                                       stream_options: { include_usage: true } });
  const deltas = [];
  streaming.on('content', (delta) => deltas.push(delta));
  const streamedText = await streaming.finalContent();
  const usage = await streaming.totalUsage();
  const models = [];
  for await (const model of client.models.list()) models.push(model.id);
  return { runner: { text, calls }, streamed: { text: streamedText, deltas: deltas.length, usage }, models };
}

async function aiSdk(provider) {
  const weather = tool({
    description: 'The weather in a city', inputSchema: jsonSchema(CITY_SCHEMA), execute: async ({ city }) => forecast(city),
  });
  const model = provider === 'anthropic'
    ? createAnthropic({ baseURL: `${GATEWAY_URL}/alt/v1`, apiKey: GATEWAY_KEY })(GATEWAY_MODEL)
    : createOpenAI({ baseURL: `${GATEWAY_URL}/v1`, apiKey: GATEWAY_KEY }).chat(GATEWAY_MODEL);
  const request = { model, tools: { weather }, stopWhen: stepCountIs(3), prompt: PROMPT, maxRetries: 0 };
  const generated = await generateText(request);
  const streamed = streamText(request);
  const parts = [];
  for await (const part of streamed.fullStream) parts.push(part.type);
  return {
    generate: { text: generated.text, steps: generated.steps.length, finish: generated.finishReason,
                outputTokens: generated.totalUsage.outputTokens },
    stream: { text: await streamed.text, steps: (await streamed.steps).length, finish: await streamed.finishReason,
              parts: [...new Set(parts)] },
  };
}

async function aiSdkObject(provider) {
  // Structured output: the provider asks for the schema its own way (Claude's output_config.format or a forced
  // tool; OpenAI's response_format json_schema), and the SDK validates the answer against it.
  const model = provider === 'anthropic'
    ? createAnthropic({ baseURL: `${GATEWAY_URL}/alt/v1`, apiKey: GATEWAY_KEY })(GATEWAY_MODEL)
    : createOpenAI({ baseURL: `${GATEWAY_URL}/v1`, apiKey: GATEWAY_KEY }).chat(GATEWAY_MODEL);
  const schema = jsonSchema({
    type: 'object', properties: { city: { type: 'string' }, degrees: { type: 'integer' } },
    required: ['city', 'degrees'], additionalProperties: false,
  });
  const request = { model, schema, prompt: 'The weather in Paris, as an object.', maxRetries: 0 };
  const generated = await generateObject(request);
  const streamed = streamObject(request);
  let partials = 0;
  for await (const partial of streamed.partialObjectStream) partials += partial ? 1 : 0;
  return { generated: generated.object, streamed: await streamed.object, partials };
}

const clients = {
  'anthropic-sdk': anthropicSdk,
  'openai-sdk': openaiSdk,
  'ai-sdk-anthropic': () => aiSdk('anthropic'),
  'ai-sdk-openai-chat': () => aiSdk('openai-chat'),
  'ai-sdk-object-anthropic': () => aiSdkObject('anthropic'),
  'ai-sdk-object-openai-chat': () => aiSdkObject('openai-chat'),
};
console.log(JSON.stringify(await clients[process.argv[2]]()));
