import { request } from 'node:http';
import { connect } from 'node:net';
import pg from 'pg';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toServiceError } from '../api/middleware/errors.js';
import { hiveRouteTable } from '../api/hive/app.js';
import { guardLedger } from '../shared/billing/ledger-guard.js';
import { classifyDatabaseError } from '../shared/db/errors.js';
import { INT32_MAX, MAX_INPUT_DEPTH } from '../shared/validation.js';
import { brainApi } from './support/brain-api.js';
import { signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';
import { bearer, call, createDeveloper, type ApiResponse, type TestPlatform } from './support/test-platform.js';

/**
 * Issue 55's instances, each once: input PostgreSQL would refuse is the caller's 400 in each
 * server's envelope (the fuzz suite, test/fuzz.test.ts, tries every route with every class of it),
 * and a database error that gets past the input layer is a 400 or 409, or a 503 for an outage.
 */
let gateway: TestPlatform;
let key: string;
let world: HiveWorld;
let owner: HiveOwner;
const brains = brainApi(() => gateway.baseUrl, () => key);

beforeAll(async () => {
  // The hive's world runs on a gateway whose providers are the emulator: recall embeds its query.
  world = await startHiveWorld();
  gateway = world.emulated.gateway;
  key = (await createDeveloper(gateway.platform)).key;
  owner = await signUp(world, 'hostile');
});
afterAll(() => world?.close());

/** The gateway's envelope, its code and the param it names. */
function refused(response: ApiResponse, status = 400): { code: string; param?: string } {
  expect(response.status, response.text).toBe(status);
  expect(response.body.error).toMatchObject({ type: expect.any(String), code: expect.any(String), message: expect.any(String) });
  expect(response.body.error.message).not.toMatch(/SELECT|INSERT|UTF8|0x00|at .*:\d+:\d+/);
  return { code: response.body.error.code, ...(response.body.error.param !== undefined && { param: response.body.error.param }) };
}

/** Sends `body` bytes as they are, with `headers`, and reads the JSON answer. */
function rawPost(baseUrl: string, path: string, body: Buffer | string, headers: Record<string, string>): Promise<ApiResponse> {
  const url = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    const sent = request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: response.statusCode!, headers: new Headers(response.headers as Record<string, string>), body: text ? JSON.parse(text) : undefined, text });
      });
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

/** What the server answers to a request that declares 1 GB and sends 16 bytes, then waits: the answer must come without the rest. */
function answerToLyingLength(baseUrl: string, path: string, headers: Record<string, string>, contentType = 'application/json'): Promise<string> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      const lines = [`POST ${path} HTTP/1.1`, `Host: ${url.host}`, `Content-Type: ${contentType}`, 'Content-Length: 1073741824', ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
      socket.write(`${lines.join('\r\n')}\r\n\r\n{"name":"aaaaaa"`);
    });
    let answer = '';
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('utf8');
      if (answer.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(answer);
      }
    });
    socket.on('error', reject);
  });
}

describe('text PostgreSQL cannot store', () => {
  it('refuses NUL in a JSON string, an object key, a path segment and a query value, naming where', async () => {
    expect(refused(await brains.post('/v1/brains', { name: 'a\u0000b' }))).toEqual({ code: 'invalid_request', param: 'name' });
    const brainId = await brains.newBrain();
    expect(refused(await brains.send('PUT', `/v1/brains/${brainId}/entries`, { body: 'fine', title: 'x\u0000' }))).toEqual({ code: 'invalid_request', param: 'title' });
    expect(refused(await brains.get(`/v1/brains/${brainId}/entries/%00`))).toEqual({ code: 'invalid_request', param: 'entryId' });
    expect(refused(await brains.get(`/v1/brains?offset=0&limit=%00`))).toEqual({ code: 'invalid_request', param: 'limit' });
    const metadataKey = await call(gateway.baseUrl, '/v1/customers', { method: 'POST', json: { external_id: 'nul-key', metadata: { 'a\u0000': 'b' } }, headers: bearer(key) });
    expect(refused(metadataKey)).toEqual({ code: 'invalid_request', param: 'metadata' });
    // Refused before the metered-call pipeline reads the body's `user` to attribute a customer.
    const chat = await call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json: { model: 'svc:openai/gpt-4o-mini', user: 'u\u0000', messages: [{ role: 'user', content: 'hi' }] }, headers: bearer(key) });
    expect(refused(chat)).toEqual({ code: 'invalid_request', param: 'user' });
  });

  it('refuses a lone surrogate, which is not text, and keeps a paired one', async () => {
    const lone = await rawPost(gateway.baseUrl, '/v1/brains', '{"name":"a\\ud800b"}', bearer(key));
    expect(refused(lone)).toEqual({ code: 'invalid_request', param: 'name' });
    expect(lone.body.error.message).toContain('surrogate');
    const paired = await rawPost(gateway.baseUrl, '/v1/brains', '{"name":"a\\ud83d\\ude00b"}', bearer(key));
    expect(paired.status).toBe(200);
    expect(paired.body.name).toBe('a😀b');
  });

  it(`refuses JSON nested deeper than ${MAX_INPUT_DEPTH} levels`, async () => {
    const deep = `{"name":"x","memory_policy":${'['.repeat(10_000)}${']'.repeat(10_000)}}`;
    expect(refused(await rawPost(gateway.baseUrl, '/v1/brains', deep, bearer(key))).code).toBe('invalid_request');
  });

  it('refuses the same on the hive, in its body', async () => {
    for (const [path, body] of [
      ['/v1/remember', { node: owner.rootPath, title: 'ti\u0000tle', body: 'b' }],
      ['/v1/recall', { query: 'q\u0000' }],
      ['/v1/log', { node: owner.rootPath, kind: 'note', text: '\u0000' }],
    ] as const) {
      const response = await world.post(path, owner.token, body);
      expect(response.status, `${path} ${response.text}`).toBe(400);
      expect(response.body).toEqual({ error: expect.stringContaining('NUL') });
    }
  });
});

