import { createHash } from 'node:crypto';
import { expectError } from './support/expect-error.js';
import { mkdtempSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, createDeveloper, startTestPlatform, type ApiResponse, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/** POST /v1/files and its reads, against the real app, PostgreSQL and the local-disk storage. */
const MAX_BYTES = 64 * 1024;
let gateway: TestPlatform;
let developer: TestDeveloper;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-files-'));
  // A small upload limit, so the 413 is reached with a small body (the default is 512 MB).
  gateway = await startTestPlatform({ DATA_DIR: dataDir, FILES_MAX_BYTES: String(MAX_BYTES) });
  developer = await createDeveloper(gateway.platform);
});
afterAll(() => gateway?.close());

function form(parts: { purpose?: string; file?: { content: string | Uint8Array; filename: string } | string }): FormData {
  const body = new FormData();
  if (parts.purpose !== undefined) body.append('purpose', parts.purpose);
  if (typeof parts.file === 'string') body.append('file', parts.file);
  else if (parts.file) body.append('file', new Blob([parts.file.content]), parts.file.filename);
  return body;
}

const upload = (body: FormData | string, key = developer.key, headers: Record<string, string> = {}) =>
  call(gateway.baseUrl, '/v1/files', { method: 'POST', body, headers: { ...bearer(key), ...headers } });


const partialFiles = () =>
  readdirSync(path.join(dataDir, 'files'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.partial'))
    .map((entry) => entry.name);

describe('POST /v1/files', () => {
  it('stores the upload with its size and sha256, and serves it back byte for byte', async () => {
    const content = Array.from({ length: 500 }, (_, i) => JSON.stringify({ custom_id: `r${i}`, n: i })).join('\n') + '\n';
    const created = await upload(form({ purpose: 'batch', file: { content, filename: 'requests.jsonl' } }));
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ object: 'file', purpose: 'batch', filename: 'requests.jsonl', bytes: Buffer.byteLength(content), status: 'processed' });
    expect(created.body.id).toMatch(/^file_[A-Za-z0-9]{24}$/);
    expect(created.body.sha256).toBe(createHash('sha256').update(content).digest('hex'));
    expect(Math.abs(created.body.created_at - Date.now() / 1000)).toBeLessThan(600);

    const fetched = await call(gateway.baseUrl, `/v1/files/${created.body.id}`, { headers: bearer(developer.key) });
    expect(fetched.body).toEqual(created.body);

    const download = await fetch(`${gateway.baseUrl}/v1/files/${created.body.id}/content`, { headers: bearer(developer.key) });
    expect(download.status).toBe(200);
    expect(download.headers.get('content-length')).toBe(String(Buffer.byteLength(content)));
    expect(await download.text()).toBe(content);
    const { rows } = await gateway.platform.db.query('SELECT bytes, sha256, purpose FROM files WHERE id = $1', [created.body.id]);
    expect(rows[0]).toEqual({ bytes: String(Buffer.byteLength(content)), sha256: created.body.sha256, purpose: 'batch' });
  });

  it('takes the purpose after the file part as well as before it', async () => {
    const body = new FormData();
    body.append('file', new Blob(['{"a":1}\n']), 'late-purpose.jsonl');
    body.append('purpose', 'user_data');
    const created = await upload(body);
    expect(created.status).toBe(200);
    expect(created.body.purpose).toBe('user_data');
  });

  it('accepts each upload purpose of the spec', async () => {
    for (const purpose of ['batch', 'attachments', 'vision', 'assistants', 'user_data']) {
      const created = await upload(form({ purpose, file: { content: 'x', filename: `${purpose}.bin` } }));
      expect({ purpose, status: created.status, stored: created.body.purpose }).toEqual({ purpose, status: 200, stored: purpose });
    }
  });

  it('refuses a missing or unknown purpose, a missing file part and a file part without a filename', async () => {
    expectError(await upload(form({ file: { content: 'x', filename: 'a.jsonl' } })), 400, 'missing_purpose', { param: 'purpose' });
    expectError(await upload(form({ purpose: 'fine-tune', file: { content: 'x', filename: 'a.jsonl' } })), 400, 'invalid_purpose', { param: 'purpose' });
    expectError(await upload(form({ purpose: 'batch' })), 400, 'missing_file', { param: 'file' });
    expectError(await upload(form({ purpose: 'batch', file: 'not a file, a plain field' })), 400, 'missing_filename', { param: 'file' });
    // Nothing refused stays behind in storage.
    expect(partialFiles()).toEqual([]);
  });

  it('refuses a body that is not multipart, or multipart that does not parse', async () => {
    const json = await call(gateway.baseUrl, '/v1/files', { method: 'POST', json: { purpose: 'batch' }, headers: bearer(developer.key) });
    expectError(json, 400, 'invalid_multipart', { param: undefined });
    const broken = await upload('--nope\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch', developer.key, { 'content-type': 'multipart/form-data' });
    expectError(broken, 400, 'invalid_multipart', { param: undefined });
  });

  it('refuses a file over the upload limit with 413 and keeps nothing of it', async () => {
    const before = (await gateway.platform.db.query('SELECT count(*)::int AS n FROM files')).rows[0].n;
    const tooBig = await upload(form({ purpose: 'batch', file: { content: new Uint8Array(MAX_BYTES + 1), filename: 'big.jsonl' } }));
    expectError(tooBig, 413, 'request_too_large', { param: undefined });
    expect((await gateway.platform.db.query('SELECT count(*)::int AS n FROM files')).rows[0].n).toBe(before);
    expect(partialFiles()).toEqual([]);
    // Exactly at the limit is fine.
    const atLimit = await upload(form({ purpose: 'batch', file: { content: new Uint8Array(MAX_BYTES), filename: 'limit.jsonl' } }));
    expect({ status: atLimit.status, bytes: atLimit.body.bytes }).toEqual({ status: 200, bytes: MAX_BYTES });
  });

  it('is for developer keys only: a client token is refused', async () => {
    const customer = await call(gateway.baseUrl, '/v1/customers', { method: 'POST', json: { external_id: 'files-user' }, headers: bearer(developer.key) });
    const minted = await call(gateway.baseUrl, `/v1/customers/${customer.body.id}/client_tokens`, { method: 'POST', json: {}, headers: bearer(developer.key) });
    expect(minted.status).toBe(200);
    const refused = await call(gateway.baseUrl, '/v1/files', { method: 'POST', body: form({ purpose: 'batch', file: { content: 'x', filename: 'a' } }), headers: { Authorization: `Client ${minted.body.token}` } });
    expectError(refused, 403, 'endpoint_not_allowed_for_client_token', { param: undefined });
  });

  it('needs the api:write scope to upload and api:read to read', async () => {
    const reader = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    expectError(await upload(form({ purpose: 'batch', file: { content: 'x', filename: 'a' } }), reader.key), 403, 'insufficient_scope', { param: undefined });
  });
});

