import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importedEntryId, packEntryIdOf } from '../shared/brains/mounts.js';
import { insertPack, insertVersion, versionPartitionOf } from '../shared/brains/pack-repository.js';
import { partitionOf } from '../shared/brains/repository.js';
import { newId } from '../shared/ids.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { brainApi } from './support/brain-api.js';
import { expectError } from './support/expect-error.js';
import { startInProcessWorkers } from './support/in-process-workers.js';
import { pollUntil } from './support/poll.js';
import { bearer, call, createDeveloper, type TestDeveloper, type TestPlatform } from './support/test-platform.js';
import { startWorkerWorld, type WorkerWorld } from './support/worker-world.js';

/**
 * Mounts against the real services: the body's validation and the spec's refusal order, reference
 * mounts (ready at once, pins, follow_latest, garbage collection of unpinned versions),
 * materialize mounts (an import workflow that re-seals rows under the consumer brain's key and
 * remaps their scopes, re-materialization, unmount), grants across accounts, the reindex refusal,
 * and a worker killed in the middle of an import.
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

const { send, post, get, newBrain, write, publish: publishAny } = brainApi(() => gateway.baseUrl, () => developer.key);
const db = () => gateway.platform.db;

/** A publish that built in the request: ready. */
async function publish(brainId: string, body: Record<string, unknown> = {}, key?: string): Promise<{ id: string; pack_id: string; version: number; entry_count: number; chunk_count: number }> {
  const published = await publishAny(brainId, body, key);
  expect(published.status).toBe('ready');
  return published;
}

/** A brain with one entry, published: its pack's first version. */
async function packWith(body: string, brain: Record<string, unknown> = {}, publishBody: Record<string, unknown> = {}, key?: string) {
  const source = await newBrain(brain, key);
  await write(source, { entry_id: 'only', body }, key);
  return { source, ...(await publish(source, publishBody, key)) };
}

async function mount(brainId: string, body: Record<string, unknown>, key?: string) {
  const created = await post(`/v1/brains/${brainId}/mounts`, body, key);
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  return created.body;
}

const mountsOf = async (brainId: string, key?: string) => (await get(`/v1/brains/${brainId}/mounts`, key)).body.data as { id: string; pinned_version: number; materialized_version: number | null; status: string; follow_latest: boolean }[];

/** Waits until a materialize mount holds `version`'s copy. */
async function materialized(brainId: string, mountId: string, version: number, key?: string) {
  return pollUntil(async () => (await mountsOf(brainId, key)).find((found) => found.id === mountId)!, (found) => found.materialized_version === version, { timeoutMs: 60_000 });
}

const importedRows = async (brainId: string, mountId: string) =>
  (await db().query(`SELECT entry_id, scope, origin, source_mount_id, title, body, title_sealed, body_sealed, valid_to FROM brain_entries WHERE brain_id = $1 AND source_mount_id = $2 ORDER BY entry_id`, [brainId, mountId])).rows;

const versionRow = async (packId: string, version: number) =>
  (await db().query(`SELECT id, status, content_dropped_at FROM brain_pack_versions WHERE pack_id = $1 AND version = $2`, [packId, version])).rows[0];

const tableExists = async (name: string) => (await db().query(`SELECT to_regclass($1) IS NOT NULL AS present`, [name])).rows[0].present as boolean;

/** A version row as a build in progress leaves it (held, never built). */
async function buildingVersion(packId: string, version: number): Promise<void> {
  await insertVersion(db(), { id: newId('pkv_'), pack_id: packId, version, source_space: 1, snapshot_at: new Date(), notes: null, published_by: developer.accountId, memory_policy: {} as never, tier_multipliers: {} });
}

