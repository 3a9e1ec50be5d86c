import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, type Config } from '../config.js';

/** AES-256: the master key is 32 bytes. */
const MASTER_KEY_BYTES = 32;

/**
 * The platform's one master key: VECTOR_STORE_MASTER_KEY (32 bytes, base64), required in
 * production. Elsewhere a key is made once and kept in DATA_DIR, so every process of one machine
 * (API, worker, hive, relay) shares it and restarts keep what it sealed readable. It wraps
 * vector-store data keys and byok leases (shared/vector-stores/keyring.ts) and the hive's
 * certificate-authority key (shared/hive/certificate-authority.ts); each use seals with its own
 * associated data, so a value sealed for one purpose never opens as another.
 */
export function loadMasterKey(config: Pick<Config, 'VECTOR_STORE_MASTER_KEY' | 'NODE_ENV' | 'dataDir'>): Buffer {
  if (config.VECTOR_STORE_MASTER_KEY) return config.VECTOR_STORE_MASTER_KEY;
  if (config.NODE_ENV === 'production') throw new ConfigError('invalid configuration:\n  VECTOR_STORE_MASTER_KEY: required when NODE_ENV is production');
  const file = path.join(config.dataDir, 'secrets', 'vector-store-master.key');
  try {
    return decodeMasterKey(readFileSync(file, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  // Written aside, then linked into place: of two processes starting at once, one key wins whole.
  const draft = `${file}.${process.pid}`;
  writeFileSync(draft, randomBytes(MASTER_KEY_BYTES).toString('base64'), { mode: 0o600 });
  try {
    linkSync(draft, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    unlinkSync(draft);
  }
  return decodeMasterKey(readFileSync(file, 'utf8'));
}

export function decodeMasterKey(text: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== MASTER_KEY_BYTES) throw new ConfigError('invalid configuration:\n  VECTOR_STORE_MASTER_KEY: must be 32 bytes, base64-encoded');
  return key;
}