describe('numbers and instants past their columns', () => {
  it('answers a mount version past PostgreSQL integer with invalid_version, and a year-0 as_of with invalid_request', async () => {
    const brainId = await brains.newBrain();
    for (const version of [2_147_483_648, 2 ** 53, -1]) {
      expect(refused(await brains.post(`/v1/brains/${brainId}/mounts`, { pack_id: 'pack_x', version }))).toEqual({ code: 'invalid_version', param: 'version' });
    }
    const recall = await brains.post(`/v1/brains/${brainId}/recall`, { query: 'q', as_of: '0000-01-01T00:00:00Z' });
    expect(refused(recall)).toEqual({ code: 'invalid_request', param: 'as_of' });
    expect((await brains.post(`/v1/brains/${brainId}/recall`, { query: 'q', as_of: '0001-01-01T00:00:00Z' })).status).toBe(200);
  });

  it('bounds every integer of every route of both servers by PostgreSQL integer', async () => {
    const document = (await call(gateway.baseUrl, '/v1/openapi.json')).body;
    const hiveSchemas = Object.fromEntries(hiveRouteTable(world.hive).flatMap((route) => (route.body ? [[`${route.method} ${route.path}`, z.toJSONSchema(route.body, { io: 'input', unrepresentable: 'any' })]] : [])));
    const unbounded: string[] = [];
    const walk = (node: unknown, at: string): void => {
      if (node === null || typeof node !== 'object') return;
      const schema = node as { type?: unknown; minimum?: number; maximum?: number; exclusiveMinimum?: number; exclusiveMaximum?: number };
      if (schema.type === 'integer' || (Array.isArray(schema.type) && schema.type.includes('integer'))) {
        const low = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : -Infinity);
        const high = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : Infinity);
        if (low < -INT32_MAX - 1 || high > INT32_MAX) unbounded.push(at);
      }
      for (const [name, inner] of Object.entries(node)) walk(inner, `${at}/${name}`);
    };
    walk(document.paths, 'gateway');
    walk(hiveSchemas, 'hive');
    expect(unbounded).toEqual([]);
  });
});

