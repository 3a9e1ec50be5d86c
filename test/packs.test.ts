import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { versionPartitionOf } from '../shared/brains/pack-repository.js';
import type { Queryable } from '../shared/db/pool.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { brainApi } from './support/brain-api.js';
import { expectError } from './support/expect-error.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, createDeveloper, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Packs against the real services: publish (the size and secret gates, synchronous and workflow
 * builds, sealing, serial versions), the pack routes, grants across accounts and retirement. The
 * size gate is tried on a second gateway whose caps are a few rows high.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let other: TestDeveloper;
let workers: { stop(): Promise<void> };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 50_000_000));
  other = await createDeveloper(gateway.platform, { creditMicros: 5_000_000, scopes: ['admin'] });
  workers = await startInProcessWorkers(gateway.platform);
});
afterAll(async () => {
  await workers?.stop();
  await emulated?.close();
});

const { send, post, get, newBrain, write, publish } = brainApi(() => gateway.baseUrl, () => developer.key);
const db = () => gateway.platform.db;

const packIdOf = async (brainId: string, q: Queryable = db()) => (await q.query(`SELECT id FROM brain_packs WHERE source_brain_id = $1`, [brainId])).rows[0]?.id as string | undefined;

describe('publish', () => {
  it('snapshots native rows into serial ready versions; name and slug are set by the first publish only', async () => {
    const brain = await newBrain({ name: 'Ops Runbook' });
    await write(brain, { entry_id: 'guide', scope: '/ops', title: 'Deploys', body: 'Deploys go through the pipeline.\n\nRollbacks use the previous image.' });
    await write(brain, { entry_id: 'pref', class: 'memory', type: 'preference', scope: '/ops', body: 'The team prefers small releases.' });
    const packed = await write(brain, { entry_id: 'packed', body: 'An entry that came with another pack.' });
    await db().query(`UPDATE brain_entries SET origin = 'reference' WHERE brain_id = $1 AND entry_id = $2`, [brain, packed]);

    const first = await publish(brain, { notes: 'first cut' });
    expect(first).toMatchObject({ object: 'brain_pack_version', version: 1, status: 'ready', entry_count: 2, chunk_count: 2, notes: 'first cut', published_by: developer.accountId });
    expect(first.id).toMatch(/^pkv_/);
    expect(first.byte_size).toBeGreaterThan(0);

    await write(brain, { entry_id: 'later', scope: '/ops', body: 'On-call rotates weekly.' });
    const second = await publish(brain, { name: 'ignored later', slug: 'ignored-later' });
    expect(second).toMatchObject({ version: 2, status: 'ready', entry_count: 3 });

    const packId = second.pack_id;
    const pack = (await get(`/v1/packs/${packId}`)).body;
    expect(pack).toMatchObject({ id: packId, object: 'brain_pack', name: 'Ops Runbook', slug: 'ops-runbook', source_brain_id: brain, visibility: 'private', encryption_at_publish: 'none', latest_version: 2, retired_at: null, embedding_model: 'openai/text-embedding-3-small', embedding_dims: 1536 });
    expect(pack.versions.map((version: { version: number; status: string }) => [version.version, version.status])).toEqual([[1, 'ready'], [2, 'ready']]);
    expect((await get('/v1/packs')).body.data.map((listed: { id: string }) => listed.id)).toContain(packId);

    // Version 1 holds the brain as it was: a version never changes after publish.
    const v1 = await db().query(`SELECT e.entry_id FROM brain_pack_entries e JOIN brain_pack_versions v ON v.id = e.version_id WHERE v.pack_id = $1 AND v.version = 1 ORDER BY e.entry_id`, [packId]);
    expect(v1.rows.map((row) => row.entry_id)).toEqual(['guide', 'pref']);
    // Vectors are stored whole (uncompressed), as the brain's own are, for a reference mount's search to read.
    const chunks = await db().query(`SELECT count(*)::int AS n, count(embedding)::int AS vectors, count(pg_column_compression(embedding))::int AS compressed FROM ${versionPartitionOf(first.id)}`);
    expect(chunks.rows[0]).toEqual({ n: 2, vectors: 2, compressed: 0 });
  });

  it('refuses a slug another of your packs has (409 slug_taken), and bad visibility or encryption (400)', async () => {
    const a = await newBrain();
    await write(a, { body: 'Alpha.' });
    await publish(a, { slug: 'shared-slug' });
    const b = await newBrain();
    await write(b, { body: 'Beta.' });
    expectError(await post(`/v1/brains/${b}/publish`, { slug: 'shared-slug' }), 409, 'slug_taken');
    expectError(await post(`/v1/brains/${b}/publish`, { visibility: 'everyone' }), 400, 'invalid_visibility');
    expectError(await post(`/v1/brains/${b}/publish`, { encryption_at_publish: 'rot13' }), 400, 'invalid_encryption');
    expect(await packIdOf(b)).toBeUndefined();
    // Another account may use the same slug.
    const theirs = await newBrain({}, other.key);
    await call(gateway.baseUrl, `/v1/brains/${theirs}/entries`, { method: 'PUT', json: { body: 'Gamma.' }, headers: bearer(other.key) });
    expect((await post(`/v1/brains/${theirs}/publish`, { slug: 'shared-slug' }, other.key)).status).toBe(200);
  });

  it('a sealed brain publishes sealed, and into a plaintext pack only with declassify', async () => {
    const brain = await newBrain({ encryption: 'standard' });
    await write(brain, { entry_id: 'secretive', body: 'The launch codename is Bluebird.' });
    expectError(await post(`/v1/brains/${brain}/publish`, { encryption_at_publish: 'none' }), 409, 'declassification_required');
    const sealed = await publish(brain);
    const stored = await db().query(`SELECT body, body_sealed FROM brain_pack_entries WHERE version_id = $1`, [sealed.id]);
    expect(stored.rows[0].body).toBeNull();
    expect(stored.rows[0].body_sealed.toString('latin1')).not.toContain('Bluebird');
    expect((await get(`/v1/packs/${sealed.pack_id}`)).body.encryption_at_publish).toBe('standard');

    const strict = await newBrain({ encryption: 'strict' });
    await write(strict, { body: 'The vault opens at dawn.' });
    const declassified = await publish(strict, { encryption_at_publish: 'none', declassify: true });
    const plain = await db().query(`SELECT content, embedding IS NOT NULL AS has_vector FROM ${versionPartitionOf(declassified.id)}`);
    expect(plain.rows).toEqual([{ content: 'The vault opens at dawn.', has_vector: true }]);
  });
});

