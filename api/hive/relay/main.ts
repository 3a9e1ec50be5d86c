import type http from 'node:http';
import { loadConfig } from '../../../shared/config.js';
import { createHiveServices } from '../../../shared/composition/hive.js';
import { MachineGate } from '../../../shared/hive/machine-gate.js';
import { stopOnSignals } from '../../../shared/platform/http-server.js';
import { startRelay } from './relay.js';

/** The relay's process (npm start runs it beside the hive): HIVE_RELAY_HOST:HIVE_RELAY_PORT, forwarding to the hive at HIVE_HOST:HIVE_PORT. */
const config = loadConfig();
const hive = createHiveServices(config, 'hive-relay');
await hive.ready;
const gate = new MachineGate(hive.db, config.DATABASE_URL, hive.logger, { ttlMs: config.HIVE_RELAY_STATUS_TTL_SECONDS * 1000, maxEntries: config.HIVE_RELAY_STATUS_CACHE_ENTRIES });
const relay = await startRelay({
  authority: await hive.certificateAuthority(),
  gate,
  logger: hive.logger,
  upstream: config.hiveBaseUrl,
  host: config.HIVE_RELAY_HOST,
  port: config.HIVE_RELAY_PORT,
  // URL keeps an IPv6 host in brackets; a certificate names the address without them.
  names: [new URL(config.hiveRelayUrl).hostname.replace(/^\[(.*)\]$/, '$1')],
});
hive.logger.info({ url: relay.url, upstream: config.hiveBaseUrl }, 'hive relay listening');

// An https.Server stops as an http.Server does (close, closeIdleConnections, closeAllConnections).
stopOnSignals(relay.server as unknown as http.Server, { logger: hive.logger, close: async () => (await gate.close(), hive.close()) }, 'hive relay');
