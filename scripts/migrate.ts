/** `npm run migrate`: creates the database if needed and applies pending migrations (used by docker-compose). */
import { existsSync } from 'node:fs';
import { loadConfig } from '../shared/config.js';
import { prepareDatabase } from '../shared/db/migrate.js';

if (existsSync('.env')) process.loadEnvFile('.env');
const { created, applied } = await prepareDatabase(loadConfig().DATABASE_URL);
process.stdout.write(`${JSON.stringify({ database_created: created, applied })}\n`);
