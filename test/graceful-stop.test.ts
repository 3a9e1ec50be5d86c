import http from 'node:http';
import express from 'express';
import { afterAll, describe, expect, it } from 'vitest';
import { answerStopping, listen, serverUrl } from '../shared/platform/http-server.js';
import { toHiveErrorBody } from '../shared/hive/errors.js';

/**
 * A stopping server (issue 56): a request that arrives on a kept-alive connection after the stop
 * began is answered 503 shutting_down in the server's own error body, while the request already in
 * the app finishes.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
afterAll(() => agent.destroy());

function get(base: string, path: string, viaAgent = true): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${base}${path}`, viaAgent ? { agent } : { agent: false }, (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: JSON.parse(text) }));
      })
      .on('error', reject);
  });
}

async function stoppingServer(errorBody?: typeof toHiveErrorBody) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const app = express();
  app.get('/fast', (_req, res) => res.json({ ok: true }));
  app.get('/slow', async (_req, res) => {
    await released;
    res.json({ finished: true });
  });
  const server = await listen(app, 0, '127.0.0.1', errorBody ? { errorBody } : {});
  return { server, base: serverUrl(server), release };
}

describe('a server that is stopping', () => {
  it('answers a request arriving after the stop began 503 shutting_down, and lets the one in flight finish', async () => {
    const { server, base, release } = await stoppingServer();
    expect((await get(base, '/fast')).status).toBe(200); // the agent now keeps this connection
    const inFlight = get(base, '/slow', false);
    await new Promise((resolve) => setTimeout(resolve, 50));
    // As stopOnSignals begins: a request already read, or one a kept-alive connection brings before it closes, meets this.
    answerStopping(server);

    const refused = await get(base, '/fast');
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers.connection).toBe('close');
    expect(refused.body.error).toMatchObject({ type: 'api_error', code: 'shutting_down' });

    release();
    expect(await inFlight).toMatchObject({ status: 200, body: { finished: true } });
    await new Promise((resolve) => server.close(resolve));
  });

  it("answers in the hive's error body on the hive", async () => {
    const { server, base, release } = await stoppingServer(toHiveErrorBody);
    answerStopping(server);
    const refused = await get(base, '/fast', false);
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({ error: expect.stringMatching(/^This server is stopping/) });
    release();
    server.close();
  });
});
