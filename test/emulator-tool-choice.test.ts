import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import type { TestDeveloper, TestPlatform } from './support/test-platform.js';

/**
 * Tool choice (issue 57): the emulator calls a tool when the request's tool choice says so, in each
 * wire style's own fields, not only when the prompt carries EMULATOR_CALL_TOOL. Chats go through
 * the gateway to every wire style it translates to (OpenAI, Anthropic, Gemini, Cohere, Bedrock
 * Converse, Vertex rawPredict and Gemini, Azure, watsonx); parallel-call switches, which the gateway
 * does not carry, are sent to the emulator directly.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let client: OpenAI;
let workers: { stop(): Promise<void> };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 100_000_000));
  workers = await startInProcessWorkers(gateway.platform);
  client = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
});
afterAll(async () => {
  await workers?.stop();
  await emulated?.close();
});

const TIME_TOOL = { type: 'function' as const, function: { name: 'get_time', description: 'The time in a zone', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } };
const WEATHER_TOOL = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        forecast: { type: 'object', properties: { days: { type: 'integer', minimum: 1, maximum: 7 }, hourly: { type: 'boolean' } }, required: ['days'] },
      },
      required: ['city', 'unit', 'forecast'],
    },
  },
};
const TOOLS = [TIME_TOOL, WEATHER_TOOL];
const FORCE_WEATHER = { type: 'function' as const, function: { name: 'get_weather' } };

/** The arguments the emulator fills for get_weather: valid against its schema, the enum's first value. */
function expectWeatherArguments(text: string): void {
  const args = JSON.parse(text);
  expect(args).toMatchObject({ city: expect.any(String), unit: 'celsius', forecast: { days: expect.any(Number) } });
  expect(Number.isInteger(args.forecast.days) && args.forecast.days >= 1 && args.forecast.days <= 7).toBe(true);
}

const STYLES = [
  ['openai', 'svc:openai/gpt-4o-mini'],
  ['anthropic', 'svc:anthropic/claude-haiku-4-5-20251001'],
  ['gemini', 'svc:gemini/gemini-2.0-flash'],
  ['cohere', 'svc:cohere/command-r-plus'],
  ['bedrock converse (claude @us-cloud1)', 'svc:anthropic/claude-sonnet-4-20250514@us-cloud1'],
  ['bedrock converse (nova)', 'svc:bedrock/amazon.nova-pro-v1:0'],
  ['vertex rawPredict (claude @us-cloud2)', 'svc:anthropic/claude-sonnet-4-20250514@us-cloud2'],
  ['vertex gemini', 'svc:vertex/gemini-2.0-flash'],
  ['azure', 'svc:azure/gpt-4o'],
  ['watsonx', 'svc:watsonx/ibm/granite-3-8b-instruct'],
] as const;

