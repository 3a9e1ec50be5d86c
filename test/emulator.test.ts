import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { CATALOG } from '../shared/models/catalog.js';
import { createFullEmulator } from '../shared/emulator/emulator.js';

let server: http.Server;
let url: string;
let keys: Record<string, string>;

beforeAll(async () => {
  const emulator = createFullEmulator();
  keys = emulator.credentials.apiKeys;
  server = await listen(emulator.app, 0, '127.0.0.1');
  url = serverUrl(server);
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('the whole emulator', () => {
  it('serves every provider of the catalog, in all three wire styles, on one server', async () => {
    const { providers } = (await (await fetch(`${url}/_emulator/providers`)).json()) as { providers: string[] };
    expect([...providers].sort()).toEqual([...new Set(CATALOG.map((model) => model.provider))].sort());
    expect(providers).toHaveLength(19);
  });

  it('queues faults for the next matching requests and clears them', async () => {
    const chat = () =>
      fetch(`${url}/openai/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${keys.openai}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
      });
    await fetch(`${url}/_emulator/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ provider: 'openai', fault: { kind: 'status', status: 503 }, times: 2 }) });
    expect([(await chat()).status, (await chat()).status, (await chat()).status]).toEqual([503, 503, 200]);
    await fetch(`${url}/_emulator/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ provider: 'anthropic', fault: { kind: 'status', status: 529 }, times: 5 }) });
    await fetch(`${url}/_emulator/faults`, { method: 'DELETE' });
    const anthropic = await fetch(`${url}/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': keys.anthropic!, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-haiku-4-5-20251001', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(anthropic.status).toBe(200);
  });
});