describe('publish gates', () => {
  const pem = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const secrets: [string, string][] = [
    ['an AWS access key', 'Use the key AKIA4HK2EXQ3TZRNWD7P for the uploads bucket.'],
    ['a private key block', `The deploy key:\n${pem}`],
    ['a GitHub token', 'CI pushes with 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 today.'],
  ];
  for (const [what, text] of secrets) {
    it(`refuses the whole publish when one chunk holds ${what}, naming the entry, chunk and scope`, async () => {
      const brain = await newBrain();
      await write(brain, { entry_id: 'clean', body: 'Nothing to see here.' });
      await write(brain, { entry_id: 'leaky', scope: '/infra', body: `First paragraph is fine.\n\n${text}`, class: 'reference' });
      const refused = await post(`/v1/brains/${brain}/publish`, {});
      expectError(refused, 422, 'secret_detected');
      expect(refused.body.error.message).toContain('entry leaky');
      expect(refused.body.error.message).toContain('/infra');
      expect(refused.body.error.message).toMatch(/chunk \d/);
      expect(await packIdOf(brain)).toBeUndefined();
    });
  }

  it('a secret after the first version refuses the next one and leaves the pack as it was', async () => {
    const brain = await newBrain();
    await write(brain, { body: 'Clean content.' });
    const first = await publish(brain);
    await write(brain, { title: 'token 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', body: 'The title leaks.' });
    const refused = await post(`/v1/brains/${brain}/publish`, {});
    expectError(refused, 422, 'secret_detected');
    expect(refused.body.error.message).toContain('the title of entry');
    const pack = (await get(`/v1/packs/${first.pack_id}`)).body;
    expect(pack.versions).toHaveLength(1);
  });

  it('refuses a brain past either size cap (409 pack_too_large) before any pack row exists; at the caps it publishes', async () => {
    // A second gateway with caps a few rows high: the gate's arithmetic is the same at 200,000.
    const small = await startEmulatedGatewayWithDeveloper({ SVC_PACK_MAX_ENTRIES: '3', SVC_PACK_MAX_CHUNKS: '4' });
    try {
      const api = brainApi(() => small.gateway.baseUrl, () => small.developer.key);
      const smallDb = small.gateway.platform.db;
      // Paragraphs of 120 characters under a 200-character chunk: one chunk each.
      const manual = (paragraphs: number) => Array.from({ length: paragraphs }, (_, i) => `Paragraph ${i} of the manual. ${'More detail follows. '.repeat(6)}`.slice(0, 120)).join('\n\n');
      const chunky = await api.newBrain({ memory_policy: { chunking: { strategy: 'paragraph', max_chars: 200 } } });
      await api.write(chunky, { entry_id: 'manual', body: manual(5) });
      const tooManyChunks = await api.post(`/v1/brains/${chunky}/publish`, {});
      expectError(tooManyChunks, 409, 'pack_too_large');
      expect(tooManyChunks.body.error.message).toContain('1 native entries and 5 chunks');
      expect(await packIdOf(chunky, smallDb)).toBeUndefined();
      await api.write(chunky, { entry_id: 'manual', body: manual(4) });
      expect(await api.publish(chunky)).toMatchObject({ status: 'ready', chunk_count: 4 });

      const wide = await api.newBrain();
      for (const i of [1, 2, 3, 4]) await api.write(wide, { entry_id: `fact-${i}`, class: 'memory', type: 'fact', body: `Fact ${i}.` });
      const tooManyEntries = await api.post(`/v1/brains/${wide}/publish`, {});
      expectError(tooManyEntries, 409, 'pack_too_large');
      expect(tooManyEntries.body.error.message).toContain('4 native entries');
      expect(await packIdOf(wide, smallDb)).toBeUndefined();
    } finally {
      await small.emulated.close();
    }
  });
});

