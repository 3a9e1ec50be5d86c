import pg from 'pg';

/**
 * Test databases live on the configured PostgreSQL server. Every name carries the pid of the
 * `npm test` run that made it, so a later run can drop what a killed run left behind.
 */
export const TEST_DB_PREFIX = 'svct_';

export function serverUrl(databaseUrl: string, database = 'postgres'): string {
  const url = new URL(databaseUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

export async function withServer<T>(databaseUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl(databaseUrl) });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export async function dropDatabase(client: pg.Client, name: string): Promise<void> {
  await client.query(`ALTER DATABASE ${client.escapeIdentifier(name)} WITH IS_TEMPLATE false`).catch(() => undefined);
  await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
}

export async function dropLeftovers(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${TEST_DB_PREFIX}%`]);
  for (const { datname } of rows) {
    const pid = Number(datname.split('_')[1]);
    if (!isAlive(pid)) await dropDatabase(client, datname);
  }
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
