import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { entitiesNamedIn, linkEntities, normalizeEntityName } from '../shared/brains/entities.js';
import { scopeFilter } from '../shared/brains/recall.js';
import { partitionOf } from '../shared/brains/repository.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { expectError } from './support/expect-error.js';
import { bearer, call, createDeveloper, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * A brain's entities (spec 2) against the real services: normalisation and aliases, the list and
 * one entity with its relations, cross-brain and cross-tenant 404s, recall's graph factor (plaintext
 * and strict brains) and forget by entity. The learn pass links entities as it writes memories; here
 * entries are written with PUT and linked with linkEntities through the platform's pool, as it will.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let other: TestDeveloper;

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 50_000_000));
  other = await createDeveloper(gateway.platform, { creditMicros: 5_000_000, scopes: ['admin'] });
});
afterAll(async () => {
  await emulated?.close();
});

const send = (method: string, path: string, json?: unknown, key = developer.key) => call(gateway.baseUrl, path, { method, ...(json !== undefined && { json }), headers: bearer(key) });
const post = (path: string, json: unknown, key?: string) => send('POST', path, json, key);
const get = (path: string, key?: string) => send('GET', path, undefined, key);
const db = () => gateway.platform.db;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function newBrain(body: Record<string, unknown> = {}): Promise<string> {
  const created = await post('/v1/brains', { name: `brain ${Math.random()}`, ...body });
  expect(created.status).toBe(200);
  return created.body.id;
}

async function write(brainId: string, entry: Record<string, unknown>): Promise<string> {
  const written = await send('PUT', `/v1/brains/${brainId}/entries`, { class: 'memory', type: 'decision', ...entry });
  expect(written.status, JSON.stringify(written.body)).toBe(200);
  return written.body.entry_id;
}

