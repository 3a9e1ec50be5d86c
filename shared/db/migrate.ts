import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runner } from 'node-pg-migrate';

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations');

/** Creates the database named in `databaseUrl` when it does not exist yet (on the same server). */
export async function ensureDatabase(databaseUrl: string): Promise<{ created: boolean }> {
  const target = new URL(databaseUrl);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (!name) throw new Error('DATABASE_URL names no database');
  const maintenance = new URL(databaseUrl);
  maintenance.pathname = '/postgres';
  const client = new pg.Client({ connectionString: maintenance.toString() });
  await client.connect();
  try {
    const existing = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (existing.rowCount) return { created: false };
    try {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
    } catch (error) {
      // Another process created it between our check and our CREATE.
      if ((error as { code?: string }).code === '42P04') return { created: false };
      throw error;
    }
    return { created: true };
  } finally {
    await client.end();
  }
}

/** Applies every pending migration in order; node-pg-migrate holds an advisory lock while it runs. */
export async function runMigrations(databaseUrl: string, log: (message: string) => void = () => undefined): Promise<string[]> {
  const applied = await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    migrationsTable: 'pgmigrations',
    checkOrder: true,
    log,
    logger: { debug: () => undefined, info: log, warn: log, error: log },
    verbose: false,
  });
  return applied.map((migration) => migration.name);
}

export async function prepareDatabase(databaseUrl: string, log?: (message: string) => void): Promise<{ created: boolean; applied: string[] }> {
  const { created } = await ensureDatabase(databaseUrl);
  const applied = await runMigrations(databaseUrl, log);
  return { created, applied };
}
