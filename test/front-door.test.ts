import net from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { bearer, call, createDeveloper, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/** Request ids, the one error envelope, body limits, metrics and the public compatibility list. */
let gateway: TestPlatform;
let developer: TestDeveloper;

beforeAll(async () => {
  gateway = await startTestPlatform({ JSON_BODY_LIMIT: '2kb' });
  developer = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
});
afterAll(() => gateway?.close());

function expectEnvelope(body: any, type: string, code: string): void {
  expect(body).toEqual({ error: expect.objectContaining({ type, code, message: expect.any(String) }) });
  expect(Object.keys(body.error).sort()).toEqual(expect.arrayContaining(['code', 'message', 'type']));
  expect(JSON.stringify(body)).not.toMatch(/\bat .+\.ts:\d+/);
}

describe('X-Request-Id', () => {
  it('is a fresh req_ id on every response, success or error', async () => {
    const ok = await call(gateway.baseUrl, '/v1/compatibility');
    const missing = await call(gateway.baseUrl, '/v1/nowhere');
    for (const response of [ok, missing]) expect(response.headers.get('x-request-id')).toMatch(/^req_[0-9A-Za-z]{24}$/);
    expect(ok.headers.get('x-request-id')).not.toBe(missing.headers.get('x-request-id'));
  });

  it("echoes the caller's own id", async () => {
    const response = await call(gateway.baseUrl, '/v1/nowhere', { headers: { 'X-Request-Id': 'trace-42/abc' } });
    expect(response.headers.get('x-request-id')).toBe('trace-42/abc');
  });

  it('replaces a caller id that is not a sane token', async () => {
    const response = await call(gateway.baseUrl, '/v1/compatibility', { headers: { 'X-Request-Id': 'x'.repeat(300) } });
    expect(response.headers.get('x-request-id')).toMatch(/^req_/);
  });
});

describe('the error envelope', () => {
  it('answers an unknown route with 404 not_found_error', async () => {
    const response = await call(gateway.baseUrl, '/v1/does-not-exist', { method: 'POST', json: {} });
    expect(response.status).toBe(404);
    expectEnvelope(response.body, 'not_found_error', 'not_found');
    expect(response.body.error.message).toContain('/v1/does-not-exist');
  });

  it('answers a body that is not JSON with 400 invalid_json', async () => {
    const response = await fetch(`${gateway.baseUrl}/v1/balance`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(developer.key) },
      body: '{"model": "svc:x/y",',
    });
    expect(response.status).toBe(400);
    expectEnvelope(await response.json(), 'invalid_request_error', 'invalid_json');
  });

  it('refuses a body over the limit with 413 before any route runs', async () => {
    const response = await fetch(`${gateway.baseUrl}/v1/balance`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ padding: 'x'.repeat(4096) }),
    });
    expect(response.status).toBe(413);
    const body: any = await response.json();
    expectEnvelope(body, 'invalid_request_error', 'request_too_large');
    expect(body.error.message).toContain('2048');
  });

  it('refuses a charset it cannot decode with 415', async () => {
    const response = await fetch(`${gateway.baseUrl}/v1/balance`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=klingon' },
      body: '{}',
    });
    expect(response.status).toBe(415);
    expectEnvelope(await response.json(), 'invalid_request_error', 'unsupported_media_type');
  });

  it('turns an unhandled failure into 500 internal_error of type api_error, with no stack trace', async () => {
    // Break the wallet table under the running app: the balance query then fails unexpectedly.
    await gateway.platform.db.query('ALTER TABLE wallets RENAME TO wallets_moved');
    try {
      const response = await call(gateway.baseUrl, '/v1/balance', { headers: bearer(developer.key) });
      expect(response.status).toBe(500);
      expectEnvelope(response.body, 'api_error', 'internal_error');
      expect(response.text).not.toContain('wallets');
      expect(response.text).not.toContain('stack');
      expect(response.headers.get('x-request-id')).toMatch(/^req_/);
    } finally {
      await gateway.platform.db.query('ALTER TABLE wallets_moved RENAME TO wallets');
    }
  });

  it('answers an HTTP request Node cannot parse with the envelope too', async () => {
    const url = new URL(gateway.baseUrl);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () => socket.write('GET /v1/health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
      let received = '';
      socket.on('data', (chunk) => (received += chunk));
      socket.on('end', () => resolve(received));
      socket.on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    expectEnvelope(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)), 'invalid_request_error', 'invalid_request');
  });
});

describe('the HTTP server', () => {
  it("creates each request and response with the app's own prototypes, so Express need not swap them", async () => {
    const app = express();
    app.get('/probe', (req, res) => void res.json({ path: req.path, ip: req.ip }));
    const server = await listen(app, 0, '127.0.0.1');
    const prototypes: boolean[] = [];
    // Runs before Express's own listener, which would otherwise set the prototypes itself.
    server.prependListener('request', (req, res) => prototypes.push(Object.getPrototypeOf(req) === app.request, Object.getPrototypeOf(res) === app.response));
    try {
      const response = await fetch(`${serverUrl(server)}/probe`);
      expect(await response.json()).toEqual({ path: '/probe', ip: '127.0.0.1' });
      expect(prototypes).toEqual([true, true]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('GET /v1/compatibility', () => {
  it('is public, machine-readable and cacheable for five minutes', async () => {
    const response = await call(gateway.baseUrl, '/v1/compatibility');
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('public, max-age=300');
    expect(response.body.object).toBe('compatibility');
    expect(response.body.api_version).toBe('v1');
    const surfaces = response.body.surfaces.map((surface: { surface: string }) => surface.surface);
    expect(surfaces).toEqual(expect.arrayContaining(['chat.completions', 'embeddings', 'batches', 'files', 'rerank']));
    for (const surface of response.body.surfaces) expect(['available', 'planned']).toContain(surface.status);
  });
});

describe('GET /metrics', () => {
  it('counts requests and observes latency by route pattern and status', async () => {
    await call(gateway.baseUrl, '/v1/compatibility');
    await call(gateway.baseUrl, '/v1/accounts/123e4567-e89b-12d3-a456-426614174000');
    const response = await call(gateway.baseUrl, '/metrics');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    expect(response.text).toMatch(/http_requests_total\{method="GET",route="\/v1\/compatibility",status="200"\} [1-9]/);
    expect(response.text).toMatch(/http_request_duration_seconds_bucket\{le="0\.1",method="GET",route="\/v1\/compatibility",status="200"\}/);
    // Ids never become label values: the route pattern does.
    expect(response.text).toContain('route="/v1/accounts/:id",status="401"');
    expect(response.text).not.toContain('123e4567');
  });
});
