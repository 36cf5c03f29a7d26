// The Vercel AI SDK's default OpenAI provider (`openai(model)`, the Responses API) against the
// gateway: generateText and streamText, each with a tool the SDK runs between two model steps.
// Prints one JSON line with what the SDK saw; tests/test_responses_clients.py asserts on it.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';

const openai = createOpenAI({ baseURL: `${process.env.GATEWAY_URL}/v1`, apiKey: process.env.GATEWAY_KEY });
const model = openai(process.env.GATEWAY_MODEL);
const weather = tool({
  description: 'The weather in a city',
  inputSchema: jsonSchema({
    type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false,
  }),
  execute: async ({ city }) => `sunny in ${city}`,
});
const request = { model, tools: { weather }, stopWhen: stepCountIs(3), prompt: 'What is the weather in Paris?' };

const generated = await generateText(request);
const streamed = streamText(request);
const parts = [];
for await (const part of streamed.fullStream) parts.push(part.type);
const calls = (steps) => steps.flatMap((s) => s.toolCalls.map((c) => ({ name: c.toolName, input: c.input })));

console.log(JSON.stringify({
  generate: { text: generated.text, steps: generated.steps.length, calls: calls(generated.steps),
              finish: generated.finishReason, usage: generated.totalUsage },
  stream: { text: await streamed.text, steps: (await streamed.steps).length, calls: calls(await streamed.steps),
            finish: await streamed.finishReason, parts: [...new Set(parts)] },
}));
