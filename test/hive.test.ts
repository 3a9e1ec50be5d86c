import type http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHiveApp } from '../api/hive/app.js';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { ConfigError, loadConfig } from '../shared/config.js';
import { createHiveServices, type HiveServices } from '../shared/composition/hive.js';
import { toHiveErrorBody } from '../shared/hive/errors.js';
import { call, startTestPlatform, type TestPlatform } from './support/test-platform.js';

/** A hive server on an ephemeral port, over the services given (as api/hive/main.ts starts it). */
async function startHive(hive: HiveServices): Promise<{ baseUrl: string; server: http.Server; close(): Promise<void> }> {
  const server = await listen(createHiveApp(hive), 0, '127.0.0.1', { errorBody: toHiveErrorBody });
  return {
    baseUrl: serverUrl(server),
    server,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await hive.close();
    },
  };
}

// The gateway's test platform gives this file its own database, cloned from the migrated
// template; the hive runs beside it on the same database, as the start command runs them.
let gateway: TestPlatform;
let hive: HiveServices;
let hiveServer: Awaited<ReturnType<typeof startHive>>;
beforeAll(async () => {
  gateway = await startTestPlatform();
  hive = createHiveServices(gateway.config, 'test-hive');
  await hive.ready;
  hiveServer = await startHive(hive);
});
afterAll(async () => {
  await hiveServer?.close();
  await gateway?.close();
});

describe('the hive migration', () => {
  it('creates schema hive holding exactly one version row', async () => {
    const { rows: schemas } = await hive.db.query(`SELECT schema_name FROM information_schema.schemata WHERE schema_name = 'hive'`);
    expect(schemas).toEqual([{ schema_name: 'hive' }]);
    const { rows } = await hive.db.query('SELECT version FROM hive.schema_info');
    expect(rows).toEqual([{ version: expect.stringMatching(/\S/) }]);
    // A second version row is refused: there is one version of the schema.
    await expect(hive.db.query(`INSERT INTO hive.schema_info (version) VALUES ('another')`)).rejects.toThrow(/duplicate key/);
    // The gateway's tables stay where they were; the hive's own wallets (migration 030) live beside them in schema hive.
    const { rows: gatewayTables } = await hive.db.query(`SELECT table_schema FROM information_schema.tables WHERE table_name = 'wallets' ORDER BY table_schema`);
    expect(gatewayTables).toEqual([{ table_schema: 'hive' }, { table_schema: 'public' }]);
  });
});

describe('GET /v1/health of the hive', () => {
  it('names the server, the schema version read from the database, and the embedding model', async () => {
    const response = await call(hiveServer.baseUrl, '/v1/health');
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('x-request-id')).toMatch(/^req_/);
    const { rows } = await hive.db.query('SELECT version FROM hive.schema_info');
    expect(response.body).toEqual({ status: 'ok', server: 'memory-hive', schema: rows[0].version, embedding_model: 'svc:openai/text-embedding-3-small' });
  });

  it('reports whatever version the database holds', async () => {
    const { rows } = await hive.db.query('SELECT version FROM hive.schema_info');
    await hive.db.query(`UPDATE hive.schema_info SET version = 'set-by-test'`);
    try {
      const response = await call(hiveServer.baseUrl, '/v1/health');
      expect(response.body.schema).toBe('set-by-test');
    } finally {
      await hive.db.query('UPDATE hive.schema_info SET version = $1', [rows[0].version]);
    }
  });

  it('answers 503 with the hive error body when the database is unreachable', async () => {
    // Nothing listens on port 1: this hive's database is away (its start-up retries never settle).
    const away = await startHive(createHiveServices(loadConfig({ ...gateway.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' }), 'test-hive-away'));
    try {
      const response = await call(away.baseUrl, '/v1/health');
      expect(response.status).toBe(503);
      expect(Object.keys(response.body)).toEqual(['error']);
      expect(response.body.error).toMatch(/^The hive cannot read its database: /);
      // Liveness asks nothing: the process runs, so a supervisor leaves it be.
      const live = await call(away.baseUrl, '/v1/health/live');
      expect(live.status).toBe(200);
      expect(live.body).toEqual({ status: 'alive' });
    } finally {
      await away.close();
    }
  });
});

describe('hive errors', () => {
  it('answer an unknown route with 404 and spec 3 error body', async () => {
    const get = await call(hiveServer.baseUrl, '/v1/nothing-here?x=1');
    expect(get.status).toBe(404);
    expect(get.body).toEqual({ error: 'Not found: GET /v1/nothing-here' });
    const post = await call(hiveServer.baseUrl, '/v1/nowhere', { method: 'POST', json: { budget: 100 } });
    expect(post.status).toBe(404);
    expect(post.body).toEqual({ error: 'Not found: POST /v1/nowhere' });
  });

  it('answer a body that does not parse with 400 and spec 3 error body, not the gateway envelope', async () => {
    const response = await call(hiveServer.baseUrl, '/v1/recall', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query": "deploy' });
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ error: 'The request body is not valid JSON.' });
  });

  it('answer a body over the hive limit with 413', async () => {
    const response = await call(hiveServer.baseUrl, '/v1/remember', { method: 'POST', json: { body: 'x'.repeat(hive.config.HIVE_JSON_BODY_LIMIT) } });
    expect(response.status).toBe(413);
    expect(Object.keys(response.body)).toEqual(['error']);
    expect(response.body.error).toContain(String(hive.config.HIVE_JSON_BODY_LIMIT));
  });

  it('answer a request the HTTP parser rejects with the hive error body', async () => {
    const raw = await rawRequest(hiveServer.server, 'NOT HTTP AT ALL\r\n\r\n');
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'The HTTP request is malformed.' });
  });
});

describe('hive configuration', () => {
  it('defaults to port 8090 and a catalog embedding model, and refuses a model that does not embed', () => {
    const config = loadConfig({});
    expect(config.HIVE_PORT).toBe(8090);
    expect(config.hiveBaseUrl).toBe('http://127.0.0.1:8090');
    expect(config.HIVE_EMBEDDING_MODEL).toBe('svc:openai/text-embedding-3-small');
    expect(loadConfig({ HIVE_EMBEDDING_MODEL: 'svc:voyage/voyage-3-lite' }).HIVE_EMBEDDING_MODEL).toBe('svc:voyage/voyage-3-lite');
    expect(() => loadConfig({ HIVE_EMBEDDING_MODEL: 'svc:openai/gpt-4o' })).toThrow(ConfigError);
    expect(() => loadConfig({ HIVE_EMBEDDING_MODEL: 'text-embedding-3-small' })).toThrow(/HIVE_EMBEDDING_MODEL/);
  });
});

/** Writes raw bytes to the server and reads until it closes the connection. */
function rawRequest(server: http.Server, bytes: string): Promise<string> {
  const { port } = server.address() as net.AddressInfo;
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (received += chunk));
    socket.on('end', () => resolve(received));
    socket.on('error', reject);
  });
}
