import type http from 'node:http';
import type { Worker } from 'bullmq';
import { createHiveApp } from '../../api/hive/app.js';
import { createHiveServices, type HiveServices } from '../../shared/composition/hive.js';
import { hiveEmbeddingConsumer } from '../../shared/hive/embedding.js';
import { toHiveErrorBody } from '../../shared/hive/errors.js';
import { listen, serverUrl } from '../../shared/platform/http-server.js';
import { startConsumers, type ConsumerDefinition } from '../../shared/platform/queues.js';
import { createRedis } from '../../shared/platform/redis.js';
import { startEmulatedGateway, type EmulatedGateway } from './emulated-gateway.js';
import { bearer, call, type ApiResponse } from './test-platform.js';

/**
 * One test file's hive: the platform's database cloned from the migrated template, every provider
 * served by the upstream emulator (so embeddings carry meaning offline), and the hive app on an
 * ephemeral port, as `npm start` runs it beside the gateway. The worker's hive embedding consumer
 * runs only when a test starts it, so a test can see a memory before and after it is embedded.
 */
export interface HiveWorld {
  emulated: EmulatedGateway;
  hive: HiveServices;
  baseUrl: string;
  /** POST `path` with a JSON body, as the holder of `token` (none: no Authorization header). */
  post<T = any>(path: string, token: string | undefined, json?: unknown): Promise<ApiResponse<T>>;
  /** The worker side: the BullMQ consumer that embeds memories. */
  startEmbedding(): Promise<{ stop(): Promise<void> }>;
  close(): Promise<void>;
}

export async function startHiveWorld(env: Record<string, string> = {}): Promise<HiveWorld> {
  const emulated = await startEmulatedGateway({ HIVE_SIGNUP_ENABLED: 'true', HIVE_SIGNUP_PER_HOUR: '1000', ...env });
  const hive = createHiveServices(emulated.gateway.config, 'test-hive');
  await hive.ready;
  const server: http.Server = await listen(createHiveApp(hive), 0, '127.0.0.1', { errorBody: toHiveErrorBody });
  const baseUrl = serverUrl(server);
  return {
    emulated,
    hive,
    baseUrl,
    post: (path, token, json = {}) => call(baseUrl, path, { method: 'POST', json, headers: token ? bearer(token) : {} }),
    async startEmbedding() {
      const blocking = createRedis(hive.config.REDIS_URL, 'blocking', hive.logger);
      const consumers: Worker[] = startConsumers([hiveEmbeddingConsumer(hive) as ConsumerDefinition], blocking, hive.queues.prefix, hive.logger);
      return {
        async stop() {
          await Promise.all(consumers.map((consumer) => consumer.close()));
          await blocking.quit();
        },
      };
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await hive.close();
      await emulated.close();
    },
  };
}

let signups = 0;

export interface HiveOwner {
  token: string;
  email: string;
  orgId: string;
  rootNodeId: string;
  rootPath: string;
}

/** An organisation made through POST /v1/signup, with its owner's first token. */
export async function signUp(world: HiveWorld, organisation = `org${++signups}`): Promise<HiveOwner> {
  const email = `owner-${organisation}-${Date.now()}@example.test`;
  const response = await world.post('/v1/signup', undefined, { email, password: 'correct horse battery staple', organisation });
  if (response.status !== 201) throw new Error(`signup failed: ${response.status} ${response.text}`);
  return { token: response.body.token.token, email, orgId: response.body.organisation.id, rootNodeId: response.body.node.id, rootPath: response.body.node.path };
}

/** A person admitted through the device flow by `approver` (start, approve, poll): their new token. */
export async function admitPerson(world: HiveWorld, approverToken: string, grant: { email: string; node: string; role: string; guardrail?: boolean; axiom?: boolean }): Promise<string> {
  const started = await world.post('/v1/device/start', undefined);
  if (started.status !== 200) throw new Error(`device start failed: ${started.status} ${started.text}`);
  const approved = await world.post('/v1/device/approve', approverToken, { code: started.body.user_code, ...grant });
  if (approved.status !== 200) throw new Error(`device approve failed: ${approved.status} ${approved.text}`);
  const polled = await world.post('/v1/device/poll', undefined, { device_code: started.body.device_code });
  if (polled.body.status !== 'approved') throw new Error(`device poll did not approve: ${polled.status} ${polled.text}`);
  return polled.body.token;
}

/** A child node made through POST /v1/nodes/create: its id. */
export async function createNode(world: HiveWorld, token: string, parent: string, name: string): Promise<{ id: string; path: string }> {
  const response = await world.post('/v1/nodes/create', token, { parent, name });
  if (response.status !== 201) throw new Error(`node create failed: ${response.status} ${response.text}`);
  return { id: response.body.id, path: response.body.path };
}
