import pg from 'pg';
import { fromSql } from 'pgvector';

export type Db = pg.Pool;
/** Anything that runs a query: the pool, or a client inside a transaction. */
export type Queryable = Pick<pg.PoolClient, 'query'>;

interface Logger {
  warn(details: object, message: string): void;
}

/** Parsers of the pgvector types, filled by registerVectorTypes once the oids are known. */
const vectorParsers = new WeakMap<pg.Pool, Map<number, (text: string) => unknown>>();

export function createPool(connectionString: string, max: number, logger: Logger): Db {
  const parsers = new Map<number, (text: string) => unknown>();
  const types = {
    getTypeParser: ((oid: number, format?: 'text' | 'binary') => parsers.get(oid) ?? pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
  };
  const pool = new pg.Pool({ connectionString, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 5_000, types });
  vectorParsers.set(pool, parsers);
  // An idle client losing its server must not crash the process; the next checkout reconnects.
  pool.on('error', (error) => logger.warn({ err: error }, 'idle PostgreSQL client failed'));
  // Nor may a checked-out one: pg-pool listens for errors only on idle clients, and a client whose
  // server goes away (PostgreSQL stopped or restarted) emits 'error' even when its query already
  // failed with the same cause. Unheard, that event ends the process: the fault suite saw the API
  // and the worker exit on it. The query's own rejection reaches the request (503); the dead client
  // is dropped from the pool when it is released.
  pool.on('connect', (client) => client.on('error', (error) => logger.warn({ err: error }, 'PostgreSQL connection lost while in use')));
  return pool;
}

/**
 * Teaches the pool the oids of pgvector's types, so vectors arrive as number[] rather than text.
 * One query for the whole pool, before vector queries run; the oids never change for a database.
 */
export async function registerVectorTypes(db: Db): Promise<void> {
  const { rows } = await db.query<{ oid: number }>(`SELECT oid FROM pg_type WHERE typname IN ('vector', 'halfvec', 'sparsevec')`);
  if (rows.length === 0) throw new Error('the vector extension is not installed in this database');
  const parsers = vectorParsers.get(db)!;
  for (const { oid } of rows) parsers.set(Number(oid), (text) => fromSql(text));
}

/** Runs `work` in one transaction; the state change and the events it causes commit together. */
export async function withTransaction<T>(db: Db, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/**
 * Runs an index build in a transaction with `memoryMb` of maintenance memory (INDEX_BUILD_MEMORY_MB)
 * instead of the server's default 64MB. An HNSW graph that fits in memory is built there and
 * written once; one that outgrows it is inserted into on disk page by page. 100,000 vectors of
 * 1,536 dimensions (a 781 MB graph) built in 584 s with 64MB and 79 s with 1GB (2 cores, the
 * build parallel in both); serially with 1GB, 142 s. PostgreSQL takes the memory as the graph
 * grows, except a parallel build, which maps it as shared memory up front (a container needs
 * /dev/shm that large: docker-compose.yml). The setting ends with the transaction.
 */
export function withIndexBuildMemory<T>(db: Db, memoryMb: number, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withTransaction(db, async (client) => {
    await useIndexBuildMemory(client, memoryMb);
    return work(client);
  });
}

/** The same memory for an index built inside a transaction already open. */
export async function useIndexBuildMemory(client: Queryable, memoryMb: number): Promise<void> {
  await client.query(`SET LOCAL maintenance_work_mem = '${Math.floor(memoryMb)}MB'`);
}
