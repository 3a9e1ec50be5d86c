import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { serviceError } from '../errors.js';
import { derivePassphraseKey, newDataKey, newKdfSalt, open, seal, SealError, storeKeys, type StoreKeys } from './crypto.js';

/** What the keyring needs to know of a store. */
export interface KeyedStore {
  id: string;
  encryption: 'none' | 'managed' | 'byok';
  wrapped_data_key: Buffer | null;
  kdf_salt: Buffer | null;
}

export const LEASE_DEFAULT_SECONDS = 3_600;
export const LEASE_MAX_SECONDS = 86_400;
/** A passphrase sent per request (Svc-Vector-Store-Key) is derived once and kept this long in this process. */
const HEADER_KEY_CACHE_MS = 60_000;

/**
 * The data keys of encrypted stores. A managed store's key is unwrapped with the master key; a
 * byok store's key is unwrapped with a key derived from its passphrase, which arrives with the
 * request (header Svc-Vector-Store-Key) or was given to POST /unlock, whose lease lives in Redis
 * with a time to live. Redis only ever holds a lease's data key wrapped by the master key, so
 * neither Redis nor PostgreSQL alone can open a byok store, and the passphrase is never stored.
 */
export class VectorStoreKeyring {
  private readonly headerKeys = new Map<string, { dataKey: Buffer; until: number }>();

  constructor(
    private readonly masterKey: Buffer,
    private readonly redis: Redis,
    private readonly redisPrefix: string,
  ) {}

  /** The wrapped key columns of a new store. */
  async createStoreKey(storeId: string, encryption: KeyedStore['encryption'], passphrase?: string): Promise<{ wrapped_data_key: Buffer | null; kdf_salt: Buffer | null; dataKey: Buffer | null }> {
    if (encryption === 'none') return { wrapped_data_key: null, kdf_salt: null, dataKey: null };
    const dataKey = newDataKey();
    if (encryption === 'managed') return { wrapped_data_key: seal(this.masterKey, dataKey, wrapAad(storeId)), kdf_salt: null, dataKey };
    const salt = newKdfSalt();
    const wrappingKey = await derivePassphraseKey(passphrase!, salt);
    return { wrapped_data_key: seal(wrappingKey, dataKey, wrapAad(storeId)), kdf_salt: salt, dataKey };
  }

  /**
   * The store's data key for this request, or null for a plaintext store. A byok store needs its
   * passphrase in the request or a live lease: otherwise 409 vector_store_locked.
   */
  async dataKey(store: KeyedStore, passphrase?: string): Promise<Buffer | null> {
    switch (store.encryption) {
      case 'none':
        return null;
      case 'managed':
        return this.unwrap(this.masterKey, store, 'managed');
      case 'byok': {
        if (passphrase !== undefined && passphrase !== '') return this.unwrapWithPassphrase(store, passphrase);
        const lease = await this.redis.getBuffer(this.leaseKey(store.id));
        if (!lease) throw serviceError('vector_store_locked');
        try {
          return open(this.masterKey, lease, leaseAad(store.id));
        } catch {
          throw serviceError('vector_store_locked');
        }
      }
    }
  }

  async keys(store: KeyedStore, passphrase?: string): Promise<StoreKeys | null> {
    const dataKey = await this.dataKey(store, passphrase);
    return dataKey && storeKeys(dataKey);
  }

  /** POST /v1/vector_stores/{id}/unlock: checks the passphrase and leases the key for `ttlSeconds`. */
  async unlock(store: KeyedStore, passphrase: string, ttlSeconds: number): Promise<{ expiresAt: Date }> {
    if (store.encryption !== 'byok') throw serviceError('not_a_byok_store');
    const dataKey = await this.unwrapWithPassphrase(store, passphrase);
    await this.redis.set(this.leaseKey(store.id), seal(this.masterKey, dataKey, leaseAad(store.id)), 'EX', ttlSeconds);
    return { expiresAt: new Date(Date.now() + ttlSeconds * 1000) };
  }

  /** Ends a lease at once (DELETE /v1/vector_stores/{id}/unlock). */
  async lock(store: KeyedStore): Promise<void> {
    if (store.encryption !== 'byok') throw serviceError('not_a_byok_store');
    await this.redis.del(this.leaseKey(store.id));
  }

  async leaseExpiresAt(store: KeyedStore): Promise<Date | null> {
    if (store.encryption !== 'byok') return null;
    const ms = await this.redis.pttl(this.leaseKey(store.id));
    return ms > 0 ? new Date(Date.now() + ms) : null;
  }

  /** A data key handed to a queued job (ingest of a byok store), wrapped by the master key. */
  wrapForJob(storeId: string, dataKey: Buffer): string {
    return seal(this.masterKey, dataKey, jobAad(storeId)).toString('base64');
  }

  unwrapForJob(storeId: string, wrapped: string): Buffer {
    return open(this.masterKey, Buffer.from(wrapped, 'base64'), jobAad(storeId));
  }

  private async unwrapWithPassphrase(store: KeyedStore, passphrase: string): Promise<Buffer> {
    const cacheKey = createHash('sha256').update(store.id).update(store.kdf_salt!).update(passphrase).digest('base64');
    const cached = this.headerKeys.get(cacheKey);
    if (cached && cached.until > Date.now()) return cached.dataKey;
    const wrappingKey = await derivePassphraseKey(passphrase, store.kdf_salt!);
    const dataKey = this.unwrap(wrappingKey, store, 'byok');
    this.headerKeys.set(cacheKey, { dataKey, until: Date.now() + HEADER_KEY_CACHE_MS });
    if (this.headerKeys.size > 1_000) this.headerKeys.delete(this.headerKeys.keys().next().value!);
    return dataKey;
  }

  private unwrap(wrappingKey: Buffer, store: KeyedStore, kind: 'managed' | 'byok'): Buffer {
    try {
      return open(wrappingKey, store.wrapped_data_key!, wrapAad(store.id));
    } catch (error) {
      if (error instanceof SealError && kind === 'byok') throw serviceError('invalid_passphrase', { param: 'passphrase' });
      throw error;
    }
  }

  private leaseKey(storeId: string): string {
    return `${this.redisPrefix}:vs-lease:${storeId}`;
  }
}

const wrapAad = (storeId: string) => `data key of ${storeId}`;
const leaseAad = (storeId: string) => `lease of ${storeId}`;
const jobAad = (storeId: string) => `ingest job of ${storeId}`;

// The master key is the platform's, shared with the hive's certificate authority (shared/platform/master-key.ts).
export { decodeMasterKey, loadMasterKey } from '../platform/master-key.js';
