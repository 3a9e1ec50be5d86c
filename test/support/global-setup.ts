import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../shared/config.js';
import { runMigrations } from '../../shared/db/migrate.js';
import { TEST_DB_PREFIX, dropDatabase, dropLeftovers, serverUrl, withServer } from './databases.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabase: string;
  }
}

/** Migrates one template database per run; each test file then clones it in milliseconds. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { DATABASE_URL } = loadConfig();
  const template = `${TEST_DB_PREFIX}${process.pid}_template`;
  await withServer(DATABASE_URL, async (client) => {
    await dropLeftovers(client);
    await dropDatabase(client, template);
    await client.query(`CREATE DATABASE ${client.escapeIdentifier(template)}`);
  });
  await runMigrations(serverUrl(DATABASE_URL, template));
  await withServer(DATABASE_URL, (client) => client.query(`ALTER DATABASE ${client.escapeIdentifier(template)} WITH IS_TEMPLATE true`));
  project.provide('templateDatabase', template);

  return async () => {
    await withServer(DATABASE_URL, (client) => dropDatabase(client, template));
  };
}
