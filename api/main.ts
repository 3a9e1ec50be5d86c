import { loadConfig } from '../shared/config.js';
import { createGatewayServices } from '../shared/composition/gateway.js';
import { createGatewayApp } from './app.js';
import { listen, serverUrl, stopOnSignals } from '../shared/platform/http-server.js';

const config = loadConfig();
const platform = createGatewayServices(config, 'api');
// Serve only once the database answers; later outages show in /v1/health instead.
await platform.ready;
const server = await listen(createGatewayApp(platform), config.API_PORT, config.API_HOST);
platform.logger.info({ url: serverUrl(server) }, 'gateway API listening');

stopOnSignals(server, platform, 'gateway API');
