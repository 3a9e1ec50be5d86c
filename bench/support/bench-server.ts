/**
 * The gateway as `npm start` runs it, plus the metered probe route: the whole governance chain of a
 * metered call with no upstream behind it. Started as its own process by bench/hot-path.ts.
 */
import { createGatewayApp } from '../../api/app.js';
import { listen, serverUrl } from '../../shared/platform/http-server.js';
import { loadConfig } from '../../shared/config.js';
import { createGatewayServices } from '../../shared/composition/gateway.js';
import { meteredProbeRoutes } from './metered-probe.js';
import { recordRequestTimes } from './tail.js';

const platform = createGatewayServices(loadConfig(), 'bench-api');
await platform.ready;
const server = await listen(createGatewayApp(platform, { routes: [meteredProbeRoutes(platform)] }), platform.config.API_PORT, '127.0.0.1');
process.stdout.write(`${JSON.stringify({ listening: serverUrl(server) })}\n`);
// BENCH_TRACE_FILE: the times of traced requests and of collections, written there on SIGTERM.
const requestTimes = process.env.BENCH_TRACE_FILE ? recordRequestTimes(server, process.env.BENCH_TRACE_FILE) : undefined;
process.on('SIGTERM', () => {
  requestTimes?.flush();
  server.closeAllConnections();
  server.close(() => void platform.close().then(() => process.exit(0)));
});
