import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { loadConfig } from '../shared/config.js';
import { serverUrl } from './support/databases.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let client: pg.Client;
beforeAll(async () => {
  // The template every test database is cloned from: migrated once per run, read-only here.
  client = new pg.Client({ connectionString: serverUrl(loadConfig().DATABASE_URL, inject('templateDatabase')) });
  await client.connect();
});
afterAll(() => client?.end());

describe('docs/sql-functions.md', () => {
  it('lists exactly the stored functions of the migrated database, each with a migration that defines it', async () => {
    const { rows } = await client.query<{ name: string }>(
      `SELECT DISTINCT p.proname AS name
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
        ORDER BY 1`,
    );
    const doc = readFileSync(path.join(ROOT, 'docs/sql-functions.md'), 'utf8');
    const listed = [...doc.matchAll(/^\| `(\w+)` \| .* \| `([\w-]+\.sql)` \|$/gm)];
    expect(rows.length).toBeGreaterThan(10);
    expect(listed.map(([, name]) => name).sort()).toEqual(rows.map((row) => row.name));
    for (const [, name, migration] of listed) {
      expect(readFileSync(path.join(ROOT, 'migrations', migration!), 'utf8'), `${name} in ${migration}`).toMatch(new RegExp(`CREATE (OR REPLACE )?FUNCTION ${name}\\b`));
    }
  });
});