describe('bodies that do not decode', () => {
  it('answers gzip that is not gzip with 400, an unknown encoding or charset with 415, on both servers', async () => {
    const gatewayGzip = await rawPost(gateway.baseUrl, '/v1/brains', 'not gzip at all', { ...bearer(key), 'content-encoding': 'gzip' });
    expect(refused(gatewayGzip)).toEqual({ code: 'invalid_request' });
    expect(gatewayGzip.body.error.message).toBe('The request body does not decode with its Content-Encoding.');
    expect(refused(await rawPost(gateway.baseUrl, '/v1/customers', '{}', { ...bearer(key), 'content-encoding': 'compress' }), 415).code).toBe('unsupported_media_type');
    expect(refused(await rawPost(gateway.baseUrl, '/v1/customers', '{}', { ...bearer(key), 'content-type': 'application/json; charset=latin9' }), 415).code).toBe('unsupported_media_type');

    const hiveGzip = await rawPost(world.baseUrl, '/v1/recall', 'not gzip at all', { ...bearer(owner.token), 'content-encoding': 'gzip' });
    expect(hiveGzip.status).toBe(400);
    expect(hiveGzip.body).toEqual({ error: 'The request body does not decode with its Content-Encoding.' });
  });

  it('answers a declared length past the limit with 413 before reading the body, on both servers', async () => {
    for (const [baseUrl, path, headers, contentType] of [
      [gateway.baseUrl, '/v1/customers', bearer(key), undefined],
      [gateway.baseUrl, '/v1/brains', bearer(key), undefined],
      // An upload streams through busboy, the Stripe webhook is read raw: neither waits for a gigabyte either.
      [gateway.baseUrl, '/v1/files', bearer(key), 'multipart/form-data; boundary=x'],
      [world.baseUrl, '/v1/recall', bearer(owner.token), undefined],
      [world.baseUrl, '/billing/stripe', {}, undefined],
    ] as const) {
      const answer = await answerToLyingLength(baseUrl, path, headers, contentType);
      expect(answer, `${baseUrl}${path}`).toMatch(/^HTTP\/1\.1 413 /);
      expect(answer).toMatch(/connection: close/i);
    }
  });

  it('reads a multipart field named __proto__ as the unknown field it is, which an upload ignores', async () => {
    const form = new FormData();
    form.set('__proto__', '{"polluted":true}');
    form.set('purpose', 'assistants');
    form.set('file', new Blob(['x']), 'x.txt');
    const response = await call(gateway.baseUrl, '/v1/files', { method: 'POST', body: form, headers: bearer(key) });
    expect(response.status, response.text).toBe(200);
    expect(response.body).toMatchObject({ purpose: 'assistants', bytes: 1 });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('answers an upload cut off inside its file part 400, whatever point the store had reached', async () => {
    // The parser fails while the file's bytes stream to the store: that failure must end in the answer, not in an uncaught 'error'.
    for (const cut of ['', 'abc', 'abc\r\n--x', 'abc\r\n--x\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassist']) {
      const body = `--x\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n--x\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n${cut}`;
      const response = await rawPost(gateway.baseUrl, '/v1/files', body, { ...bearer(key), 'content-type': 'multipart/form-data; boundary=x' });
      expect(refused(response).code).toBe('invalid_multipart');
    }
    expect((await call(gateway.baseUrl, '/v1/health/live')).status).toBe(200);
  });

  it('quotes at most the start of a huge value in an error message', async () => {
    const response = await brains.post('/v1/brains', { name: 'x', embedding_model: 'y'.repeat(2_000_000) });
    expect(response.status).toBe(400);
    expect(response.body.error.message.length).toBeLessThanOrEqual(1_000);
  });

  it('answers a path that is not percent-encoded UTF-8 with 400', async () => {
    expect(refused(await brains.get('/v1/brains/%E0%A4%A'))).toEqual({ code: 'invalid_request' });
  });
});

describe('the last line of defence', () => {
  const failureOf = async (sql: string, values: unknown[] = []) => {
    const client = new pg.Client({ connectionString: gateway.config.DATABASE_URL });
    await client.connect();
    try {
      await client.query(sql, values);
      throw new Error('the statement should have failed');
    } catch (error) {
      return error;
    } finally {
      await client.end();
    }
  };

  it("maps PostgreSQL's refusal of a value to 400 naming its column when known, a unique row to 409", async () => {
    expect(toServiceError(await failureOf('SELECT $1::int', ['2147483648']))).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(toServiceError(await failureOf("SELECT $1::text", ['a\u0000b']))).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(toServiceError(await failureOf("SELECT '0000-01-01T00:00:00Z'::timestamptz"))).toMatchObject({ status: 400, code: 'invalid_request' });
    const notNull = await failureOf('CREATE TEMP TABLE t (id int NOT NULL); INSERT INTO t VALUES (NULL)');
    expect(toServiceError(notNull)).toMatchObject({ status: 400, code: 'invalid_request', param: 'id' });
    const unique = await failureOf('CREATE TEMP TABLE u (id int PRIMARY KEY); INSERT INTO u VALUES (1), (1)');
    expect(toServiceError(unique)).toMatchObject({ status: 409, code: 'concurrent_change' });
    expect(toServiceError(await failureOf('SELECT nosuchcolumn'))).toMatchObject({ status: 500, code: 'internal_error' });
  });

  it('maps an unreachable database to 503 with Retry-After', async () => {
    const closed = new pg.Client({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 2_000 });
    const error = await closed.connect().then(() => undefined, (failure: unknown) => failure);
    expect(classifyDatabaseError(error)).toMatchObject({ kind: 'unavailable' });
    expect(toServiceError(error)).toMatchObject({ status: 503, code: 'service_unavailable', retryAfterSeconds: 1 });
    // The wallet's guard keeps its 500 wallet_error for a ledger that would not write, not for PostgreSQL away.
    const guarded = await guardLedger(() => Promise.reject(error)).then(() => undefined, (failure: unknown) => failure);
    expect(toServiceError(guarded)).toMatchObject({ status: 503, code: 'service_unavailable' });
    const refused = await guardLedger(() => Promise.reject(new Error('a trigger refused the row'))).then(() => undefined, (failure: unknown) => failure);
    expect(toServiceError(refused)).toMatchObject({ status: 500, code: 'wallet_error' });
  });
});