describe('listing, reading and deleting files', () => {
  it('lists newest first with the cursor envelope, filtered by purpose, and pages by next_cursor or by the last id', async () => {
    const owner = await createDeveloper(gateway.platform);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await upload(form({ purpose: i % 2 ? 'vision' : 'batch', file: { content: `file ${i}`, filename: `f${i}.txt` } }), owner.key)).body.id);
    const first = await call(gateway.baseUrl, '/v1/files?limit=2', { headers: bearer(owner.key) });
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    expect(first.body.data.map((file: { id: string }) => file.id)).toEqual([ids[4], ids[3]]);
    const second = await call(gateway.baseUrl, `/v1/files?limit=2&after=${first.body.next_cursor}`, { headers: bearer(owner.key) });
    expect(second.body.data.map((file: { id: string }) => file.id)).toEqual([ids[2], ids[1]]);
    // The openai SDK pages with the last object's id as `after`.
    const byId = await call(gateway.baseUrl, `/v1/files?limit=10&after=${ids[1]}`, { headers: bearer(owner.key) });
    expect(byId.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(byId.body.data.map((file: { id: string }) => file.id)).toEqual([ids[0]]);
    const vision = await call(gateway.baseUrl, '/v1/files?purpose=vision', { headers: bearer(owner.key) });
    expect(vision.body.data.map((file: { id: string }) => file.id)).toEqual([ids[3], ids[1]]);
  });

  it('deletes a file: its bytes are gone, reads are 404, and it leaves the list', async () => {
    const created = await upload(form({ purpose: 'assistants', file: { content: 'to be deleted', filename: 'gone.txt' } }));
    const deleted = await call(gateway.baseUrl, `/v1/files/${created.body.id}`, { method: 'DELETE', headers: bearer(developer.key) });
    expect(deleted.body).toEqual({ id: created.body.id, object: 'file', deleted: true });
    expectError(await call(gateway.baseUrl, `/v1/files/${created.body.id}`, { headers: bearer(developer.key) }), 404, 'not_found', { param: undefined });
    expectError(await call(gateway.baseUrl, `/v1/files/${created.body.id}/content`, { headers: bearer(developer.key) }), 404, 'not_found', { param: undefined });
    expectError(await call(gateway.baseUrl, `/v1/files/${created.body.id}`, { method: 'DELETE', headers: bearer(developer.key) }), 404, 'not_found', { param: undefined });
    const listed = await call(gateway.baseUrl, '/v1/files?limit=100', { headers: bearer(developer.key) });
    expect(listed.body.data.map((file: { id: string }) => file.id)).not.toContain(created.body.id);
  });

  it("answers 404 for another developer's file, never 403", async () => {
    const created = await upload(form({ purpose: 'batch', file: { content: 'mine', filename: 'mine.jsonl' } }));
    const stranger = await createDeveloper(gateway.platform);
    for (const [method, suffix] of [['GET', ''], ['GET', '/content'], ['DELETE', '']] as const) {
      expectError(await call(gateway.baseUrl, `/v1/files/${created.body.id}${suffix}`, { method, headers: bearer(stranger.key) }), 404, 'not_found', { param: undefined });
    }
  });
});
