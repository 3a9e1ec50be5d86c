import Stripe from 'stripe';
import type { Config } from '../config.js';
import { createLogger } from '../logger.js';
import { catalogModel, type CatalogModel } from '../models/catalog.js';
import { createInfrastructure, type Infrastructure } from '../platform/infrastructure.js';
import { ProviderRegistry } from '../providers/registry.js';
import { loadCertificateAuthority, type CertificateAuthority } from '../hive/certificate-authority.js';
import { enableDebitGroups } from '../hive/wallet-repository.js';
import { loadMasterKey } from '../platform/master-key.js';

/**
 * The memory hive's composition root: the process's infrastructure plus the hive's own services.
 * None of the gateway's metering, rate limits or client tokens are built here: the hive is a server
 * of its own that shares the database, not the gateway's domains. It does share the provider
 * adapters, to embed with HIVE_EMBEDDING_MODEL (metered against the hive's own wallet, shared/hive/metering.ts).
 */
export interface HiveServices extends Infrastructure {
  /** The catalog model the hive embeds memories with (HIVE_EMBEDDING_MODEL). */
  embeddingModel: CatalogModel;
  /** The gateway's provider adapters: the hive embeds recall queries through them (memories are embedded by the worker). */
  providers: ProviderRegistry;
  /**
   * The hive's certificate authority for machines and the relay, read once (made on the first start,
   * its key sealed under the platform's master key; shared/hive/certificate-authority.ts).
   */
  certificateAuthority(): Promise<CertificateAuthority>;
  /** Stripe's API for card top-ups (HIVE_STRIPE_API_BASE: stripe-mock in development and tests); null without HIVE_STRIPE_SECRET_KEY. */
  stripe: Stripe | null;
}

export function createHiveServices(config: Config, processName = 'hive', logger = createLogger(config, processName)): HiveServices {
  // loadConfig checked the id against the catalog; a Config built some other way is checked here.
  const embeddingModel = catalogModel(config.HIVE_EMBEDDING_MODEL);
  if (embeddingModel?.kind !== 'embedding') throw new Error(`HIVE_EMBEDDING_MODEL ${config.HIVE_EMBEDDING_MODEL} is not an embedding model of the catalog`);
  const infrastructure = createInfrastructure(config, processName, logger);
  // Wallet debits (remember, recall, embedding) share one statement when they arrive together.
  enableDebitGroups(infrastructure.db, config.METERING_GROUP_CONCURRENCY);
  const masterKey = loadMasterKey(config);
  let authority: Promise<CertificateAuthority> | undefined;
  const certificateAuthority = () => {
    // A failed load (the database away) is not remembered: the next call tries again.
    authority ??= loadCertificateAuthority(infrastructure.db, masterKey).catch((error: unknown) => {
      authority = undefined;
      throw error;
    });
    return authority;
  };
  return { ...infrastructure, embeddingModel, providers: new ProviderRegistry(config.providers), stripe: stripeClient(config), certificateAuthority };
}

/** A Stripe client for HIVE_STRIPE_SECRET_KEY, at HIVE_STRIPE_API_BASE when set. */
export function stripeClient(config: Pick<Config, 'HIVE_STRIPE_SECRET_KEY' | 'HIVE_STRIPE_API_BASE'>): Stripe | null {
  if (!config.HIVE_STRIPE_SECRET_KEY) return null;
  const base = config.HIVE_STRIPE_API_BASE ? new URL(config.HIVE_STRIPE_API_BASE) : undefined;
  const protocol = base?.protocol === 'http:' ? 'http' : 'https';
  return new Stripe(config.HIVE_STRIPE_SECRET_KEY, {
    maxNetworkRetries: 2,
    timeout: 20_000,
    ...(base ? { host: base.hostname, port: base.port || (protocol === 'http' ? 80 : 443), protocol } : {}),
  });
}
