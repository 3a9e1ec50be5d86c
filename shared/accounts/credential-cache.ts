import { hash } from 'node:crypto';
import type { Attribution } from '../customers/customers.js';
import { attributeCustomer } from '../customers/customers.js';
import type { CustomerRow } from '../customers/repository.js';
import type { Db } from '../db/pool.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import { lookupDeveloperKey, type DeveloperKeyPrincipal } from './authenticate.js';

/**
 * The metered hot path's memory of who is calling: verified `ko_` keys and attributed customers,
 * kept in this process so a call does not read them from PostgreSQL every time.
 *
 * Each entry remembers its developer's auth generation (migration 013), which every change to a
 * key, an account or a customer bumps. A cached call carries that generation into its wallet
 * reservation, which refuses it as stale when it is no longer current; the caller then verifies
 * again from PostgreSQL (see MeteredCall.credentials). So a revoked key or an archived customer
 * stops at the reservation, before any upstream call, on every replica at once; the cache only
 * saves the reads. (A call reserved against a quota grant meets no statement: there the change's
 * announcement at commit retires the developer's grants, see shared/billing/grants.ts.) Entries also expire after `ttlMs`, which bounds how long a changed rate limit
 * of a customer can go unnoticed by the layers that run before the reservation.
 */
export interface VerifiedKey {
  principal: DeveloperKeyPrincipal;
  generation: number;
}

interface KeyEntry extends VerifiedKey {
  expiresAt: number | null;
  cachedAt: number;
}

interface CustomerEntry {
  customer: CustomerRow;
  generation: number;
  cachedAt: number;
}

export interface CredentialCacheOptions {
  ttlMs: number;
  maxEntries: number;
  lazyCreatePerMinute: number;
}

export class CredentialCache {
  private readonly keys = new Map<string, KeyEntry>();
  private readonly customers = new Map<string, CustomerEntry>();

  constructor(
    private readonly db: Db,
    private readonly limiter: RateLimiter,
    private readonly options: CredentialCacheOptions,
  ) {}

  /** A `ko_` key, from memory when this process verified it recently; throws the auth codes otherwise. */
  async developerKey(presented: string, now = Date.now()): Promise<VerifiedKey> {
    const digest = hash('sha256', presented, 'base64');
    const cached = this.keys.get(digest);
    if (cached && now - cached.cachedAt < this.options.ttlMs && (cached.expiresAt === null || cached.expiresAt > now)) return cached;
    this.keys.delete(digest);
    const verified = await lookupDeveloperKey(this.db, presented, new Date(now));
    remember(this.keys, digest, { principal: verified.principal, generation: verified.generation, expiresAt: verified.expiresAt?.getTime() ?? null, cachedAt: now }, this.options.maxEntries);
    return verified;
  }

  /**
   * The customer a call is attributed to (created on first use where allowed). A cached entry
   * counts only under the generation the caller's key was verified with.
   */
  async customer(developerId: string, generation: number, attribution: Attribution, now = Date.now()): Promise<CustomerRow> {
    const slot = `${developerId}\u0000${attribution.reference}`;
    const cached = this.customers.get(slot);
    if (cached && cached.generation === generation && now - cached.cachedAt < this.options.ttlMs) return cached.customer;
    this.customers.delete(slot);
    const customer = await attributeCustomer(this.db, this.limiter, developerId, attribution, this.options.lazyCreatePerMinute);
    remember(this.customers, slot, { customer, generation, cachedAt: now }, this.options.maxEntries);
    return customer;
  }

  /** Drops a presented key's entry, so the next look-up reads PostgreSQL. */
  forgetKey(presented: string): void {
    this.keys.delete(hash('sha256', presented, 'base64'));
  }
}

/** Map insertion order makes the first entry the oldest: evict it when full. */
function remember<T>(map: Map<string, T>, key: string, value: T, maxEntries: number): void {
  if (map.size >= maxEntries) map.delete(map.keys().next().value!);
  map.set(key, value);
}
