import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../shared/accounts/accounts.js';
import { postLedgerEntry } from '../shared/accounts/repository.js';
import { ConfigError, loadConfig } from '../shared/config.js';
import { readdirSync } from 'node:fs';
import { MIGRATIONS_DIR, runMigrations } from '../shared/db/migrate.js';
import { withIndexBuildMemory, withTransaction } from '../shared/db/pool.js';
import { newId } from '../shared/ids.js';
import { startConsumers } from '../shared/platform/queues.js';
import { createRedis } from '../shared/platform/redis.js';
import { cosineTopK } from '../shared/scoring/cosine.js';
import { createDeveloper, startTestPlatform, type TestPlatform } from './support/test-platform.js';

let gateway: TestPlatform;
beforeAll(async () => {
  gateway = await startTestPlatform();
});
afterAll(() => gateway?.close());

describe('migrations', () => {
  it('enabled pgvector first, and vectors come back as numbers', async () => {
    const { rows } = await gateway.platform.db.query(`SELECT extversion FROM pg_extension WHERE extname = 'vector'`);
    expect(rows[0].extversion).toMatch(/^\d+\.\d+/);
    const { rows: distance } = await gateway.platform.db.query(`SELECT '[1,2,3]'::vector AS v, '[1,0]'::vector <=> '[0,1]'::vector AS cosine_distance`);
    expect(distance[0].v).toEqual([1, 2, 3]);
    expect(distance[0].cosine_distance).toBeCloseTo(1, 6);
  });

  it('applies nothing the second time', async () => {
    expect(await runMigrations(gateway.config.DATABASE_URL)).toEqual([]);
    const { rows } = await gateway.platform.db.query('SELECT name FROM pgmigrations ORDER BY id');
    const files = readdirSync(MIGRATIONS_DIR).filter((file) => file.endsWith('.sql')).sort().map((file) => file.replace(/\.sql$/, ''));
    expect(rows.map((row) => row.name)).toEqual(files);
    expect(files[0]).toBe('001_enable-vector');
  });
});

describe('index builds', () => {
  it('run with the configured maintenance memory, which ends with their transaction', async () => {
    const { db, config } = gateway.platform;
    expect(config.INDEX_BUILD_MEMORY_MB).toBe(1024);
    const inside = await withIndexBuildMemory(db, 97, async (client) => (await client.query('SHOW maintenance_work_mem')).rows[0].maintenance_work_mem);
    expect(inside).toBe('97MB');
    const { rows } = await db.query('SHOW maintenance_work_mem');
    expect(rows[0].maintenance_work_mem).not.toBe('97MB');
  });
});

describe('wallet ledger', () => {
  it('moves the balance and writes the ledger row together, and never below zero', async () => {
    const developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000 });
    await postLedgerEntry(gateway.platform.db, { accountId: developer.accountId, amountMicros: -400_000, kind: 'usage' });
    expect(await getBalance(gateway.platform.db, developer.accountId)).toMatchObject({ balanceMicros: 600_000 });
    await expect(postLedgerEntry(gateway.platform.db, { accountId: developer.accountId, amountMicros: -600_001, kind: 'usage' })).rejects.toThrow(/check constraint/);
    await expect(
      withTransaction(gateway.platform.db, async (tx) => {
        await postLedgerEntry(tx, { accountId: developer.accountId, amountMicros: -100_000, kind: 'usage' });
        throw new Error('the call failed after the debit');
      }),
    ).rejects.toThrow('the call failed');
    const { rows } = await gateway.platform.db.query('SELECT amount_micros, balance_after_micros FROM wallet_ledger WHERE account_id = $1 ORDER BY id', [developer.accountId]);
    expect(rows).toEqual([
      { amount_micros: '1000000', balance_after_micros: '1000000' },
      { amount_micros: '-400000', balance_after_micros: '600000' },
    ]);
    expect(await getBalance(gateway.platform.db, developer.accountId)).toMatchObject({ balanceMicros: 600_000 });
  });
});

