import { expect } from 'vitest';
import { bearer, call } from './test-platform.js';

/**
 * The brain and pack calls the brains tests make over HTTP, as a developer key (`key()`, read
 * when called: the gateway starts in beforeAll) or another one passed in. newBrain, write and
 * publish expect their 200 and return what the tests use.
 */
export function brainApi(baseUrl: () => string, key: () => string) {
  const send = (method: string, path: string, json?: unknown, as = key()) => call(baseUrl(), path, { method, ...(json !== undefined && { json }), headers: bearer(as) });
  const post = (path: string, json: unknown, as?: string) => send('POST', path, json, as);
  const get = (path: string, as?: string) => send('GET', path, undefined, as);

  async function newBrain(body: Record<string, unknown> = {}, as?: string): Promise<string> {
    const created = await post('/v1/brains', { name: `test brain ${Math.random()}`, ...body }, as);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return created.body.id;
  }

  async function write(brainId: string, entry: Record<string, unknown>, as?: string): Promise<string> {
    const written = await send('PUT', `/v1/brains/${brainId}/entries`, entry, as);
    expect(written.status, JSON.stringify(written.body)).toBe(200);
    return written.body.entry_id;
  }

  async function publish(brainId: string, body: Record<string, unknown> = {}, as?: string) {
    const published = await post(`/v1/brains/${brainId}/publish`, body, as);
    expect(published.status, JSON.stringify(published.body)).toBe(200);
    return published.body;
  }

  return { send, post, get, newBrain, write, publish };
}