const entity = async (brainId: string, entityId: string) => {
  const res = await get(`/v1/brains/${brainId}/entities/${entityId}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};
const listed = async (brainId: string, query: string) => {
  const res = await get(`/v1/brains/${brainId}/entities?${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};

describe('entity names', () => {
  it('normalises case, whitespace, leading articles, a possessive and surrounding punctuation', () => {
    expect(normalizeEntityName('  The   ACME  Corp. ')).toBe('acme corp');
    expect(normalizeEntityName("Dana's")).toBe('dana');
    expect(normalizeEntityName('"an Apple’s"')).toBe('apple');
    expect(normalizeEntityName('(Node.js)')).toBe('node.js');
    expect(normalizeEntityName('Ｃ＃')).toBe('c#');
    expect(normalizeEntityName('Acme Corporation')).not.toBe(normalizeEntityName('Acme Corp'));
  });

  it('files two spellings as one entity, merges aliases, is idempotent, and keeps scopes apart', async () => {
    const brain = await newBrain();
    const first = await write(brain, { body: 'Acme Corp signed the contract.', scope: '/team' });
    const second = await write(brain, { body: 'ACME renewed the support plan.', scope: '/team' });
    const third = await write(brain, { body: 'Acme Corporation moved offices.', scope: '/team' });
    const elsewhere = await write(brain, { body: 'Acme is also a cartoon company.', scope: '/fun' });

    const [acme] = await linkEntities(db(), brain, '/team', first, [{ name: 'The  Acme Corp.', aliases: ['ACME'] }], []);
    expect(acme).toMatch(/^bent_[0-9A-Za-z]{24}$/);
    // By an alias of the entity, and by an alias equal to its name (then its own name becomes an alias).
    expect(await linkEntities(db(), brain, '/team', second, [{ name: 'acme' }], [])).toEqual([acme]);
    expect(await linkEntities(db(), brain, '/team', third, [{ name: 'Acme Corporation', aliases: ["Acme Corp's"] }], [])).toEqual([acme]);
    const before = await entity(brain, acme!);
    expect(before).toMatchObject({ object: 'brain.entity', id: acme, brain_id: brain, scope: '/team', name: 'The Acme Corp.', entries: 3, relations: [] });
    expect([...before.aliases].sort()).toEqual(['acme', 'acme corporation']);

    // Running the same link again changes nothing.
    await linkEntities(db(), brain, '/team', third, [{ name: 'Acme Corporation', aliases: ["Acme Corp's"] }], []);
    await linkEntities(db(), brain, '/team', first, [{ name: 'The  Acme Corp.', aliases: ['ACME'] }], []);
    expect(await entity(brain, acme!)).toEqual(before);
    const rows = await db().query(`SELECT (SELECT count(*)::int FROM brain_entities WHERE brain_id = $1) AS entities, (SELECT count(*)::int FROM brain_entity_links WHERE brain_id = $1) AS links`, [brain]);
    expect(rows.rows[0]).toEqual({ entities: 1, links: 3 });

    // Another scope holds its own entity of the same name.
    const [fun] = await linkEntities(db(), brain, '/fun', elsewhere, [{ name: 'Acme' }], []);
    expect(fun).not.toBe(acme);
  });
});

describe('GET entities', () => {
  let brain: string;
  const ids: Record<string, string | undefined> = {};
  beforeAll(async () => {
    brain = await newBrain();
    const atRoot = await write(brain, { body: 'The company is called Globex.', scope: '/' });
    const atTeam = await write(brain, { body: 'Dana works at Acme.', scope: '/team' });
    const atApi = await write(brain, { body: 'The API team uses Postgres.', scope: '/team/api' });
    const atTeams = await write(brain, { body: 'Eve is on the teams list.', scope: '/teams' });
    const more = await write(brain, { body: 'Dana chairs the Monday meeting.', scope: '/team' });
    [ids.globex] = await linkEntities(db(), brain, '/', atRoot, [{ name: 'Globex' }], []);
    [ids.dana, ids.acme] = await linkEntities(db(), brain, '/team', atTeam, [{ name: 'Dana', aliases: ['Dana Scully'] }, { name: 'Acme' }], [{ from: 'Dana', relation: 'Works at', to: 'the Acme' }]);
    [ids.postgres, ids.team] = await linkEntities(db(), brain, '/team/api', atApi, [{ name: 'Postgres' }, { name: 'API team' }], [{ from: 'API team', relation: 'uses', to: 'postgres' }]);
    [ids.eve] = await linkEntities(db(), brain, '/teams', atTeams, [{ name: 'Eve' }], []);
    await linkEntities(db(), brain, '/team', more, [{ name: 'Dana' }], []);
    // A deleted entry no longer counts among an entity's entries.
    expect((await send('DELETE', `/v1/brains/${brain}/entries/${more}`)).status).toBe(200);
  });

  it('lists the entities at or below a scope (not above, not a sibling sharing a prefix), paginated', async () => {
    const page = await listed(brain, 'scope=/team');
    expect(page).toMatchObject({ object: 'list', has_more: false, limit: 100, offset: 0 });
    expect(page.data.map((row: { scope: string; name: string }) => `${row.scope} ${row.name}`)).toEqual(['/team Acme', '/team Dana', '/team/api API team', '/team/api Postgres']);
    expect(page.data.find((row: { id: string }) => row.id === ids.dana)).toMatchObject({ object: 'brain.entity', entries: 1, aliases: ['dana scully'] });
    expect(page.data[0].relations).toBeUndefined();
    expect((await listed(brain, 'scope=/')).data).toHaveLength(6);
    const first = await listed(brain, 'scope=/team&limit=1&offset=1');
    expect(first).toMatchObject({ has_more: true, limit: 1, offset: 1 });
    expect(first.data.map((row: { id: string }) => row.id)).toEqual([ids.dana]);
    expectError(await get(`/v1/brains/${brain}/entities`), 400, 'invalid_brain_scope');
    expectError(await get(`/v1/brains/${brain}/entities?scope=/&limit=501`), 400, 'invalid_request');
  });

  it('looks a name up exactly, after normalisation, by name or alias', async () => {
    expect((await listed(brain, `scope=/&name=${encodeURIComponent("  dana SCULLY's ")}`)).data.map((row: { id: string }) => row.id)).toEqual([ids.dana]);
    expect((await listed(brain, 'scope=/&name=The%20Acme')).data.map((row: { id: string }) => row.id)).toEqual([ids.acme]);
    expect((await listed(brain, 'scope=/&name=Acm')).data).toEqual([]);
    // The name is looked up at or below the scope only.
    expect((await listed(brain, 'scope=/team/api&name=Dana')).data).toEqual([]);
  });

  it('reads one entity with the relations it states and those naming it', async () => {
    const dana = await entity(brain, ids.dana!);
    expect(dana).toMatchObject({ name: 'Dana', scope: '/team', entries: 1, relations: [{ relation: 'works at', to: { id: ids.acme, name: 'Acme' } }] });
    expect(Date.parse(dana.created_at)).not.toBeNaN();
    expect((await entity(brain, ids.acme!)).relations).toEqual([{ relation: 'works at', from: { id: ids.dana, name: 'Dana' } }]);
    expect((await entity(brain, ids.postgres!)).relations).toEqual([{ relation: 'uses', from: { id: ids.team, name: 'API team' } }]);
    expect((await entity(brain, ids.globex!)).relations).toEqual([]);
  });

  it("answers 404 for another brain's entity, another tenant, and an unknown or malformed id", async () => {
    const second = await newBrain();
    expectError(await get(`/v1/brains/${second}/entities/${ids.dana}`), 404, 'not_found');
    expect((await listed(second, 'scope=/')).data).toEqual([]);
    expectError(await get(`/v1/brains/${brain}/entities/${ids.dana}`, other.key), 404, 'not_found');
    expectError(await get(`/v1/brains/${brain}/entities?scope=/`, other.key), 404, 'not_found');
    expectError(await get(`/v1/brains/${brain}/entities/bent_000000000000000000000000`), 404, 'not_found');
    expectError(await get(`/v1/brains/${brain}/entities/not-an-entity`), 404, 'not_found');
  });
});

describe('recall graph factor', () => {
  const QUERY = 'when is the budget review with Dana';
  type Hit = { entry_id: string; score: number; factors: { cosine: number; tier_weight: number; recency: number; usage: number; graph: number; score: number } };

  for (const encryption of ['none', 'strict'] as const) {
    it(`${encryption}: linked hits get 1, a neighbour 0.9, the rest 0.8, and the ranking follows; a query naming no entity leaves all at 1`, async () => {
      const brain = await newBrain({ encryption });
      // The emulator's embeddings give: unrelated nearest the query, then named, then neighbour.
      const unrelated = await write(brain, { body: 'The budget review is on Friday.' });
      const named = await write(brain, { body: "Dana's budget review notes are shared." });
      const neighbour = await write(brain, { body: 'Acme budget review.' });
      const recall = async (query: string) => {
        const res = await post(`/v1/brains/${brain}/recall`, { query, explain: true, top_k: 10 });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return res.body.data as Hit[];
      };
      const order = (hits: Hit[]) => hits.map((hit) => hit.entry_id);
      const graphs = (hits: Hit[]) => Object.fromEntries(hits.map((hit) => [hit.entry_id, hit.factors.graph]));

      // No entities yet: every hit has graph 1 and the cosine decides.
      const plain = await recall(QUERY);
      expect(order(plain)).toEqual([unrelated, named, neighbour]);
      expect(graphs(plain)).toEqual({ [unrelated]: 1, [named]: 1, [neighbour]: 1 });

      await linkEntities(db(), brain, '/', named, [{ name: 'Dana' }, { name: 'Acme Corp', aliases: ['Acme'] }], [{ from: 'Dana', relation: 'works at', to: 'Acme' }]);
      // The neighbour's entry names Acme alone; Dana reaches it over the edge.
      await linkEntities(db(), brain, '/', neighbour, [{ name: 'Acme' }], []);
      // An entity nobody's query names, linked to the unrelated entry, changes nothing.
      await linkEntities(db(), brain, '/', unrelated, [{ name: 'Friday' }], []);

      const boosted = await recall(QUERY);
      expect(graphs(boosted)).toEqual({ [named]: 1, [neighbour]: 0.9, [unrelated]: 0.8 });
      expect(order(boosted)).toEqual([named, neighbour, unrelated]);
      for (const hit of boosted) {
        const f = hit.factors;
        expect(f.score).toBeCloseTo(f.cosine * f.tier_weight * f.recency * f.usage * f.graph, 5);
        expect(hit.score).toBeLessThanOrEqual(f.cosine);
      }
      // The cosines are those of the recall before: only the graph factor moved the ranking.
      const cosineOf = (hits: Hit[], id: string) => hits.find((hit) => hit.entry_id === id)!.factors.cosine;
      for (const id of [named, neighbour, unrelated]) expect(cosineOf(boosted, id)).toBeCloseTo(cosineOf(plain, id), 5);

      // Linked to a named entity and to a neighbour, an entry takes the named factor; named by an alias, the same.
      const byAlias = await recall('when is the budget review with acme');
      expect(graphs(byAlias)).toEqual({ [named]: 1, [neighbour]: 1, [unrelated]: 0.8 });
      // "Dana" inside another word is no mention.
      expect(graphs(await recall('when is the budget review with Danae'))).toEqual({ [named]: 1, [neighbour]: 1, [unrelated]: 1 });
      expect(graphs(await recall('when is the budget review'))).toEqual({ [named]: 1, [neighbour]: 1, [unrelated]: 1 });
    });
  }

  it('sees only the entities in the recall scopes', async () => {
    const brain = await newBrain();
    const root = await write(brain, { body: 'The budget review is on Friday.' });
    const deep = await write(brain, { body: "Dana's budget review notes are shared.", scope: '/team' });
    // The entity lives in /team: a recall at / does not see it, one at /team does.
    await linkEntities(db(), brain, '/team', deep, [{ name: 'Dana' }], []);
    const graphsAt = async (scope: string) => {
      const res = await post(`/v1/brains/${brain}/recall`, { query: QUERY, scope, explain: true });
      return Object.fromEntries(res.body.data.map((hit: Hit) => [hit.entry_id, hit.factors.graph]));
    };
    expect(await graphsAt('/')).toEqual({ [root]: 1 });
    expect(await graphsAt('/team')).toEqual({ [root]: 0.8, [deep]: 1 });
    expect(await entitiesNamedIn(db(), brain, scopeFilter('/', true, false), QUERY)).toEqual([]);
    expect((await entitiesNamedIn(db(), brain, scopeFilter('/', true, true), QUERY)).map((named) => [named.name, named.scope])).toEqual([['Dana', '/team']]);
    expect(await entitiesNamedIn(db(), brain, scopeFilter('/team', true, false), 'when is the budget review with Danae')).toEqual([]);
  });
});

describe('forget by entity', () => {
  it('previews by name or id, refuses a stale preview, then erases the entity, its edges and every version of its entries', async () => {
    const brain = await newBrain();
    const decision = await write(brain, { entry_id: 'dana-decision', body: 'Dana decided the launch moves to May.', scope: '/team' });
    await write(brain, { entry_id: 'dana-decision', body: 'Dana decided the launch moves to June.', scope: '/team' });
    const note = await write(brain, { entry_id: 'dana-note', body: 'Dana prefers written updates.', scope: '/team/api' });
    const packed = await write(brain, { entry_id: 'dana-packed', body: 'A pack says Dana leads the launch.', scope: '/team' });
    const kept = await write(brain, { entry_id: 'acme-only', body: 'Acme ships the launch hardware.', scope: '/team' });
    await db().query(`UPDATE brain_entries SET origin = 'reference' WHERE brain_id = $1 AND entry_id = $2`, [brain, packed]);
    const [dana, acme] = await linkEntities(db(), brain, '/team', decision, [{ name: 'Dana' }, { name: 'Acme' }], [{ from: 'Dana', relation: 'works with', to: 'Acme' }]);
    // The same name in another scope is another entity; forget by name takes both.
    const [danaApi] = await linkEntities(db(), brain, '/team/api', note, [{ name: 'dana' }], []);
    await linkEntities(db(), brain, '/team', packed, [{ name: 'Dana' }], []);
    await linkEntities(db(), brain, '/team', kept, [{ name: 'Acme' }], []);
    await sleep(20);
    const before = new Date().toISOString();
    await sleep(20);

    const forget = (body: Record<string, unknown>) => post(`/v1/brains/${brain}/forget`, body);
    const byName = await forget({ entity: "The Dana's", dry_run: true });
    expect(byName.body).toMatchObject({ object: 'brain.forget', dry_run: true, would_delete: { native: 2 }, would_skip: { reference: 1 } });
    expect(byName.body.preview_token).toMatch(/^fpv_/);
    expect((await forget({ entity: 'dana', dry_run: true })).body.preview_token).toBe(byName.body.preview_token);
    // By id: one entity, a different set.
    const byId = await forget({ entity: danaApi, dry_run: true });
    expect(byId.body.would_delete).toEqual({ native: 1 });
    expect(byId.body.preview_token).not.toBe(byName.body.preview_token);

    // A new entry linked to Dana since the preview makes it stale: nothing is erased.
    const late = await write(brain, { entry_id: 'dana-late', body: 'Dana is out on Friday.', scope: '/team' });
    await linkEntities(db(), brain, '/team', late, [{ name: 'Dana' }], []);
    expectError(await forget({ entity: 'Dana', preview_token: byName.body.preview_token }), 409, 'preview_stale', { param: 'preview_token' });
    expect((await get(`/v1/brains/${brain}/entries/${decision}`)).status).toBe(200);

    const fresh = await forget({ entity: 'Dana', dry_run: true });
    expect(fresh.body.would_delete).toEqual({ native: 3 });
    const erased = await forget({ entity: 'Dana', preview_token: fresh.body.preview_token });
    expect(erased.body).toEqual({ object: 'brain.forget', dry_run: false, deleted: { native: 3 }, skipped: { reference: 1 } });

    for (const id of [decision, note, late]) expectError(await get(`/v1/brains/${brain}/entries/${id}`), 404, 'not_found');
    expect((await get(`/v1/brains/${brain}/entries/${packed}`)).status).toBe(200);
    expect((await get(`/v1/brains/${brain}/entries/${kept}`)).status).toBe(200);
    for (const id of [dana, danaApi]) expectError(await get(`/v1/brains/${brain}/entities/${id}`), 404, 'not_found');
    // Acme stays, without the edge and without the erased entry.
    expect(await entity(brain, acme!)).toMatchObject({ entries: 1, relations: [] });
    const versions = await db().query(`SELECT count(*)::int AS n FROM brain_entries WHERE brain_id = $1 AND entry_id = ANY($2)`, [brain, [decision, note, late]]);
    const chunks = await db().query(`SELECT count(*)::int AS n FROM ${partitionOf(brain)} WHERE entry_id = ANY($1)`, [[decision, note, late]]);
    const links = await db().query(`SELECT count(*)::int AS n FROM brain_entity_links WHERE brain_id = $1 AND entry_id = ANY($2)`, [brain, [decision, note, late, packed]]);
    expect([versions.rows[0].n, chunks.rows[0].n, links.rows[0].n]).toEqual([0, 0, 0]);
    // Erased through history: recall as of before the forget does not bring them back.
    const then = await post(`/v1/brains/${brain}/recall`, { query: 'what did Dana decide about the launch', scope: '/team/api', as_of: before, top_k: 20 });
    expect(then.status).toBe(200);
    expect(then.body.data.map((hit: { entry_id: string }) => hit.entry_id).filter((id: string) => [decision, note, late].includes(id))).toEqual([]);
    expect(then.body.data.map((hit: { entry_id: string }) => hit.entry_id)).toContain(kept);

    expectError(await forget({ entity: 'Dana' }), 404, 'not_found', { param: 'entity' });
    expectError(await forget({ entity: dana, dry_run: true }), 404, 'not_found', { param: 'entity' });
    expectError(await post(`/v1/brains/${brain}/forget`, { entity: acme }, other.key), 404, 'not_found');
    expectError(await forget({ entity: 'Acme', scope: '/team' }), 400, 'invalid_request');
    expect((await get(`/v1/brains/${brain}/entities/${acme}`)).status).toBe(200);
  });
});
