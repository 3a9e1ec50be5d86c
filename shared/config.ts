import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { readFileSync } from 'node:fs';
import { catalogModel } from './models/catalog.js';
import { providerSettingsFromEnv, type ProviderSettings, type ServiceAccountKey } from './providers/settings.js';

/**
 * Every setting of every process comes from the environment, validated once here.
 * `.env.example` documents the same variables with the same defaults.
 */
const byteSize = z
  .string()
  .regex(/^\d+(b|kb|mb|gb)?$/i, 'a size such as 512kb or 32mb')
  .transform(parseByteSize);

/**
 * Ed25519 private JWKs for client tokens, as one JSON array: each needs a unique `kid`. The first
 * signs new tokens and all of them verify, so a rotation puts a new key first and keeps the old
 * one until its tokens have expired (at most 3600 s).
 */
const clientTokenSigningKeys = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON array of Ed25519 private JWKs' });
      return z.NEVER;
    }
  })
  .pipe(
    z
      .array(z.object({ kty: z.literal('OKP'), crv: z.literal('Ed25519'), kid: z.string().min(1).max(128), x: z.string().min(1), d: z.string().min(1) }))
      .min(1)
      .refine((keys) => new Set(keys.map((key) => key.kid)).size === keys.length, 'every kid must be unique'),
  );

const configSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATA_DIR: z.string().min(1).default('.data'),

  API_HOST: z.string().min(1).default('127.0.0.1'),
  API_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Public origin printed at start and used in links; defaults to http://API_HOST:API_PORT. */
  PUBLIC_BASE_URL: z.url().optional(),
  /** Largest JSON body accepted; chat bodies may carry two 20 MB images per message as base64. */
  JSON_BODY_LIMIT: byteSize.default(64 * 1024 * 1024),
  /** Trust X-Forwarded-For from this many proxy hops (0 = use the socket address). */
  TRUST_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0),

  /** The memory-hive server (spec 3): its own app and port beside the gateway, in the same database. */
  HIVE_HOST: z.string().min(1).default('127.0.0.1'),
  HIVE_PORT: z.coerce.number().int().min(0).max(65535).default(8090),
  /** Largest JSON body the hive accepts: its requests carry text (memories, events, tasks), not media. */
  HIVE_JSON_BODY_LIMIT: byteSize.default(1024 * 1024),
  /** The model the hive embeds memories with: a concrete embedding id of the catalog (shared/models/catalog.ts). */
  HIVE_EMBEDDING_MODEL: z
    .string()
    .refine((id) => catalogModel(id)?.kind === 'embedding', 'an embedding model id of the catalog, such as svc:openai/text-embedding-3-small')
    .default('svc:openai/text-embedding-3-small'),
  /** The hive's origin as browsers see it behind a proxy: its dashboard's writes may come from it, its links and cookies (Secure when https) follow it. */
  HIVE_PUBLIC_BASE_URL: z.url().optional(),
  /** POST /v1/signup of the hive answers only when the operator starts the server with this on. */
  HIVE_SIGNUP_ENABLED: z.enum(['true', 'false']).default('false').transform((value) => value === 'true'),
  /** Signups one client address may attempt per hour, counted in the database so every replica counts alike. */
  HIVE_SIGNUP_PER_HOUR: z.coerce.number().int().min(1).max(10_000).default(5),
  /** What a new organisation's wallet starts with, in USD, so it can write before its first top-up. */
  HIVE_SIGNUP_CREDIT_USD: z.coerce.number().min(0).max(10_000).default(5),
  /** Prices of the hive's metered work, in micro-dollars: one remember, one recall, 1,000 tokens embedded (memories and recall queries). */
  HIVE_PRICE_REMEMBER_MICROS: z.coerce.number().int().min(0).max(1_000_000_000).default(100),
  HIVE_PRICE_RECALL_MICROS: z.coerce.number().int().min(0).max(1_000_000_000).default(50),
  HIVE_PRICE_EMBED_MICROS_PER_1K_TOKENS: z.coerce.number().int().min(0).max(1_000_000_000).default(20),
  /** Stripe's secret key for card top-ups (Checkout). Unset: npm start runs stripe-mock and uses a test key against it. */
  HIVE_STRIPE_SECRET_KEY: z.string().min(1).optional(),
  /** The signing secret (whsec_...) of the endpoint POST /billing/stripe; unset: every delivery is refused. */
  HIVE_STRIPE_WEBHOOK_SECRET: z.string().min(1).optional(),
  /** Where the Stripe API is: unset is Stripe itself; npm start points it at its stripe-mock when no secret key is set. */
  HIVE_STRIPE_API_BASE: z.url().optional(),
  /** The port npm start runs stripe-mock on when no Stripe secret key is configured. */
  HIVE_STRIPE_MOCK_PORT: z.coerce.number().int().min(1).max(65535).default(12111),

  /** The hive's mutual-TLS relay (api/hive/relay/): machines reach the hive through it with their certificates. */
  HIVE_RELAY_HOST: z.string().min(1).default('127.0.0.1'),
  HIVE_RELAY_PORT: z.coerce.number().int().min(0).max(65535).default(8091),
  /** The relay address enrolment answers machines with; defaults to https://HIVE_RELAY_HOST:HIVE_RELAY_PORT. */
  HIVE_RELAY_PUBLIC_URL: z.url().optional(),
  /** How long the relay trusts a machine status it read without a revocation announcement (the fallback when one is missed). */
  HIVE_RELAY_STATUS_TTL_SECONDS: z.coerce.number().int().min(1).max(55).default(30),
  /** Machine statuses the relay keeps in memory at most. */
  HIVE_RELAY_STATUS_CACHE_ENTRIES: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  /** Lifetime of a permanent machine's certificate (renewed with POST /v1/machine/renew); temporary machines' last their 30 days. */
  HIVE_MACHINE_CERTIFICATE_DAYS: z.coerce.number().int().min(1).max(825).default(90),

  DATABASE_URL: z.string().min(1).default('postgres://postgres@127.0.0.1:5432/svc_platform'),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),

  REDIS_URL: z.string().min(1).default('redis://127.0.0.1:6379'),
  /** Prefix of every Redis key and BullMQ queue, so several platforms (or test files) share one Redis. */
  REDIS_KEY_PREFIX: z.string().min(1).default('svc'),

  /** An existing Temporal frontend. Unset: `npm start` runs a local dev server on TEMPORAL_DEV_PORT. */
  TEMPORAL_ADDRESS: z.string().min(1).optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('svc-platform'),
  TEMPORAL_DEV_PORT: z.coerce.number().int().min(1).max(65535).default(7233),
  TEMPORAL_DEV_UI_PORT: z.coerce.number().int().min(1).max(65535).default(8233),
  /** Web UI link printed at start and shown by /v1/health; derived from the dev server when unset. */
  TEMPORAL_UI_URL: z.url().optional(),
  /**
   * The worker process's CPU niceness: its background work (learn passes, runs, batches, webhook
   * deliveries) yields the CPU to the API's requests on a host the two share. 0 leaves it as started.
   */
  WORKER_NICENESS: z.coerce.number().int().min(0).max(19).default(10),

  /** Rate-limit defaults (requests or tokens per minute); customers and client tokens carry their own. */
  EDGE_RPM_LIMIT: z.coerce.number().int().min(1).default(1_200),
  DEVELOPER_RPM_LIMIT: z.coerce.number().int().min(1).default(3_000),
  DEVELOPER_TPM_LIMIT: z.coerce.number().int().min(1).default(5_000_000),
  /** Customers created on first use, per developer per minute. */
  LAZY_CREATE_PER_MINUTE: z.coerce.number().int().min(1).default(60),
  /** How metered calls' reservations and settlements commit: see CommitMode in shared/billing/repository.ts. */
  METERING_COMMIT: z.enum(['durable', 'fast']).default('fast'),
  /**
   * Metering statements of each kind (reserve, settle) a process runs at once; calls arriving while
   * that many run share the next statement (group commit, migration 014). 0 = one statement per call.
   * 1 by default: a group already carries every wallet's calls, and a second statement of the same
   * kind mostly waits for the first one's lock on the busiest wallet row.
   */
  METERING_GROUP_CONCURRENCY: z.coerce.number().int().min(0).max(64).default(1),
  /**
   * Calls a second of one payer from which an API process meters them against a quota grant, in
   * memory, instead of reserving each in PostgreSQL (see shared/billing/grants.ts). 0 = never.
   */
  METERING_GRANT_MIN_RATE: z.coerce.number().int().min(0).default(50),
  /**
   * Calls a second of one caller (one set of rate-limit layers) from which an API process checks
   * them against Redis a block of requests at a time (see shared/ratelimit/limiter.ts). 0 = never.
   */
  RATE_LIMIT_BLOCK_MIN_RATE: z.coerce.number().int().min(0).default(50),
  /** How long an API process keeps a verified key or customer for metered calls (0 = always read PostgreSQL). */
  CREDENTIAL_CACHE_SECONDS: z.coerce.number().int().min(0).max(3600).default(60),
  /** Calls per minute on one rsk_ provisioning key. */
  PROVISIONING_RPM_LIMIT: z.coerce.number().int().min(1).default(60),
  /** Active provisioned accounts per developer. */
  ACCOUNT_CAP: z.coerce.number().int().min(1).default(10),
  /** Largest magnitude of one wallet adjust or top-up, in USD. */
  WALLET_ADJUST_CAP_USD: z.coerce.number().positive().default(10_000),
  /** A wallet.low event fires when a balance falls below this, in USD. */
  WALLET_LOW_THRESHOLD_USD: z.coerce.number().min(0).default(5),
  /** Signing keys of client tokens; unset outside production means one ephemeral key per process. */
  CLIENT_TOKEN_SIGNING_KEYS: clientTokenSigningKeys.optional(),

  /** Webhook retries after a failed first attempt, in seconds (spec 1: 1 min, 5 min, 30 min, 2 h, 6 h); then the delivery is dead. */
  WEBHOOK_RETRY_SCHEDULE_SECONDS: z
    .string()
    .regex(/^\d+(\.\d+)?(,\d+(\.\d+)?)*$/, 'comma-separated seconds such as 60,300,1800')
    .transform((text) => text.split(',').map(Number))
    .default([60, 300, 1_800, 7_200, 21_600]),
  /** A delivery attempt counts as failed unless a 2xx arrives within this many milliseconds. */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  /** Consecutive failed attempts after which the worker moves an endpoint to disabled_after_failures. */
  WEBHOOK_FAILURE_STREAK_THRESHOLD: z.coerce.number().int().min(1).default(100),
  /** Brains (spec 2): off, every /v1/brains route answers 404. */
  SVC_BRAINS_ENABLED: z.enum(['true', 'false']).default('true').transform((value) => value === 'true'),
  /** How long a completed brain reindex may be rolled back; the prior space is dropped after it (spec 2: 7 days). */
  BRAIN_REINDEX_ROLLBACK_SECONDS: z.coerce.number().int().min(1).default(7 * 24 * 3_600),
  /** A reindex's embedding activity that stops heartbeating this long is retried elsewhere (it resumes). */
  BRAIN_REINDEX_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3_600).default(30),
  /** Maintenance memory of one HNSW index build (a reindex, a pack version, a materialize mount, a vector store's migration): a graph that fits builds several times faster (shared/db/pool.ts). */
  INDEX_BUILD_MEMORY_MB: z.coerce.number().int().min(64).max(65_536).default(1_024),
  /** Memory one process may hold strict brains' opened vectors in (the brains recalled most recently stay). */
  BRAIN_STRICT_CACHE_MB: z.coerce.number().int().min(16).max(65_536).default(1_024),
  /** Rows one process keeps for ranking recall's candidates: entry versions of the brains recalled most recently (about 650 bytes each in memory), and as many pack entries of reference-mounted versions. */
  BRAIN_RANKING_CACHE_ROWS: z.coerce.number().int().min(0).max(100_000_000).default(200_000),
  /** Packs (spec 2), on top of SVC_BRAINS_ENABLED: off (either), every packs route answers 404 resource_not_found. */
  SVC_BRAIN_PACKS_ENABLED: z.enum(['true', 'false']).default('true').transform((value) => value === 'true'),
  /** Refusal gates of a publish (409 pack_too_large). */
  SVC_PACK_MAX_ENTRIES: z.coerce.number().int().min(1).default(50_000),
  SVC_PACK_MAX_CHUNKS: z.coerce.number().int().min(1).default(200_000),
  /** A materialize mount's import that stops heartbeating this long is retried elsewhere (it starts over: one transaction). */
  PACK_MATERIALIZE_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3_600).default(30),
  /** The chat model learning asks (extraction, judgements, consolidation), through the gateway's own chat path. */
  BRAIN_LEARN_MODEL: z.string().min(1).default('svc:openai/gpt-4o-mini'),
  /** Chunks a reindex embeds in one upstream call. */
  BRAIN_REINDEX_BATCH: z.coerce.number().int().min(1).max(2_048).default(128),
  /** Tests and local development only: let webhook URLs reach private, loopback and other unsafe addresses. */
  WEBHOOK_ALLOW_PRIVATE_HOSTS: z.enum(['true', 'false']).default('false').transform((value) => value === 'true'),
  /** A PEM file of extra CAs trusted for webhook receivers (a private CA, or a test receiver's self-signed certificate). */
  WEBHOOK_EXTRA_CA_FILE: z.string().min(1).optional(),
  /** First attempts sent at once by one worker process. */
  WEBHOOK_DELIVERY_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(100),
  /** Outbox rows one relay transaction claims. */
  WEBHOOK_RELAY_BATCH: z.coerce.number().int().min(1).max(10_000).default(500),
  /** The relay wakes on NOTIFY at commit; it also polls this often in case a notification was missed. */
  WEBHOOK_RELAY_POLL_MS: z.coerce.number().int().min(50).default(1_000),
  /** A queued first attempt not made after this many seconds is queued again (a worker died holding it). */
  WEBHOOK_REQUEUE_AFTER_SECONDS: z.coerce.number().int().min(1).default(60),
  /** How long a worker holds a delivery job before another worker may take it over (BullMQ lock). */
  WEBHOOK_JOB_LOCK_SECONDS: z.coerce.number().int().min(1).default(30),

  /** Largest upload of POST /v1/files (spec 1: 512 MB); the body streams to storage, never whole in memory. */
  FILES_MAX_BYTES: byteSize.default(512 * 1024 ** 2),
  /** Lines of a batch one activity runs (and heartbeats through) before the workflow hands out the next chunk. */
  BATCH_CHUNK_SIZE: z.coerce.number().int().min(1).max(50_000).default(1_000),
  /** Chunks of one batch running at once. */
  BATCH_PARALLEL_CHUNKS: z.coerce.number().int().min(1).max(64).default(4),
  /** Batch lines in flight at once to one upstream provider, per worker process. */
  BATCH_UPSTREAM_CONCURRENCY: z.coerce.number().int().min(1).max(2_000).default(128),
  /** A chunk whose worker stops heartbeating for this long is retried elsewhere (it resumes, never redoes a line). */
  BATCH_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3_600).default(30),
  /** The completion window (spec 1: 24h); shorter only to test expiry. */
  BATCH_COMPLETION_WINDOW_SECONDS: z.coerce.number().int().min(1).default(86_400),

  /**
   * The key that wraps managed vector stores' data keys and byok leases: 32 bytes, base64. Required
   * in production; elsewhere one is made on first start and kept in DATA_DIR/secrets.
   */
  VECTOR_STORE_MASTER_KEY: z
    .string()
    .transform((text, ctx) => {
      const key = Buffer.from(text.trim(), 'base64');
      if (key.length === 32) return key;
      ctx.addIssue({ code: 'custom', message: 'must be 32 bytes, base64-encoded' });
      return z.NEVER;
    })
    .optional(),
  /** Files of vector stores whose ingest stages one worker process runs at once. */
  VECTOR_STORE_INGEST_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
  /** How long a worker holds an ingest stage before another worker may take it over (a worker that died). */
  VECTOR_STORE_JOB_LOCK_SECONDS: z.coerce.number().int().min(1).default(30),
  /** An ingest with no progress this long is restarted by the recovery sweep (its queued job was lost). */
  VECTOR_STORE_STALL_SECONDS: z.coerce.number().int().min(1).default(600),
  /** A migration's re-embedding activity that stops heartbeating this long is retried elsewhere (it resumes). */
  VECTOR_STORE_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3_600).default(30),
  /** The chat model graphrag stores extract subject-predicate-object facts with (a typed reference). */
  VECTOR_STORE_FACTS_MODEL: z.string().min(1).default('svc:openai/gpt-4o-mini'),
  /** The HNSW search beam of plaintext stores: wider finds more of the true nearest chunks, slower. */
  VECTOR_STORE_HNSW_EF_SEARCH: z.coerce.number().int().min(10).max(1_000).default(300),
  /** Memory one process may hold opened sealed vectors in (the stores searched most recently stay). */
  VECTOR_STORE_CACHE_MB: z.coerce.number().int().min(16).max(65_536).default(1_024),
  /** Chunks embedded in one upstream call during ingest and migration. */
  VECTOR_STORE_EMBED_BATCH: z.coerce.number().int().min(1).max(2_048).default(128),

  /** How long a run waits in requires_action for tool outputs before it expires (spec 1: 10 minutes). */
  ASSISTANT_REQUIRES_ACTION_SECONDS: z.coerce.number().int().min(1).max(3_600).default(600),
  /**
   * A run's model step (a local activity) retries on its own worker for this long before further
   * retries are scheduled through the Temporal server. A worker that dies mid-step is replaced when
   * the run's workflow task times out, and the step runs again there, billed once.
   */
  ASSISTANT_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(30),

  /**
   * Threads of the CPU pool (cosine scoring, secret scanning); default: one a core. Its threads
   * sleep until given work; a large exact scan is split across all of them while the event loop,
   * which only awaits it, has nothing to do.
   */
  CPU_POOL_THREADS: z.coerce.number().int().min(1).max(64).default(os.availableParallelism()),
});