describe('asynchronous build', () => {
  it('over 1,000 entries the version is built by a workflow: building, then ready with every entry', async () => {
    const brain = await newBrain();
    const ids = Array.from({ length: 1_001 }, (_, i) => i);
    for (let start = 0; start < ids.length; start += 10) {
      await Promise.all(ids.slice(start, start + 10).map((i) => write(brain, { entry_id: `e${i}`, class: 'memory', type: 'fact', body: `Fact number ${i} about the fleet.` })));
    }
    const started = await publish(brain);
    expect(started).toMatchObject({ version: 1, status: 'building' });
    // A write after the publish is not in the version: it holds the brain as the gates read it.
    await write(brain, { entry_id: 'after', body: 'Written after the publish.' });
    const ready = await pollUntil(async () => (await get(`/v1/packs/${started.pack_id}`)).body.versions[0], (version: { status: string }) => version.status !== 'building', { timeoutMs: 60_000 });
    expect(ready).toMatchObject({ status: 'ready', entry_count: 1_001, chunk_count: 1_001 });
    // Then the plaintext version gets the HNSW index reference mounts search.
    const indexes = await pollUntil(async () => (await db().query(`SELECT count(*)::int AS n FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%hnsw%'`, [versionPartitionOf(started.id)])).rows[0].n, (n: number) => n === 1, { timeoutMs: 60_000 });
    expect(indexes).toBe(1);
    const entries = await db().query(`SELECT count(*)::int AS n FROM brain_pack_entries WHERE version_id = $1 AND entry_id = 'after'`, [started.id]);
    expect(entries.rows[0].n).toBe(0);
    // 1,001 writes through the API (each embedded) take a while when the whole suite shares two cores.
  }, 180_000);
});