describe('mount body', () => {
  it('refuses a missing pack_id, a bad mode, a non-integer version and a malformed scope_map (400)', async () => {
    const brain = await newBrain();
    const { pack_id: packId } = await packWith('Body checks.');
    expectError(await post(`/v1/brains/${brain}/mounts`, {}), 400, 'missing_pack_id', { param: 'pack_id' });
    expectError(await post(`/v1/brains/${brain}/mounts`, { mode: 'reference' }), 400, 'missing_pack_id', { param: 'pack_id' });
    expectError(await post(`/v1/brains/${brain}/mounts`, { pack_id: packId, mode: 'copy' }), 400, 'invalid_mode', { param: 'mode' });
    expectError(await post(`/v1/brains/${brain}/mounts`, { pack_id: packId, version: '1' }), 400, 'invalid_version', { param: 'version' });
    expectError(await post(`/v1/brains/${brain}/mounts`, { pack_id: packId, version: 1.5 }), 400, 'invalid_version', { param: 'version' });
    for (const scopeMap of [[], 'everything', { '/docs': { nested: '/x' } }, { docs: '/kb' }, { '/docs': 'kb' }, { '/docs//x': '/kb' }, {}]) {
      expectError(await post(`/v1/brains/${brain}/mounts`, { pack_id: packId, scope_map: scopeMap }), 400, 'invalid_scope_map', { param: 'scope_map' });
    }
    expect(await mountsOf(brain)).toEqual([]);
  });

  it('answers 404 for a brain that is not yours and for a pack you neither own nor hold', async () => {
    const { pack_id: packId } = await packWith('Not for you.');
    const theirs = await newBrain({}, other.key);
    expectError(await post(`/v1/brains/${theirs}/mounts`, { pack_id: packId }), 404, 'not_found');
    expectError(await post(`/v1/brains/${theirs}/mounts`, { pack_id: packId }, other.key), 404, 'resource_not_found');
    expectError(await post(`/v1/brains/${theirs}/mounts`, { pack_id: 'pack_nope' }, other.key), 404, 'resource_not_found');
  });
});

describe('refusals, in the spec order', () => {
  it('embedding parity, then pack state, then mode rules, then caps', async () => {
    const small = await newBrain();
    const large = await newBrain({ embedding_model: 'text-embedding-3-large' });

    // A retired, sealed pack: the large brain hears about the model first, the small one about retirement.
    const retired = await packWith('Retired knowledge.', { encryption: 'standard' });
    await send('DELETE', `/v1/packs/${retired.pack_id}`);
    expectError(await post(`/v1/brains/${large}/mounts`, { pack_id: retired.pack_id, mode: 'reference', version: 7 }), 422, 'embedding_model_mismatch');
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: retired.pack_id, mode: 'reference', version: 7 }), 409, 'pack_retired');

    // A pack whose only version is still building has no published version.
    const unbuilt = await newBrain();
    const unbuiltPack = newId('pack_');
    await insertPack(db(), { id: unbuiltPack, developer_id: developer.accountId, source_brain_id: unbuilt, name: 'Unbuilt', slug: `unbuilt-${unbuilt.slice(-8).toLowerCase()}`, visibility: 'private', encryption_at_publish: 'none', wrapped_data_key: null, embedding_model: 'openai/text-embedding-3-small', embedding_dims: 1536 });
    await buildingVersion(unbuiltPack, 1);
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: unbuiltPack }), 409, 'no_published_version');

    // A sealed pack with a ready version 1 and a building version 2.
    const sealed = await packWith('Sealed knowledge.', { encryption: 'standard' });
    await buildingVersion(sealed.pack_id, 2);
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: sealed.pack_id, mode: 'reference', version: 3 }), 400, 'invalid_version', { param: 'version' });
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: sealed.pack_id, mode: 'reference', version: 2 }), 409, 'pack_version_not_ready', { param: 'version' });
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: sealed.pack_id, mode: 'reference' }), 409, 'reference_requires_plaintext_pack');

    // Another account's plaintext pack, granted: materialize only.
    const granted = await packWith('Shared across accounts.', {}, {}, other.key);
    expect((await post(`/v1/packs/${granted.pack_id}/grants`, { account_id: developer.accountId }, other.key)).status).toBe(200);
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: granted.pack_id, mode: 'reference' }), 409, 'cross_account_reference_unsupported');

    // Caps: one mount per pack, one reference mount, sixteen mounts.
    const plain = await packWith('Plain knowledge.');
    expect((await mount(small, { pack_id: plain.pack_id })).status).toBe('ready');
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: plain.pack_id, mode: 'materialize' }), 409, 'mount_exists');
    const second = await packWith('Second plain pack.');
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: second.pack_id, mode: 'reference' }), 409, 'reference_mount_limit');
    await mount(small, { pack_id: sealed.pack_id, mode: 'materialize' });
    await mount(small, { pack_id: granted.pack_id, mode: 'materialize' });
    await mount(small, { pack_id: second.pack_id, mode: 'materialize' });
    for (let i = 4; i < 16; i++) await mount(small, { pack_id: (await packWith(`Filler pack ${i}.`)).pack_id, mode: 'materialize' });
    expect(await mountsOf(small)).toHaveLength(16);
    const seventeenth = await packWith('One too many.');
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: seventeenth.pack_id, mode: 'materialize' }), 409, 'mount_limit');
    // The mode's rules come before the caps.
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: seventeenth.pack_id, mode: 'reference' }), 409, 'reference_mount_limit');
    const sealedSeventeenth = await packWith('Sealed and one too many.', { encryption: 'strict' });
    expectError(await post(`/v1/brains/${small}/mounts`, { pack_id: sealedSeventeenth.pack_id, mode: 'reference' }), 409, 'reference_requires_plaintext_pack');
    expect(await mountsOf(small)).toHaveLength(16);
  }, 120_000);
});

