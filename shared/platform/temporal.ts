import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config.js';

export interface TemporalHandle {
  connection: Connection;
  client: Client;
}

/**
 * A lazy connection: the API starts (and reports Temporal as down in /v1/health) even while
 * the Temporal server is still starting or unreachable.
 */
export function connectTemporal(config: Pick<Config, 'temporalAddress' | 'TEMPORAL_NAMESPACE'>): TemporalHandle {
  const connection = Connection.lazy({ address: config.temporalAddress });
  return { connection, client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }) };
}
