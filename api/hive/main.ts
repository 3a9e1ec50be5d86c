import { loadConfig } from '../../shared/config.js';
import { createHiveServices } from '../../shared/composition/hive.js';
import { toHiveErrorBody } from '../../shared/hive/errors.js';
import { listen, serverUrl, stopOnSignals } from '../../shared/platform/http-server.js';
import { createHiveApp } from './app.js';

const config = loadConfig();
const hive = createHiveServices(config, 'hive');
// Serve only once the database answers; later outages show as 503 from /v1/health.
await hive.ready;
const server = await listen(createHiveApp(hive), config.HIVE_PORT, config.HIVE_HOST, { errorBody: toHiveErrorBody });
hive.logger.info({ url: serverUrl(server), embedding_model: hive.embeddingModel.id }, 'memory hive listening');

stopOnSignals(server, hive, 'memory hive');