describe('reference mounts', () => {
  it('are ready at once, pinned to the latest version by default, and listed', async () => {
    const brain = await newBrain();
    const { pack_id: packId } = await packWith('Reference me.');
    const created = await mount(brain, { pack_id: packId, scope_map: { '/': '/vendor' } });
    expect(created).toMatchObject({ object: 'brain_mount', brain_id: brain, pack_id: packId, mode: 'reference', pinned_version: 1, follow_latest: false, scope_map: { '/': '/vendor' }, status: 'ready', materialized_version: null });
    expect(created.id).toMatch(/^mnt_[0-9A-Za-z]{24}$/);
    const listed = await get(`/v1/brains/${brain}/mounts`);
    expect(listed.body).toEqual({ object: 'list', data: [created] });
    expect((await get(`/v1/brains/${brain}/mounts/${created.id}`)).body).toEqual(created);
    expectError(await get(`/v1/brains/${brain}/mounts/mnt_${'x'.repeat(24)}`), 404, 'resource_not_found');
    expectError(await get(`/v1/brains/${brain}/mounts/${created.id}`, other.key), 404, 'not_found');
    // Nothing is copied into the brain.
    expect((await db().query(`SELECT count(*)::int AS n FROM brain_entries WHERE brain_id = $1`, [brain])).rows[0].n).toBe(0);
  });

  it('follow_latest re-points on a new publish; a version no mount pins any more loses its content', async () => {
    const source = await newBrain();
    await write(source, { entry_id: 'a', body: 'Version one knowledge.' });
    const v1 = await publish(source);
    const follower = await newBrain();
    const following = await mount(follower, { pack_id: v1.pack_id, follow_latest: true });
    const pinner = await newBrain();

    await write(source, { entry_id: 'b', body: 'Version two knowledge.' });
    const v2 = await publish(source);
    expect((await mountsOf(follower))[0]).toMatchObject({ id: following.id, pinned_version: 2, status: 'ready' });
    // Version 1: no pin, not the latest: its content went; its row stays, and it can no longer be mounted.
    expect(await versionRow(v1.pack_id, 1)).toMatchObject({ status: 'ready', content_dropped_at: expect.any(Date) });
    expect(await tableExists(versionPartitionOf(v1.id))).toBe(false);
    expect((await db().query(`SELECT count(*)::int AS n FROM brain_pack_entries WHERE version_id = $1`, [v1.id])).rows[0].n).toBe(0);
    // It reads collected, so a consumer can tell it from the mountable ones, and the refusal names that state.
    expect((await get(`/v1/packs/${v1.pack_id}`)).body.versions.map((version: { version: number; status: string }) => [version.version, version.status])).toEqual([[1, 'collected'], [2, 'ready']]);
    const refused = await post(`/v1/brains/${pinner}/mounts`, { pack_id: v1.pack_id, version: 1 });
    expectError(refused, 409, 'pack_version_not_ready', { param: 'version' });
    expect(refused.body.error.message).toContain('is collected');

    // Version 2 pinned by a mount that does not follow: the next publish keeps it.
    await mount(pinner, { pack_id: v1.pack_id, version: 2 });
    await write(source, { entry_id: 'c', body: 'Version three knowledge.' });
    await publish(source);
    expect((await mountsOf(follower))[0]!.pinned_version).toBe(3);
    expect((await mountsOf(pinner))[0]!.pinned_version).toBe(2);
    expect((await versionRow(v1.pack_id, 2)).content_dropped_at).toBeNull();
    expect(await tableExists(versionPartitionOf(v2.id))).toBe(true);

    // Its last pin released, version 2 goes too; the latest (3) would not.
    const pinned = (await mountsOf(pinner))[0]!;
    expect((await send('DELETE', `/v1/brains/${pinner}/mounts/${pinned.id}`)).body).toEqual({ id: pinned.id, object: 'brain_mount', deleted: true });
    expect((await versionRow(v1.pack_id, 2)).content_dropped_at).not.toBeNull();
    expect(await tableExists(versionPartitionOf(v2.id))).toBe(false);
    expect((await get(`/v1/packs/${v1.pack_id}`)).body.versions.map((version: { status: string }) => version.status)).toEqual(['collected', 'collected', 'ready']);
    await send('DELETE', `/v1/brains/${follower}/mounts/${following.id}`);
    expect((await versionRow(v1.pack_id, 3)).content_dropped_at).toBeNull();
  });

  it('PATCH re-points in place, and refuses unknown mounts and bad versions', async () => {
    const source = await newBrain();
    await write(source, { body: 'First.' });
    const v1 = await publish(source);
    await write(source, { body: 'Second.' });
    await publish(source);
    await buildingVersion(v1.pack_id, 3);
    const brain = await newBrain();
    const created = await mount(brain, { pack_id: v1.pack_id, version: 1 });

    expectError(await send('PATCH', `/v1/brains/${brain}/mounts/mnt_000000000000000000000000`, { version: 2 }), 404, 'resource_not_found');
    expectError(await send('PATCH', `/v1/brains/${brain}/mounts/nope`, { version: 2 }), 404, 'resource_not_found');
    expectError(await send('PATCH', `/v1/brains/${brain}/mounts/${created.id}`, { version: 'two' }), 400, 'invalid_version', { param: 'version' });
    expectError(await send('PATCH', `/v1/brains/${brain}/mounts/${created.id}`, { version: 9 }), 400, 'invalid_version', { param: 'version' });
    expectError(await send('PATCH', `/v1/brains/${brain}/mounts/${created.id}`, { version: 3 }), 409, 'pack_version_not_ready', { param: 'version' });

    const patched = await send('PATCH', `/v1/brains/${brain}/mounts/${created.id}`, { version: 2, follow_latest: true });
    expect(patched.body).toMatchObject({ id: created.id, mode: 'reference', pinned_version: 2, follow_latest: true, status: 'ready' });
    // Version 1 was pinned by this mount alone and is not the latest.
    expect((await versionRow(v1.pack_id, 1)).content_dropped_at).not.toBeNull();
    expect(await mountsOf(brain)).toEqual([expect.objectContaining({ id: created.id, pinned_version: 2, follow_latest: true })]);
  });
});

