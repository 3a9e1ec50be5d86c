import { webcrypto } from 'node:crypto';
import type http from 'node:http';
import https from 'node:https';
import type { Worker } from 'bullmq';
import { createHiveApp } from '../../api/hive/app.js';
import { startRelay, type Relay } from '../../api/hive/relay/relay.js';
import { createHiveServices, type HiveServices } from '../../shared/composition/hive.js';
import { hiveEmbeddingConsumer } from '../../shared/hive/embedding.js';
import { toHiveErrorBody } from '../../shared/hive/errors.js';
import { MachineGate } from '../../shared/hive/machine-gate.js';
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

/** A machine's key pair and certificate request, as the client command makes them (ECDSA P-256). */
export async function machineKey(commonName = 'test machine'): Promise<{ privateKeyPem: string; csr: string }> {
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const request = await x509.Pkcs10CertificateRequestGenerator.create({ name: `CN=${commonName}`, keys, signingAlgorithm: algorithm }, webcrypto as never);
  return { privateKeyPem: x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY'), csr: request.toString('pem') };
}

/** The world's relay, as npm start runs it: the hive's CA, a machine gate on the world's database, forwarding to the world's hive. */
export async function startWorldRelay(world: HiveWorld, options: { ttlMs?: number } = {}): Promise<Relay> {
  const gate = new MachineGate(world.hive.db, world.hive.config.DATABASE_URL, world.hive.logger, { ttlMs: options.ttlMs ?? 30_000, maxEntries: 1_000 });
  return startRelay({ authority: await world.hive.certificateAuthority(), gate, logger: world.hive.logger, upstream: world.baseUrl, host: '127.0.0.1', port: 0 });
}

/**
 * POST through the relay over mutual TLS: `client` is the machine's certificate and key (none: no
 * client certificate); the relay's certificate is checked against `caPem`. A fresh connection each
 * call, so no earlier handshake is reused.
 */
export function relayPost<T = any>(
  relayUrl: string,
  caPem: string,
  path: string,
  client: { cert: string; key: string } | undefined,
  token?: string,
  json: unknown = {},
): Promise<{ status: number; body: T; text: string }> {
  const body = JSON.stringify(json);
  return new Promise((resolve, reject) => {
    const request = https.request(
      `${relayUrl}${path}`,
      {
        method: 'POST',
        ca: caPem,
        ...(client && { cert: client.cert, key: client.key }),
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...(token && bearer(token)) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: response.statusCode!, body: (response.headers['content-type']?.includes('json') && text ? JSON.parse(text) : text) as T, text });
        });
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}
