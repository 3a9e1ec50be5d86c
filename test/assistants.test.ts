import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { expectError } from './support/expect-error.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, walletBalanceMicros, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Assistants v2 end to end: the real API, runs as Temporal workflows (a worker in this process),
 * the gateway's own chat path to the emulator (which calls the first tool when the prompt says
 * EMULATOR_CALL_TOOL, and answers in text once a tool's output is back), and vector stores for
 * file_search.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let client: OpenAI;
let workers: { stop(): Promise<void> };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({ ASSISTANT_REQUIRES_ACTION_SECONDS: '4' }, 100_000_000));
  workers = await startInProcessWorkers(gateway.platform);
  client = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
});
afterAll(async () => {
  await workers?.stop();
  await emulated?.close();
});

const MODEL = 'svc:openai/gpt-4o-mini';
const WEATHER_TOOL = { type: 'function' as const, function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };
const post = (path: string, json: unknown, headers: Record<string, string> = bearer(developer.key)) => call(gateway.baseUrl, path, { method: 'POST', json, headers });
const get = (path: string, headers: Record<string, string> = bearer(developer.key)) => call(gateway.baseUrl, path, { headers });

async function events(type: string, runId: string): Promise<number> {
  const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM outbox_events WHERE type = $1 AND data->>'id' = $2`, [type, runId]);
  return rows[0].n;
}

describe('through the official openai SDK', () => {
  it('runs an assistant with a function tool: requires_action, submit, completed, billed as its steps', async () => {
    const assistant = await client.beta.assistants.create({ model: MODEL, name: 'Weather', instructions: 'Answer about the weather.', tools: [WEATHER_TOOL] });
    expect(assistant).toMatchObject({ object: 'assistant', model: MODEL, name: 'Weather', tools: [WEATHER_TOOL] });
    const thread = await client.beta.threads.create({ messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL what is the weather in Oslo?' }] });
    const before = await walletBalanceMicros(gateway.platform, developer.accountId);

    const waiting = await client.beta.threads.runs.createAndPoll(thread.id, { assistant_id: assistant.id });
    expect(waiting.status).toBe('requires_action');
    const toolCall = waiting.required_action!.submit_tool_outputs.tool_calls[0]!;
    expect(toolCall.function.name).toBe('get_weather');
    expect(waiting.expires_at).toBeGreaterThan(Date.now() / 1000);

    const done = await client.beta.threads.runs.submitToolOutputsAndPoll(waiting.id, { thread_id: thread.id, tool_outputs: [{ tool_call_id: toolCall.id, output: '{"celsius": 7}' }] });
    expect(done.status).toBe('completed');

    const messages = await client.beta.threads.messages.list(thread.id, { order: 'asc' });
    expect(messages.data.map((message) => message.role)).toEqual(['user', 'assistant']);
    const reply = messages.data[1]!;
    expect(reply).toMatchObject({ run_id: done.id, assistant_id: assistant.id });
    expect(reply.content[0]!.type === 'text' && reply.content[0]!.text.value.length).toBeGreaterThan(0);

    const steps = await client.beta.threads.runs.steps.list(done.id, { thread_id: thread.id, order: 'asc' });
    expect(steps.data.map((step) => [step.type, step.status])).toEqual([['tool_calls', 'completed'], ['message_creation', 'completed']]);
    const details = steps.data[0]!.step_details;
    expect(details.type === 'tool_calls' && details.tool_calls[0]).toMatchObject({ id: toolCall.id, type: 'function', function: { name: 'get_weather', output: '{"celsius": 7}' } });
    const usage = steps.data.reduce((sum, step) => sum + (step.usage?.total_tokens ?? 0), 0);
    expect(done.usage?.total_tokens).toBe(usage);
    // Billing: the wallet paid exactly what the run's steps record, to the micro-dollar.
    const { rows } = await gateway.platform.db.query(`SELECT sum(cost_micros)::bigint AS cost FROM run_steps WHERE run_id = $1`, [done.id]);
    expect(before - (await walletBalanceMicros(gateway.platform, developer.accountId))).toBe(Number(rows[0].cost));
    expect(Number(rows[0].cost)).toBeGreaterThan(0);
    expect(await events('run.completed', done.id)).toBe(1);
  });

  it('answers with file_search over a vector store and cites the relevant file', async () => {
    const store = await client.vectorStores.create({ name: 'Help', embedding_model: 'text-embedding-3-small' } as OpenAI.VectorStoreCreateParams);
    const docs = {
      'passwords.md': 'To reset a forgotten password, open Settings, choose Security and press Reset password.',
      'shipping.txt': 'Parcels ship from our warehouse in Rotterdam and arrive within two days.',
    };
    const fileIds: Record<string, string> = {};
    for (const [name, text] of Object.entries(docs)) fileIds[name] = (await client.vectorStores.files.uploadAndPoll(store.id, await toFile(Buffer.from(text), name), { pollIntervalMs: 50 })).id;
    const assistant = await client.beta.assistants.create({ model: MODEL, tools: [{ type: 'file_search' }], tool_resources: { file_search: { vector_store_ids: [store.id] } } });
    const run = await client.beta.threads.createAndRunPoll({ assistant_id: assistant.id, thread: { messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL how do I reset my password' }] } }, { pollIntervalMs: 50 });
    expect(run.status).toBe('completed');
    const steps = await client.beta.threads.runs.steps.list(run.id, { thread_id: run.thread_id, order: 'asc' });
    const search = steps.data[0]!.step_details;
    expect(search.type === 'tool_calls' && search.tool_calls[0]!.type).toBe('file_search');
    const results = (search as { tool_calls: { file_search: { results: { file_id: string }[] } }[] }).tool_calls[0]!.file_search.results;
    expect(results[0]!.file_id).toBe(fileIds['passwords.md']);
    const [reply] = (await client.beta.threads.messages.list(run.thread_id, { run_id: run.id })).data;
    const text = reply!.content[0]!.type === 'text' ? reply!.content[0]!.text : undefined;
    expect(text!.annotations[0]).toMatchObject({ type: 'file_citation', file_citation: { file_id: fileIds['passwords.md'] } });
    expect(text!.value).toContain('passwords.md');
  });
});

describe('streaming', () => {
  it("streams a run's events in order, fed from the workflow's progress, through requires_action and the submitted outputs", async () => {
    const assistant = await client.beta.assistants.create({ model: MODEL, tools: [WEATHER_TOOL] });
    const thread = await client.beta.threads.create({ messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL weather in Bergen' }] });
    const first: string[] = [];
    const stream = client.beta.threads.runs.stream(thread.id, { assistant_id: assistant.id });
    for await (const event of stream) first.push(event.event);
    expect(first).toEqual(['thread.run.created', 'thread.run.queued', 'thread.run.in_progress', 'thread.run.step.created', 'thread.run.requires_action']);
    const run = stream.currentRun()!;
    expect(run.status).toBe('requires_action');

    const toolCall = run.required_action!.submit_tool_outputs.tool_calls[0]!;
    const second: string[] = [];
    const resumed = client.beta.threads.runs.submitToolOutputsStream(run.id, { thread_id: thread.id, tool_outputs: [{ tool_call_id: toolCall.id, output: 'rain' }] });
    for await (const event of resumed) second.push(event.event);
    expect(second).toEqual([
      'thread.run.in_progress',
      'thread.run.step.created',
      'thread.message.created',
      'thread.message.delta',
      'thread.message.completed',
      'thread.run.step.completed',
      'thread.run.completed',
    ]);
    const [message] = await resumed.finalMessages();
    const stored = (await client.beta.threads.messages.list(thread.id)).data[0]!;
    expect(message!.id).toBe(stored.id);
    expect(message!.content.map((part) => part.type === 'text' && part.text.value)).toEqual(stored.content.map((part) => part.type === 'text' && part.text.value));
  });
});

describe('validation codes', () => {
  const cases: [string, Record<string, unknown>, string, string][] = [
    ['a bare model name', { model: 'gpt-4o' }, 'invalid_model', 'model'],
    ['an embedding model', { model: 'svc:openai/text-embedding-3-small' }, 'invalid_model', 'model'],
    ['tools that are not an array', { tools: 'all' }, 'invalid_tools', 'tools'],
    ['an unknown tool type', { tools: [{ type: 'code_runner' }] }, 'invalid_tool_shape', 'tools.0.type'],
    ['a function without a usable name', { tools: [{ type: 'function', function: { name: 'get weather' } }] }, 'invalid_tool_shape', 'tools.0.function.name'],
    ['parameters that are not an object schema', { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }] }, 'invalid_tool_schema', 'tools.0.function.parameters'],
    ['a schema that does not compile', { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'nonsense' } } } } }] }, 'invalid_tool_schema', 'tools.0.function.parameters'],
    ['temperature above 2', { temperature: 2.5 }, 'invalid_temperature', 'temperature'],
    ['top_p above 1', { top_p: 1.5 }, 'invalid_top_p', 'top_p'],
    ['an empty name', { name: '' }, 'invalid_name', 'name'],
  ];
  it.each(cases)('refuses %s', async (_label, patch, code, param) => {
    expectError(await post('/v1/assistants', { model: MODEL, ...patch }), 400, code, { param });
  });

  it('keeps names unique among active assistants only', async () => {
    const first = await post('/v1/assistants', { model: MODEL, name: 'Unique' });
    expectError(await post('/v1/assistants', { model: MODEL, name: 'Unique' }), 409, 'assistant_name_in_use', { param: 'name' });
    await call(gateway.baseUrl, `/v1/assistants/${first.body.id}`, { method: 'DELETE', headers: bearer(developer.key) });
    expect((await post('/v1/assistants', { model: MODEL, name: 'Unique' })).status).toBe(200);
  });

  it('refuses bad messages, unknown assistants, bad additional messages and full threads', async () => {
    expectError(await post('/v1/threads', { messages: [{ role: 'system', content: 'hi' }] }), 400, 'invalid_messages', { param: 'messages.0.role' });
    const thread = (await post('/v1/threads', {})).body;
    expectError(await post(`/v1/threads/${thread.id}/messages`, { role: 'user', content: '' }), 400, 'invalid_messages', { param: 'content' });
    expectError(await post(`/v1/threads/${thread.id}/runs`, { assistant_id: 'asst_nope' }), 400, 'invalid_assistant_id', { param: 'assistant_id' });
    const assistant = (await post('/v1/assistants', { model: MODEL })).body;
    expectError(await post(`/v1/threads/${thread.id}/runs`, { assistant_id: assistant.id, additional_messages: [{ role: 'tool', content: 'x' }] }), 400, 'invalid_additional_messages', { param: 'additional_messages' });
    await gateway.platform.db.query(`UPDATE threads SET message_count = 5000 WHERE id = $1`, [thread.id]);
    expectError(await post(`/v1/threads/${thread.id}/messages`, { role: 'user', content: 'one too many' }), 409, 'thread_full');
  });
});

describe('run states', () => {
  async function waitingRun() {
    const assistant = (await post('/v1/assistants', { model: MODEL, tools: [WEATHER_TOOL] })).body;
    const thread = (await post('/v1/threads', { messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL weather please' }] })).body;
    const run = (await post(`/v1/threads/${thread.id}/runs`, { assistant_id: assistant.id })).body;
    const waiting = await pollUntil(() => get(`/v1/threads/${thread.id}/runs/${run.id}`), (res) => res.body.status === 'requires_action', { context: () => 'run' });
    return { assistant, thread, run: waiting.body };
  }

  it('allows one active run per thread, checks tool call ids, and refuses outputs in any other state', async () => {
    const { assistant, thread, run } = await waitingRun();
    expectError(await post(`/v1/threads/${thread.id}/runs`, { assistant_id: assistant.id }), 409, 'thread_locked');
    expectError(await post(`/v1/threads/${thread.id}/messages`, { role: 'user', content: 'meanwhile' }), 409, 'thread_locked');
    const callId = run.required_action.submit_tool_outputs.tool_calls[0].id;
    const path = `/v1/threads/${thread.id}/runs/${run.id}/submit_tool_outputs`;
    expectError(await post(path, { tool_outputs: [{ tool_call_id: 'call_wrong', output: 'x' }] }), 400, 'invalid_tool_call_id');
    expectError(await post(path, { tool_outputs: [{ tool_call_id: callId, output: 'x' }, { tool_call_id: callId, output: 'y' }] }), 400, 'invalid_tool_call_id');
    expect((await post(path, { tool_outputs: [{ tool_call_id: callId, output: 'sunny' }] })).status).toBe(200);
    expectError(await post(path, { tool_outputs: [{ tool_call_id: callId, output: 'again' }] }), 409, 'run_not_in_requires_action');
    const done = await pollUntil(() => get(`/v1/threads/${thread.id}/runs/${run.id}`), (res) => res.body.status === 'completed', { context: () => 'run' });
    expectError(await post(`/v1/threads/${thread.id}/runs/${run.id}/cancel`, {}), 409, 'run_already_completed');
    expect(done.body.usage.total_tokens).toBeGreaterThan(0);
  });

  it('tells pollers when to read a run again while it is under way, and not once it stops', async () => {
    const pace = (response: { headers: Headers }) => response.headers.get('openai-poll-after-ms');
    const assistant = (await post('/v1/assistants', { model: MODEL })).body;
    const thread = (await post('/v1/threads', { messages: [{ role: 'user', content: 'Say hello.' }] })).body;
    // With the worker stopped, the run stays queued while it is read.
    await workers.stop();
    let runId: string;
    try {
      const created = await post(`/v1/threads/${thread.id}/runs`, { assistant_id: assistant.id });
      runId = created.body.id;
      const read = await get(`/v1/threads/${thread.id}/runs/${runId}`);
      expect([created, read].map((response) => [response.body.status, pace(response)])).toEqual([['queued', '200'], ['queued', '200']]);
    } finally {
      workers = await startInProcessWorkers(gateway.platform);
    }
    const done = await pollUntil(() => get(`/v1/threads/${thread.id}/runs/${runId}`), (res) => res.body.status === 'completed', { context: () => 'paced run' });
    expect(pace(done)).toBeNull();

    // requires_action is where the SDK's poll stops too: no header; the submit that resumes the run has it.
    const { thread: waitingThread, run } = await waitingRun();
    const waiting = await get(`/v1/threads/${waitingThread.id}/runs/${run.id}`);
    expect([waiting.body.status, pace(waiting)]).toEqual(['requires_action', null]);
    const callId = run.required_action.submit_tool_outputs.tool_calls[0].id;
    const resumed = await post(`/v1/threads/${waitingThread.id}/runs/${run.id}/submit_tool_outputs`, { tool_outputs: [{ tool_call_id: callId, output: 'sunny' }] });
    expect([resumed.body.status, pace(resumed)]).toEqual(['in_progress', '200']);
    await pollUntil(() => get(`/v1/threads/${waitingThread.id}/runs/${run.id}`), (res) => res.body.status === 'completed', { context: () => 'resumed run' });
  });

  it('cancels a run waiting for outputs, and expires one left waiting', async () => {
    const cancelled = await waitingRun();
    const cancelling = await post(`/v1/threads/${cancelled.thread.id}/runs/${cancelled.run.id}/cancel`, {});
    expect(cancelling.body.status).toBe('cancelling');
    await pollUntil(() => get(`/v1/threads/${cancelled.thread.id}/runs/${cancelled.run.id}`), (res) => res.body.status === 'cancelled', { context: () => 'cancel' });
    expect(await events('run.cancelled', cancelled.run.id)).toBe(1);

    const expiring = await waitingRun();
    const expired = await pollUntil(() => get(`/v1/threads/${expiring.thread.id}/runs/${expiring.run.id}`), (res) => res.body.status === 'expired', { context: () => 'expiry' });
    expect(expired.body.last_error).toMatchObject({ code: 'expired' });
    expect(await events('run.failed', expiring.run.id)).toBe(1);
    // The thread is free again.
    expect((await post(`/v1/threads/${expiring.thread.id}/messages`, { role: 'user', content: 'hello again' })).status).toBe(200);
  }, 60_000);

  it('fits the thread into max_prompt_tokens by leaving out its oldest messages, and ends incomplete when even the latest does not fit', async () => {
    const assistant = await client.beta.assistants.create({ model: MODEL, instructions: 'Answer briefly.' });
    const paragraph = (topic: string) => `${topic}: ${Array.from({ length: 60 }, (_, i) => `${topic.toLowerCase()}${i}`).join(' ')}.`;
    const topics = ['Harbours', 'Glaciers', 'Orchards', 'Railways', 'Lighthouses', 'Vineyards'];
    const thread = await client.beta.threads.create({ messages: topics.map((topic) => ({ role: 'user' as const, content: paragraph(topic) })) });

    const whole = await client.beta.threads.runs.createAndPoll(thread.id, { assistant_id: assistant.id, truncation_strategy: { type: 'last_messages', last_messages: 6 } });
    expect(whole.status).toBe('completed');
    const fitted = await client.beta.threads.runs.createAndPoll(thread.id, { assistant_id: assistant.id, max_prompt_tokens: 300 });
    expect(fitted).toMatchObject({ status: 'completed', incomplete_details: null, max_prompt_tokens: 300 });
    // The upstream was sent a fraction of the thread: its latest messages only.
    expect(fitted.usage!.prompt_tokens).toBeLessThan(whole.usage!.prompt_tokens / 2);
    expect(fitted.usage!.prompt_tokens).toBeGreaterThan(0);

    await client.beta.threads.messages.create(thread.id, { role: 'user', content: Array.from({ length: 8 }, () => paragraph('Volcanoes')).join(' ') });
    const over = await client.beta.threads.runs.createAndPoll(thread.id, { assistant_id: assistant.id, max_prompt_tokens: 256 });
    expect(over).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_prompt_tokens' }, last_error: null });
    expect(over.usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
    const { rows } = await gateway.platform.db.query(`SELECT data FROM outbox_events WHERE type = 'run.failed' AND data->>'id' = $1`, [over.id]);
    expect(rows.map((row) => row.data)).toEqual([expect.objectContaining({ status: 'incomplete', incomplete_details: { reason: 'max_prompt_tokens' } })]);
    expectError(await post(`/v1/threads/${thread.id}/runs/${over.id}/cancel`, {}), 409, 'run_already_completed');
  });

  it('holds max_completion_tokens over the whole run: an answer cut short by it ends the run incomplete', async () => {
    const assistant = await client.beta.assistants.create({ model: MODEL });
    const ends: { status: string; reason: string | null; completion: number }[] = [];
    for (const question of ['Tell me about harbours.', 'Describe a glacier.', 'What grows in an orchard?', 'How do railways work?', 'Why do lighthouses blink?']) {
      const thread = await client.beta.threads.create({ messages: [{ role: 'user', content: question }] });
      const run = await client.beta.threads.runs.createAndPoll(thread.id, { assistant_id: assistant.id, max_completion_tokens: 16 });
      ends.push({ status: run.status, reason: run.incomplete_details?.reason ?? null, completion: run.usage!.completion_tokens });
      const reply = (await client.beta.threads.messages.list(thread.id)).data.find((message) => message.role === 'assistant');
      expect(reply, 'the cut answer is still posted').toBeDefined();
    }
    // The emulator answers 12 to 40 tokens unless told fewer: most of these are cut at 16.
    for (const end of ends) expect(end.completion).toBeLessThanOrEqual(16);
    expect(ends.filter((end) => end.status === 'incomplete').every((end) => end.reason === 'max_completion_tokens')).toBe(true);
    expect(ends.some((end) => end.status === 'incomplete')).toBe(true);
    expect(ends.every((end) => end.status === 'incomplete' || end.status === 'completed')).toBe(true);
  });
});

describe('client tokens', () => {
  it('reach their own customer threads and runs, and nothing else', async () => {
    await post('/v1/customers', { external_id: 'asst-user' });
    await post('/v1/customers', { external_id: 'asst-other' });
    const mint = async (external: string) =>
      (await post(`/v1/customers/ext:${external}/client_tokens`, { scope: ['assistants_threads'] })).body.token as string;
    const token = { Authorization: `Client ${await mint('asst-user')}` };
    const other = { Authorization: `Client ${await mint('asst-other')}` };
    const assistant = (await post('/v1/assistants', { model: MODEL })).body;

    expectError(await post('/v1/assistants', { model: MODEL }, token), 403, 'endpoint_not_allowed_for_client_token');
    const thread = await post('/v1/threads', { messages: [{ role: 'user', content: 'Hello' }] }, token);
    expect(thread.status).toBe(200);
    const run = await post(`/v1/threads/${thread.body.id}/runs`, { assistant_id: assistant.id }, token);
    expect(run.status).toBe(200);
    const done = await pollUntil(() => get(`/v1/threads/${thread.body.id}/runs/${run.body.id}`, token), (res) => res.body.status === 'completed', { context: () => 'token run' });
    expect(done.body.status).toBe('completed');
    expect((await get(`/v1/threads/${thread.body.id}/messages`, token)).body.data).toHaveLength(2);
    expectError(await get(`/v1/threads/${thread.body.id}`, other), 404, 'not_found');
    expectError(await call(gateway.baseUrl, `/v1/threads/${thread.body.id}`, { method: 'DELETE', headers: token }), 403, 'endpoint_not_allowed_for_client_token');
    // The run was billed to the token's customer.
    const { rows } = await gateway.platform.db.query(`SELECT c.external_id FROM runs r JOIN customers c ON c.id = r.customer_id WHERE r.id = $1`, [run.body.id]);
    expect(rows[0].external_id).toBe('asst-user');
  });
});
