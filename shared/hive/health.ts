import type { HiveServices } from '../composition/hive.js';
import { hiveError } from './errors.js';
import { readSchemaVersion } from './repository.js';

/** GET /v1/health of the hive (spec 3): the server is here, which schema it runs on, which model embeds. */
export interface HiveHealth {
  status: 'ok';
  server: 'memory-hive';
  schema: string;
  embedding_model: string;
}

/** A health check answers within this, whatever the database does. */
const CHECK_TIMEOUT_MS = 2_000;

/**
 * Reads the schema version from the database itself, so a green answer means the hive can reach
 * its tables. Everything the hive serves needs them, hence 503 when they cannot be read.
 */
export async function checkHiveHealth(hive: Pick<HiveServices, 'db' | 'embeddingModel'>): Promise<HiveHealth> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  try {
    const schema = await Promise.race([readSchemaVersion(hive.db), deadline]);
    return { status: 'ok', server: 'memory-hive', schema, embedding_model: hive.embeddingModel.id };
  } catch (error) {
    throw hiveError(503, `The hive cannot read its database: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    clearTimeout(timer);
  }
}