describe('materialize mounts', () => {
  it('import the version into the brain: pending, then ready; rows of origin reference, remapped and sealed under the brain key', async () => {
    const source = await newBrain();
    await write(source, { entry_id: 'api', scope: '/docs/api', title: 'API', body: 'Tokens expire after an hour.\n\nRefresh them with the refresh endpoint.', class: 'reference' });
    await write(source, { entry_id: 'root', scope: '/docs', title: 'Docs', body: 'The documentation lives in the handbook.' });
    await write(source, { entry_id: 'elsewhere', scope: '/other', body: 'Not under docs.' });
    const v1 = await publish(source);
    const brain = await newBrain({ encryption: 'standard' });
    const writeSeq = async () => (await db().query(`SELECT write_seq FROM brains WHERE id = $1`, [brain])).rows[0].write_seq as string;
    const before = await writeSeq();

    const created = await mount(brain, { pack_id: v1.pack_id, mode: 'materialize', scope_map: { '/docs': '/kb', '/docs/api': '/kb/reference' } });
    expect(created).toMatchObject({ mode: 'materialize', pinned_version: 1, status: 'pending', materialized_version: null });
    const done = await materialized(brain, created.id, 1);
    expect(done.status).toBe('ready');
    expect((await get(`/v1/brains/${brain}/mounts/${created.id}`)).body).toEqual(done);
    expect(BigInt(await writeSeq())).toBeGreaterThan(BigInt(before));

    const rows = await importedRows(brain, created.id);
    expect(rows.map((row) => [row.entry_id, row.scope, row.origin])).toEqual([
      [importedEntryId(created.id, 1, 'api'), '/kb/reference', 'reference'],
      [importedEntryId(created.id, 1, 'root'), '/kb', 'reference'],
    ]);
    for (const row of rows) {
      expect(row).toMatchObject({ title: null, body: null, valid_to: null, source_mount_id: created.id });
      expect(row.body_sealed.toString('latin1')).not.toMatch(/Tokens|handbook/);
    }
    const chunks = await db().query(`SELECT entry_id, chunk_index, content, content_sealed, embedding IS NOT NULL AS has_vector FROM ${partitionOf(brain)} ORDER BY entry_id, chunk_index`);
    expect(chunks.rows.map((chunk) => [chunk.entry_id, chunk.chunk_index, chunk.content, chunk.has_vector])).toEqual([
      [importedEntryId(created.id, 1, 'api'), 0, null, true],
      [importedEntryId(created.id, 1, 'root'), 0, null, true],
    ]);
    expect(chunks.rows[0].content_sealed.toString('latin1')).not.toContain('Tokens');

    // Imported into an empty brain, the rows came first and the graph was built once over them: it is there, and recall finds them.
    const graph = await db().query(`SELECT indexdef FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%hnsw%'`, [partitionOf(brain)]);
    expect(graph.rows).toHaveLength(1);
    const hits = (await send('POST', `/v1/brains/${brain}/recall`, { query: 'when do the tokens expire', subtree: true })).body.data;
    expect(hits[0]).toMatchObject({ entry_id: importedEntryId(created.id, 1, 'api'), content: expect.stringContaining('Tokens expire after an hour.') });

    // The brain opens them under its own key.
    const api = await get(`/v1/brains/${brain}/entries/${importedEntryId(created.id, 1, 'api')}`);
    expect(api.body).toMatchObject({ title: 'API', body: 'Tokens expire after an hour.\n\nRefresh them with the refresh endpoint.', scope: '/kb/reference', origin: 'reference', source_mount_id: created.id });
    expect(packEntryIdOf(created.id, api.body.entry_id)).toBe('api');

    // Read-only: PUT over it, PATCH and DELETE are refused and leave it as it was.
    const id = importedEntryId(created.id, 1, 'root');
    expectError(await send('PUT', `/v1/brains/${brain}/entries`, { entry_id: id, body: 'Overwritten.' }), 409, 'entry_read_only');
    expectError(await send('PATCH', `/v1/brains/${brain}/entries/${id}`, { body: 'Changed.' }), 409, 'entry_read_only');
    expectError(await send('DELETE', `/v1/brains/${brain}/entries/${id}`), 409, 'entry_read_only');
    expect((await get(`/v1/brains/${brain}/entries/${id}`)).body.body).toBe('The documentation lives in the handbook.');
  });

  it('a strict pack into a strict brain: text and vectors re-sealed under the brain key', async () => {
    const source = await newBrain({ encryption: 'strict' });
    await write(source, { entry_id: 'vault', title: 'Vault', body: 'The vault opens at dawn.' });
    const v1 = await publish(source);
    const brain = await newBrain({ encryption: 'strict' });
    const created = await mount(brain, { pack_id: v1.pack_id, mode: 'materialize' });
    await materialized(brain, created.id, 1);
    const chunks = await db().query(`SELECT content, embedding, embedding_sealed FROM ${partitionOf(brain)}`);
    expect(chunks.rows).toHaveLength(1);
    expect(chunks.rows[0]).toMatchObject({ content: null, embedding: null, embedding_sealed: expect.any(Buffer) });
    const pack = await db().query(`SELECT embedding_sealed FROM ${versionPartitionOf(v1.id)}`);
    expect(chunks.rows[0].embedding_sealed.equals(pack.rows[0].embedding_sealed)).toBe(false);
    expect((await get(`/v1/brains/${brain}/entries/${importedEntryId(created.id, 1, 'vault')}`)).body).toMatchObject({ title: 'Vault', body: 'The vault opens at dawn.' });
  });

  it('PATCH re-materializes: materialized_version moves when the new copy lands, and no row of the old one stays', async () => {
    const source = await newBrain();
    await write(source, { entry_id: 'one', body: 'Kept in both.' });
    await write(source, { entry_id: 'two', body: 'Dropped in version two.' });
    const v1 = await publish(source);
    const brain = await newBrain();
    const created = await mount(brain, { pack_id: v1.pack_id, mode: 'materialize' });
    await materialized(brain, created.id, 1);

    await send('DELETE', `/v1/brains/${source}/entries/two`);
    await write(source, { entry_id: 'three', body: 'New in version two.' });
    await publish(source);
    // Without follow_latest the mount stays on version 1.
    expect((await mountsOf(brain))[0]).toMatchObject({ pinned_version: 1, materialized_version: 1 });

    const patched = await send('PATCH', `/v1/brains/${brain}/mounts/${created.id}`, { version: 2 });
    expect(patched.body).toMatchObject({ pinned_version: 2, status: 'ready' });
    expect([1, 2]).toContain(patched.body.materialized_version);
    await materialized(brain, created.id, 2);
    const rows = await importedRows(brain, created.id);
    expect(rows.map((row) => row.entry_id)).toEqual([importedEntryId(created.id, 2, 'one'), importedEntryId(created.id, 2, 'three')]);
    const chunks = await db().query(`SELECT entry_id FROM ${partitionOf(brain)} ORDER BY entry_id`);
    expect(chunks.rows.map((chunk) => chunk.entry_id)).toEqual([importedEntryId(created.id, 2, 'one'), importedEntryId(created.id, 2, 'three')]);
    // The brain held version 1's rows, so version 2's were linked into its graph, which stayed.
    const hits = (await send('POST', `/v1/brains/${brain}/recall`, { query: 'new in version two' })).body.data;
    expect(hits[0].entry_id).toBe(importedEntryId(created.id, 2, 'three'));
  });

  it('follow_latest re-materializes on a new publish', async () => {
    const source = await newBrain();
    await write(source, { entry_id: 'first', body: 'First fact.' });
    const v1 = await publish(source);
    const brain = await newBrain();
    const created = await mount(brain, { pack_id: v1.pack_id, mode: 'materialize', follow_latest: true });
    await materialized(brain, created.id, 1);
    await write(source, { entry_id: 'second', body: 'Second fact.' });
    await publish(source);
    await materialized(brain, created.id, 2);
    expect((await importedRows(brain, created.id)).map((row) => row.entry_id)).toEqual([importedEntryId(created.id, 2, 'first'), importedEntryId(created.id, 2, 'second')]);
  });

  it('DELETE erases the imported rows; the mount is gone', async () => {
    const { pack_id: packId } = await packWith('To be unmounted.');
    const brain = await newBrain();
    await write(brain, { entry_id: 'native', body: 'My own entry.' });
    const created = await mount(brain, { pack_id: packId, mode: 'materialize' });
    await materialized(brain, created.id, 1);
    expect(await importedRows(brain, created.id)).toHaveLength(1);

    expect((await send('DELETE', `/v1/brains/${brain}/mounts/${created.id}`)).body).toEqual({ id: created.id, object: 'brain_mount', deleted: true });
    expect(await importedRows(brain, created.id)).toEqual([]);
    const chunks = await db().query(`SELECT entry_id FROM ${partitionOf(brain)}`);
    expect(chunks.rows).toEqual([{ entry_id: 'native' }]);
    expect(await mountsOf(brain)).toEqual([]);
    expectError(await send('DELETE', `/v1/brains/${brain}/mounts/${created.id}`), 404, 'resource_not_found');
  });

  it('across accounts: a grant allows materializing; after a revoke the mount stays and a new one is 404', async () => {
    const shared = await packWith('Shared handbook.', { encryption: 'standard' }, {}, other.key);
    expect((await post(`/v1/packs/${shared.pack_id}/grants`, { account_id: developer.accountId }, other.key)).status).toBe(200);
    const brain = await newBrain();
    const created = await mount(brain, { pack_id: shared.pack_id, mode: 'materialize' });
    await materialized(brain, created.id, 1);
    expect((await get(`/v1/brains/${brain}/entries/${importedEntryId(created.id, 1, 'only')}`)).body.body).toBe('Shared handbook.');

    expect((await send('DELETE', `/v1/packs/${shared.pack_id}/grants/${developer.accountId}`, undefined, other.key)).body.revoked).toBe(true);
    expect(await mountsOf(brain)).toEqual([expect.objectContaining({ id: created.id, status: 'ready', materialized_version: 1 })]);
    expect(await importedRows(brain, created.id)).toHaveLength(1);
    const another = await newBrain();
    expectError(await post(`/v1/brains/${another}/mounts`, { pack_id: shared.pack_id, mode: 'materialize' }), 404, 'resource_not_found');
  });
});

