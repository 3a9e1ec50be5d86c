/**
 * `npm run emulator`: the upstream emulator as its own process, for trying the wire formats by
 * hand and for load tests. Prints where each provider lives and the credentials it accepts.
 * EMULATOR_PORT (default 8199), EMULATOR_LATENCY_MS and EMULATOR_CHUNK_INTERVAL_MS tune it.
 */
import { listen, serverUrl } from '../platform/http-server.js';
import { createFullEmulator } from './emulator.js';

const { app, providers, credentials } = createFullEmulator({
  latencyMs: Number(process.env.EMULATOR_LATENCY_MS ?? 0),
  chunkIntervalMs: Number(process.env.EMULATOR_CHUNK_INTERVAL_MS ?? 0),
});
const server = await listen(app, Number(process.env.EMULATOR_PORT ?? 8199), '127.0.0.1');
const url = serverUrl(server);
process.stdout.write(
  `${JSON.stringify(
    {
      listening: url,
      providers: Object.fromEntries(providers.map((provider) => [provider, `${url}/${provider}`])),
      api_keys: credentials.apiKeys,
      aws: credentials.aws,
      ibm_api_key: credentials.ibmApiKey,
      faults: `POST ${url}/_emulator/faults {"provider":"openai","fault":{"kind":"status","status":503},"times":2}`,
    },
    null,
    2,
  )}\n`,
);
process.on('SIGINT', () => server.close(() => process.exit(0)));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