describe('BullMQ queues', () => {
  it('delivers a job from the producer registry to a consumer under the platform prefix only', async () => {
    const { platform } = gateway;
    const blocking = createRedis(platform.config.REDIS_URL, 'blocking', platform.logger);
    const seen: unknown[] = [];
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    const [consumer] = startConsumers(
      [{ queue: 'roundtrip', process: async (job) => { seen.push(job.data); finished(); return 'ok'; } }],
      blocking,
      platform.queues.prefix,
      platform.logger,
    );
    try {
      await platform.queues.queue<{ n: number }>('roundtrip').add('probe', { n: 7 });
      await done;
      expect(seen).toEqual([{ n: 7 }]);
      const keys = await platform.redis.keys(`${platform.queues.prefix}:roundtrip:*`);
      expect(keys.length).toBeGreaterThan(0);
      expect(platform.queues.prefix.startsWith(`svct:${gateway.tag}`)).toBe(true);
    } finally {
      await consumer!.close();
      await blocking.quit();
    }
  });
});

describe('CPU pool: cosine top-k', () => {
  const dims = 64;
  const rows = 500;
  const random = mulberry32(7);
  const candidates = Float32Array.from({ length: rows * dims }, () => random() * 2 - 1);
  const query = Float32Array.from({ length: dims }, () => random() * 2 - 1);

  it('matches a brute-force ranking', () => {
    const expected = bruteForce(query, candidates, dims).slice(0, 10);
    const { indices, scores } = cosineTopK({ query, candidates, dims, k: 10 });
    expect([...indices]).toEqual(expected.map((entry) => entry.row));
    expected.forEach((entry, i) => expect(scores[i]).toBeCloseTo(entry.score, 5));
  });

  it('gives the same answer on a pool thread, with the arrays transferred', async () => {
    const expected = cosineTopK({ query, candidates, dims, k: 5 });
    const queryCopy = query.slice();
    const candidatesCopy = candidates.slice();
    const result = await gateway.platform.cpu.cosineTopK({ query: queryCopy, candidates: candidatesCopy, dims, k: 5 });
    expect([...result.indices]).toEqual([...expected.indices]);
    expect(candidatesCopy.byteLength).toBe(0); // transferred, not copied
  });

  it('handles k larger than the rows and zero vectors', () => {
    const result = cosineTopK({ query: new Float32Array([0, 0]), candidates: new Float32Array([1, 0, 0, 1]), dims: 2, k: 5 });
    expect(result.indices).toHaveLength(2);
    expect([...result.scores]).toEqual([0, 0]);
    expect(() => cosineTopK({ query: new Float32Array(3), candidates: new Float32Array(4), dims: 2, k: 1 })).toThrow(RangeError);
  });
});

describe('configuration', () => {
  it('names every invalid variable at once', () => {
    expect(() => loadConfig({ API_PORT: 'eighty', LOG_LEVEL: 'loud', JSON_BODY_LIMIT: 'huge' })).toThrow(ConfigError);
    try {
      loadConfig({ API_PORT: 'eighty', LOG_LEVEL: 'loud', JSON_BODY_LIMIT: 'huge' });
    } catch (error) {
      expect((error as Error).message).toMatch(/API_PORT[\s\S]*LOG_LEVEL|LOG_LEVEL[\s\S]*API_PORT/);
      expect((error as Error).message).toContain('JSON_BODY_LIMIT');
    }
  });

  it('has defaults for everything and treats empty values as unset', () => {
    const config = loadConfig({ TEMPORAL_ADDRESS: '', JSON_BODY_LIMIT: '512kb' });
    expect(config.temporalAddress).toBe('127.0.0.1:7233');
    expect(config.JSON_BODY_LIMIT).toBe(512 * 1024);
    expect(config.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:5432/svc_platform');
  });
});

describe('identifiers', () => {
  it('are the prefix and 24 base62 characters, and do not repeat', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => newId('cus_')));
    expect(ids.size).toBe(10_000);
    for (const id of [...ids].slice(0, 100)) expect(id).toMatch(/^cus_[0-9A-Za-z]{24}$/);
  });
});

function bruteForce(query: Float32Array, candidates: Float32Array, dims: number) {
  const norm = (v: Float32Array, offset: number) => Math.sqrt(Array.from({ length: dims }, (_, i) => v[offset + i]! ** 2).reduce((a, b) => a + b, 0));
  const scores = [];
  for (let row = 0; row < candidates.length / dims; row++) {
    let dot = 0;
    for (let i = 0; i < dims; i++) dot += query[i]! * candidates[row * dims + i]!;
    scores.push({ row, score: dot / (norm(query, 0) * norm(candidates, row * dims)) });
  }
  return scores.sort((a, b) => b.score - a.score);
}

function mulberry32(seed: number): () => number {
  let state = seed;
  return () => {
    state |= 0;
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