describe('around mounts', () => {
  it('reindex answers 409 pack_mounted while a pack is mounted, and runs after the unmount', async () => {
    const { pack_id: packId } = await packWith('Blocks reindex.');
    const brain = await newBrain();
    await write(brain, { body: 'Native.' });
    const created = await mount(brain, { pack_id: packId });
    expectError(await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'text-embedding-3-large' }), 409, 'pack_mounted');
    expectError(await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'text-embedding-3-large', confirm: true }), 409, 'pack_mounted');
    await send('DELETE', `/v1/brains/${brain}/mounts/${created.id}`);
    const estimate = await post(`/v1/brains/${brain}/reindex`, { embedding_model: 'text-embedding-3-large' });
    expect(estimate.status).toBe(200);
    expect(estimate.body).toMatchObject({ object: 'brain.reindex.estimate', native_chunks: 1 });
  });

  it('a deleted brain takes its mounts with it, and takes no new one', async () => {
    const { pack_id: packId } = await packWith('Outlives the brain.');
    const brain = await newBrain();
    await mount(brain, { pack_id: packId, mode: 'materialize' });
    expect((await send('DELETE', `/v1/brains/${brain}`)).status).toBe(200);
    expectError(await post(`/v1/brains/${brain}/mounts`, { pack_id: packId }), 404, 'not_found');
    expectError(await get(`/v1/brains/${brain}/mounts`), 404, 'not_found');
    const left = await pollUntil(async () => (await db().query(`SELECT count(*)::int AS n FROM brain_mounts WHERE brain_id = $1`, [brain])).rows[0].n as number, (n) => n === 0, { timeoutMs: 60_000 });
    expect(left).toBe(0);
  });

  it('imported entry ids stay within 128 characters and unique per mount and version', () => {
    const mountId = 'mnt_ABCDEFGHIJKLMNOPQRSTUVWX';
    expect(importedEntryId(mountId, 3, 'guide')).toBe(`${mountId}:v3:guide`);
    expect(packEntryIdOf(mountId, `${mountId}:v3:guide`)).toBe('guide');
    expect(packEntryIdOf('mnt_ZZZZZZZZZZZZZZZZZZZZZZZZ', `${mountId}:v3:guide`)).toBeNull();
    const long = 'x'.repeat(120);
    const longer = `${'x'.repeat(119)}y`;
    const [a, b] = [importedEntryId(mountId, 3, long), importedEntryId(mountId, 3, longer)];
    expect(a.length).toBeLessThanOrEqual(128);
    expect(a).toMatch(/^[A-Za-z0-9_.:-]{1,128}$/);
    expect(a).not.toBe(b);
    expect(a).not.toBe(importedEntryId(mountId, 4, long));
    expect(packEntryIdOf(mountId, a)).toBeNull();
  });
});

