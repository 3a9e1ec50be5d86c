import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config.js';

export interface TemporalHandle {
  connection: Connection;
  client: Client;
  /**
   * For /v1/health only: no retry interceptor, so a probe of an unreachable server fails at once
   * and leaves no retry timer behind to fire after the process closed its channels.
   */
  probe: Connection;
}

/**
 * Lazy connections: the API starts (and reports Temporal as down in /v1/health) even while
 * the Temporal server is still starting or unreachable.
 */
export function connectTemporal(config: Pick<Config, 'temporalAddress' | 'TEMPORAL_NAMESPACE'>): TemporalHandle {
  const connection = Connection.lazy({ address: config.temporalAddress });
  const probe = Connection.lazy({ address: config.temporalAddress, interceptors: [] });
  return { connection, client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }), probe };
}