export type Config = z.infer<typeof configSchema> & {
  /** Upstream providers with credentials, read from their SDKs' own variables (shared/providers/settings.ts). */
  providers: Map<string, ProviderSettings>;
  temporalAddress: string;
  temporalUiUrl: string;
  publicBaseUrl: string;
  /** Where the memory hive answers: http://HIVE_HOST:HIVE_PORT. */
  hiveBaseUrl: string;
  /** The relay address machines are given: HIVE_RELAY_PUBLIC_URL or https://HIVE_RELAY_HOST:HIVE_RELAY_PORT. */
  hiveRelayUrl: string;
  dataDir: string;
};

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(stripEmpty(env));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  const values = parsed.data;
  if (values.NODE_ENV === 'production' && values.WEBHOOK_ALLOW_PRIVATE_HOSTS) {
    // The switch exists for a local receiver in tests; in production it would open SSRF.
    throw new ConfigError('invalid configuration:\n  WEBHOOK_ALLOW_PRIVATE_HOSTS: must be false when NODE_ENV is production');
  }
  if (values.NODE_ENV === 'production' && !values.CLIENT_TOKEN_SIGNING_KEYS) {
    // An ephemeral key would make every restart and every other replica refuse live client tokens.
    throw new ConfigError('invalid configuration:\n  CLIENT_TOKEN_SIGNING_KEYS: required when NODE_ENV is production');
  }
  const devTemporal = `127.0.0.1:${values.TEMPORAL_DEV_PORT}`;
  return {
    ...values,
    temporalAddress: values.TEMPORAL_ADDRESS ?? devTemporal,
    temporalUiUrl: values.TEMPORAL_UI_URL ?? `http://127.0.0.1:${values.TEMPORAL_DEV_UI_PORT}`,
    publicBaseUrl: values.PUBLIC_BASE_URL ?? `http://${displayHost(values.API_HOST)}:${values.API_PORT}`,
    hiveBaseUrl: `http://${displayHost(values.HIVE_HOST)}:${values.HIVE_PORT}`,
    hiveRelayUrl: (values.HIVE_RELAY_PUBLIC_URL ?? `https://${displayHost(values.HIVE_RELAY_HOST)}:${values.HIVE_RELAY_PORT}`).replace(/\/$/, ''),
    dataDir: path.resolve(values.DATA_DIR),
    providers: providerSettingsFromEnv(env, readServiceAccountFile),
  };
}

/** Whether the platform itself should run a Temporal dev server (no external one configured). */
export function managesTemporalDevServer(config: Config): boolean {
  return config.TEMPORAL_ADDRESS === undefined;
}

function stripEmpty(env: NodeJS.ProcessEnv): Record<string, string> {
  // An empty variable (FOO=) means "not set", as in most twelve-factor tooling.
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ''));
}

function displayHost(host: string): string {
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
}

function parseByteSize(text: string): number {
  const match = /^(\d+)(b|kb|mb|gb)?$/i.exec(text);
  const units: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };
  return Number(match![1]) * units[(match![2] ?? 'b').toLowerCase()]!;
}

function readServiceAccountFile(file: string): ServiceAccountKey {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as ServiceAccountKey;
  } catch (error) {
    throw new ConfigError(`invalid configuration:\n  GOOGLE_APPLICATION_CREDENTIALS: cannot read a service-account key from ${file}: ${(error as Error).message}`);
  }
}