describe('a worker killed mid-import', () => {
  let world: WorkerWorld;

  beforeAll(async () => {
    // A killed worker's import is taken over within seconds.
    world = await startWorkerWorld({ PACK_MATERIALIZE_HEARTBEAT_TIMEOUT_SECONDS: '3' });
  }, 120_000);
  afterAll(() => world?.close());

  it('leaves the mount pending with no row or ready with all of them, then a new worker imports it whole', async () => {
    const { gateway: platform, worker } = world;
    const as = (method: string, path: string, json?: unknown) => call(platform.baseUrl, path, { method, ...(json !== undefined && { json }), headers: bearer(world.developer.key) });
    const q = (sql: string, params: unknown[] = []) => platform.platform.db.query(sql, params);

    // 600 entries of 5 chunks each: the import spans pages, so the kill lands inside its transaction.
    const source = (await as('POST', '/v1/brains', { name: 'Big source', memory_policy: { chunking: { strategy: 'paragraph', max_chars: 200 } } })).body.id as string;
    const paragraph = (i: number, p: number) => `Entry ${i} paragraph ${p}: ${'the procedure continues with more careful detail. '.repeat(3)}`.slice(0, 150);
    // Ten at a time: writes to one brain queue on its row, and a queue longer than the pool waits past its connection timeout under load.
    for (let start = 0; start < 600; start += 10) {
      const written = await Promise.all(Array.from({ length: 10 }, (_, k) => start + k).map((i) =>
        as('PUT', `/v1/brains/${source}/entries`, { entry_id: `e${String(i).padStart(4, '0')}`, body: Array.from({ length: 5 }, (_, p) => paragraph(i, p)).join('\n\n') })));
      expect(written.filter((res) => res.status !== 200)).toEqual([]);
    }
    const published = await as('POST', `/v1/brains/${source}/publish`, {});
    expect(published.body).toMatchObject({ status: 'ready', entry_count: 600, chunk_count: 3_000 });

    const brain = (await as('POST', '/v1/brains', { name: 'Consumer', encryption: 'standard' })).body.id as string;
    const created = (await as('POST', `/v1/brains/${brain}/mounts`, { pack_id: published.body.pack_id, mode: 'materialize' })).body;
    expect(created.status).toBe('pending');

    // The import's transaction has begun writing the brain's chunks: kill the worker now.
    const writing = async () => (await q(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = $1 AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()`,
      [partitionOf(brain)],
    )).rows[0].n as number;
    await pollUntil(writing, (n) => n > 0, { everyMs: 10, timeoutMs: 90_000, context: () => worker.output().slice(-20).join('\n') });
    await worker.kill('SIGKILL');

    const state = async () => {
      const mounted = (await q(`SELECT status, materialized_version FROM brain_mounts WHERE id = $1`, [created.id])).rows[0];
      const entries = (await q(`SELECT count(*)::int AS n FROM brain_entries WHERE brain_id = $1`, [brain])).rows[0].n as number;
      const chunks = (await q(`SELECT count(*)::int AS n FROM ${partitionOf(brain)}`)).rows[0].n as number;
      return { status: mounted.status, materialized_version: mounted.materialized_version, entries, chunks };
    };
    expect([
      { status: 'pending', materialized_version: null, entries: 0, chunks: 0 },
      { status: 'ready', materialized_version: 1, entries: 600, chunks: 3_000 },
    ]).toContainEqual(await state());

    await worker.restart();
    const done = await pollUntil(state, (seen) => seen.status === 'ready', { timeoutMs: 120_000, context: () => worker.output().slice(-20).join('\n') });
    expect(done).toEqual({ status: 'ready', materialized_version: 1, entries: 600, chunks: 3_000 });
    const distinct = await q(`SELECT count(DISTINCT (version_id, chunk_index))::int AS n FROM ${partitionOf(brain)}`);
    expect(distinct.rows[0].n).toBe(3_000);
    const opened = await as('GET', `/v1/brains/${brain}/entries/${importedEntryId(created.id, 1, 'e0599')}`);
    expect(opened.body.body).toContain('Entry 599 paragraph 4');
  }, 300_000);
});
