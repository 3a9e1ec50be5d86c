import { loadConfig } from '../shared/config.js';
import { createGatewayServices } from '../shared/composition/gateway.js';
import { createGatewayApp } from './app.js';
import { listen, serverUrl } from './http-server.js';

const SHUTDOWN_GRACE_MS = 10_000;

const config = loadConfig();
const platform = createGatewayServices(config, 'api');
// Serve only once the database answers; later outages show in /v1/health instead.
await platform.ready;
const server = await listen(createGatewayApp(platform), config.API_PORT, config.API_HOST);
platform.logger.info({ url: serverUrl(server) }, 'gateway API listening');

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  platform.logger.info({ signal }, 'gateway API stopping');
  const forced = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  await closed;
  clearTimeout(forced);
  await platform.close();
  process.exit(0);
}
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