describe('packs and grants', () => {
  it('grants let another account see the pack; owner-only routes stay the owner’s; revoke takes it back', async () => {
    const brain = await newBrain();
    await write(brain, { body: 'Shared knowledge.' });
    const { pack_id: packId } = await publish(brain);

    expectError(await get(`/v1/packs/${packId}`, other.key), 404, 'resource_not_found');
    expectError(await post(`/v1/packs/${packId}/grants`, {}), 400, 'missing_account_id');
    expectError(await post(`/v1/packs/${packId}/grants`, { account_id: developer.accountId }), 400, 'self_grant');
    expectError(await post(`/v1/packs/${packId}/grants`, { account_id: '00000000-0000-4000-8000-000000000000' }), 404, 'account_not_found');

    const granted = await post(`/v1/packs/${packId}/grants`, { account_id: other.accountId });
    expect(granted.body).toMatchObject({ object: 'brain_pack_grant', pack_id: packId, account_id: other.accountId, granted: true });
    expect((await get(`/v1/packs/${packId}/grants`)).body.data.map((grant: { account_id: string }) => grant.account_id)).toEqual([other.accountId]);
    expect((await get(`/v1/packs/${packId}`, other.key)).body.id).toBe(packId);
    expect((await get('/v1/packs', other.key)).body.data.map((pack: { id: string }) => pack.id)).toContain(packId);
    expectError(await get(`/v1/packs/${packId}/grants`, other.key), 404, 'resource_not_found');
    expectError(await send('DELETE', `/v1/packs/${packId}`, undefined, other.key), 404, 'resource_not_found');

    const revoked = await send('DELETE', `/v1/packs/${packId}/grants/${other.accountId}`);
    expect(revoked.body).toEqual({ object: 'brain_pack_grant', pack_id: packId, account_id: other.accountId, revoked: true });
    expectError(await get(`/v1/packs/${packId}`, other.key), 404, 'resource_not_found');
    expectError(await send('DELETE', `/v1/packs/${packId}/grants/${other.accountId}`), 404, 'resource_not_found');
  });

  it('retiring a pack (owner only) sets retired_at and keeps it readable', async () => {
    const brain = await newBrain();
    await write(brain, { body: 'Old knowledge.' });
    const { pack_id: packId } = await publish(brain);
    const retired = await send('DELETE', `/v1/packs/${packId}`);
    expect(retired.body.retired_at).not.toBeNull();
    expect((await get(`/v1/packs/${packId}`)).body.retired_at).toBe(retired.body.retired_at);
    expectError(await get('/v1/packs/pack_nope'), 404, 'resource_not_found');
  });

  it('answers 404 resource_not_found on packs routes when SVC_BRAIN_PACKS_ENABLED is false', async () => {
    const off = await startTestPlatform({ SVC_BRAIN_PACKS_ENABLED: 'false' });
    try {
      const owner = await createDeveloper(off.platform, { creditMicros: 1_000_000, scopes: ['admin'] });
      expectError(await call(off.baseUrl, '/v1/packs', { headers: bearer(owner.key) }), 404, 'resource_not_found');
      expectError(await call(off.baseUrl, '/v1/brains/brn_000000000000000000000000/publish', { method: 'POST', json: { slug: 'BAD SLUG' }, headers: bearer(owner.key) }), 404, 'resource_not_found');
    } finally {
      await off.close();
    }
  });
});
