import { CredentialCache } from '../accounts/credential-cache.js';
import { QuotaGrants } from '../billing/grants.js';
import { enableMeteringGroups } from '../billing/repository.js';
import { loadClientTokenKeys, type ClientTokenKeys } from '../client-tokens/keys.js';
import type { Config } from '../config.js';
import { createLogger } from '../logger.js';
import { createInfrastructure, settleAll, type Infrastructure } from '../platform/infrastructure.js';
import { MeteringTimings } from '../platform/metering-timings.js';
import { ProviderRegistry } from '../providers/registry.js';
import { RateLimiter } from '../ratelimit/limiter.js';
import { loadMasterKey, VectorStoreKeyring } from '../vector-stores/keyring.js';
import { RowCache } from '../brains/row-cache.js';
import type { RankedVersion } from '../brains/repository.js';
import type { PackEntryFacts } from '../brains/pack-repository.js';
import { StrictBrainVectors } from '../brains/strict-vectors.js';
import { RunEventReader } from '../assistants/run-events.js';
import { createRedis } from '../platform/redis.js';
import { SealedSpaces } from '../vector-stores/sealed-spaces.js';

/**
 * The gateway's composition root: the process's infrastructure plus the long-lived services of
 * the gateway's domains, assembled once per process (the API and the worker alike) and handed to
 * routes, activities and consumers.
 */
export interface GatewayServices extends Infrastructure {
  limiter: RateLimiter;
  /** How long metered calls spend in each governance step (served beside the HTTP metrics). */
  meteringTimings: MeteringTimings;
  /** Busy payers' calls metered in memory against grants held in PostgreSQL (started by API processes). */
  grants: QuotaGrants;
  /** Verified keys and customers of metered calls, checked against their auth generation at reservation. */
  credentials: CredentialCache;
  /** An adapter for every configured upstream provider. */
  providers: ProviderRegistry;
  /** Signs (first key) and verifies (every key) client tokens. */
  clientTokenKeys: ClientTokenKeys;
  /** Data keys of encrypted vector stores: the master key, byok leases, per-request passphrases. */
  vectorStoreKeys: VectorStoreKeyring;
  /** Sealed vector stores' opened vectors, scored in the CPU pool. */
  sealedSpaces: SealedSpaces;
  strictBrains: StrictBrainVectors;
  /** Recall's candidates' entry versions, by brain (stamped with its usage_seq), and a reference mount's pack entries, by version. */
  rankedVersions: RowCache<RankedVersion>;
  packEntryFacts: RowCache<PackEntryFacts>;
  /** Every streamed run's events in this process, read over one blocking Redis connection (opened on first use). */
  runEvents: RunEventReader;
}

export function createGatewayServices(config: Config, processName: string, logger = createLogger(config, processName)): GatewayServices {
  // First: a bad key stops the process before any connection opens.
  const clientTokenKeys = loadClientTokenKeys(config, logger);
  const masterKey = loadMasterKey(config);
  const infrastructure = createInfrastructure(config, processName, logger);
  const { db, redis } = infrastructure;
  enableMeteringGroups(db, config.METERING_GROUP_CONCURRENCY);
  const limiter = new RateLimiter(redis, config.REDIS_KEY_PREFIX, { blockMinRate: config.RATE_LIMIT_BLOCK_MIN_RATE });
  const grants = new QuotaGrants(db, config, logger);
  const credentials = new CredentialCache(db, limiter, { ttlMs: config.CREDENTIAL_CACHE_SECONDS * 1000, maxEntries: 10_000, lazyCreatePerMinute: config.LAZY_CREATE_PER_MINUTE });

  const runEvents = new RunEventReader(redis, () => createRedis(config.REDIS_URL, 'run-events', logger), config.REDIS_KEY_PREFIX);

  let closing: Promise<void> | undefined;
  const close = () => {
    // The services write their last usage and charges before the connections close.
    closing ??= settleAll([limiter.flushUsage(), grants.close(), runEvents.close()], logger).then(() => infrastructure.close());
    return closing;
  };

  return {
    ...infrastructure,
    limiter,
    meteringTimings: new MeteringTimings(),
    grants,
    credentials,
    providers: new ProviderRegistry(config.providers),
    clientTokenKeys,
    vectorStoreKeys: new VectorStoreKeyring(masterKey, redis, config.REDIS_KEY_PREFIX),
    sealedSpaces: new SealedSpaces(db, infrastructure.cpu, config.VECTOR_STORE_CACHE_MB * 1024 * 1024),
    strictBrains: new StrictBrainVectors(db, infrastructure.cpu, config.BRAIN_STRICT_CACHE_MB * 1024 * 1024),
    rankedVersions: new RowCache(config.BRAIN_RANKING_CACHE_ROWS),
    packEntryFacts: new RowCache(config.BRAIN_RANKING_CACHE_ROWS),
    runEvents,
    close,
  };
}