describe.each(STYLES)('%s through the gateway', (_style, model) => {
  it('calls the function tool_choice names, without the marker, with arguments valid against its schema', async () => {
    const completion = await client.chat.completions.create({ model, tools: TOOLS, tool_choice: FORCE_WEATHER, messages: [{ role: 'user', content: 'What is it like in Oslo?' }] });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.tool_calls?.map((call) => call.type === 'function' && call.function.name)).toEqual(['get_weather']);
    const call = choice.message.tool_calls![0]!;
    expectWeatherArguments(call.type === 'function' ? call.function.arguments : '');
  });

  it('answers in text with tool_choice none, even when the prompt carries the marker', async () => {
    const completion = await client.chat.completions.create({ model, tools: TOOLS, tool_choice: 'none', messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL What time is it?' }] });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(completion.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(completion.choices[0]!.message.content).toMatch(/\w+/);
  });

  it('calls a tool with tool_choice required and no marker', async () => {
    const completion = await client.chat.completions.create({ model, tools: TOOLS, tool_choice: 'required', messages: [{ role: 'user', content: 'Anything new?' }] });
    expect(completion.choices[0]!.finish_reason).toBe('tool_calls');
    expect(completion.choices[0]!.message.tool_calls).toHaveLength(1);
  });

  it('keeps the marker rule with auto: text without it, several calls when it names several tools', async () => {
    const plain = await client.chat.completions.create({ model, tools: TOOLS, tool_choice: 'auto', messages: [{ role: 'user', content: 'Good morning' }] });
    expect(plain.choices[0]!.finish_reason).toBe('stop');
    const both = await client.chat.completions.create({
      model,
      tools: TOOLS,
      messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL:get_weather EMULATOR_CALL_TOOL:get_time Oslo, please' }],
    });
    expect(both.choices[0]!.finish_reason).toBe('tool_calls');
    expect(both.choices[0]!.message.tool_calls?.map((call) => call.type === 'function' && call.function.name)).toEqual(['get_weather', 'get_time']);
  });

  it('streams a forced call as tool-call deltas', async () => {
    const stream = await client.chat.completions.create({ model, tools: TOOLS, tool_choice: FORCE_WEATHER, stream: true, messages: [{ role: 'user', content: 'Weather in Bergen' }] });
    const calls: { name: string; arguments: string }[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      for (const delta of choice?.delta.tool_calls ?? []) {
        const entry = (calls[delta.index] ??= { name: '', arguments: '' });
        entry.name += delta.function?.name ?? '';
        entry.arguments += delta.function?.arguments ?? '';
      }
      finish = choice?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(calls.map((call) => call.name)).toEqual(['get_weather']);
    expectWeatherArguments(calls[0]!.arguments);
  });
});

describe('parallel tool calls, sent to the emulator directly', () => {
  const ASK_BOTH = 'EMULATOR_CALL_TOOL:get_weather EMULATOR_CALL_TOOL:get_time Oslo, please';
  const openai = () => new OpenAI({ baseURL: `${emulated.emulatorUrl}/openai/v1`, apiKey: 'emu-openai-key', maxRetries: 0 });
  const anthropic = () => new Anthropic({ baseURL: `${emulated.emulatorUrl}/anthropic`, apiKey: 'emu-anthropic-key', maxRetries: 0 });
  const ANTHROPIC_TOOLS = TOOLS.map((tool) => ({ name: tool.function.name, input_schema: tool.function.parameters as Anthropic.Tool.InputSchema }));

  it('openai: several calls when allowed, at most one with parallel_tool_calls false, even when required', async () => {
    const several = await openai().chat.completions.create({ model: 'gpt-4o', tools: TOOLS, messages: [{ role: 'user', content: ASK_BOTH }] });
    expect(several.choices[0]!.message.tool_calls).toHaveLength(2);
    const one = await openai().chat.completions.create({ model: 'gpt-4o', tools: TOOLS, parallel_tool_calls: false, tool_choice: 'required', messages: [{ role: 'user', content: ASK_BOTH }] });
    expect(one.choices[0]!.message.tool_calls?.map((call) => call.type === 'function' && call.function.name)).toEqual(['get_weather']);
  });

  it('anthropic: disable_parallel_tool_use keeps one tool_use block, in a message and in a stream', async () => {
    const request = { model: 'claude-haiku-4-5-20251001', max_tokens: 256, tools: ANTHROPIC_TOOLS, messages: [{ role: 'user' as const, content: ASK_BOTH }] };
    const several = await anthropic().messages.create(request);
    expect(several.content.map((block) => block.type === 'tool_use' && block.name)).toEqual(['get_weather', 'get_time']);
    const one = await anthropic().messages.create({ ...request, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
    expect(one.content.map((block) => block.type === 'tool_use' && block.name)).toEqual(['get_weather']);
    const streamed = await anthropic().messages.stream({ ...request, tool_choice: { type: 'auto', disable_parallel_tool_use: true } }).finalMessage();
    expect(streamed.stop_reason).toBe('tool_use');
    expect(streamed.content.map((block) => block.type === 'tool_use' && block.name)).toEqual(['get_weather']);
  });

  it('gemini: ANY with allowedFunctionNames calls the allowed function, NONE suppresses the marker', async () => {
    const gemini = (toolConfig: unknown, text: string) =>
      fetch(`${emulated.emulatorUrl}/gemini/v1beta/models/gemini-2.0-flash:generateContent`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': 'emu-gemini-key' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text }] }], tools: [{ functionDeclarations: TOOLS.map((tool) => tool.function) }], toolConfig }),
      }).then((response) => response.json() as Promise<{ candidates: { content: { parts: { text?: string; functionCall?: { name: string } }[] } }[] }>);
    const forced = await gemini({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } }, 'Oslo');
    expect(forced.candidates[0]!.content.parts.map((part) => part.functionCall?.name)).toEqual(['get_weather']);
    const none = await gemini({ functionCallingConfig: { mode: 'NONE' } }, 'EMULATOR_CALL_TOOL Oslo');
    expect(none.candidates[0]!.content.parts[0]!.text).toMatch(/\w+/);
  });
});

describe('assistant runs', () => {
  it('reaches requires_action when the run forces the assistant’s function tool, without the marker', async () => {
    const assistant = await client.beta.assistants.create({ model: 'svc:openai/gpt-4o-mini', tools: [WEATHER_TOOL] });
    const thread = await client.beta.threads.create({ messages: [{ role: 'user', content: 'What is the weather in Oslo?' }] });
    const run = await client.beta.threads.runs.createAndPoll(thread.id, { assistant_id: assistant.id, tool_choice: FORCE_WEATHER }, { pollIntervalMs: 50 });
    expect(run.status).toBe('requires_action');
    const call = run.required_action!.submit_tool_outputs.tool_calls[0]!;
    expect(call.function.name).toBe('get_weather');
    expectWeatherArguments(call.function.arguments);
  });
});
