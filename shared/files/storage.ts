import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * Where file bytes live. One interface, so a deployment can put them elsewhere (object storage)
 * without touching the files or batches domains; the default keeps them on local disk.
 */
export interface FileStorage {
  /**
   * Streams `source` into the object `key`. The object appears whole or not at all: a write that
   * fails (or passes `maxBytes`) leaves nothing behind. The sha256 is computed while streaming.
   */
  write(key: string, source: Readable | AsyncIterable<string | Buffer>, options?: { maxBytes?: number }): Promise<StoredObject>;
  /** A stream of the object's bytes. */
  read(key: string): Readable;
  /** Size in bytes, or undefined when the object does not exist. */
  size(key: string): Promise<number | undefined>;
  /** Removes the object; removing a missing one is not an error. */
  delete(key: string): Promise<void>;
}

export interface StoredObject {
  bytes: number;
  sha256: string;
}

/** The write passed its size limit; the caller turns it into its own error (413 for uploads). */
export class StorageLimitError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the object is larger than ${maxBytes} bytes`);
    this.name = 'StorageLimitError';
  }
}

/**
 * Files on local disk under `<root>/<two characters of the key>/<key>`. A write goes to a
 * temporary name in the same directory, is fsynced, then renamed into place, so a crash never
 * leaves a half-written object under its real name.
 */
export class LocalDiskStorage implements FileStorage {
  constructor(private readonly root: string) {}

  async write(key: string, source: Readable | AsyncIterable<string | Buffer>, options: { maxBytes?: number } = {}): Promise<StoredObject> {
    const target = this.pathOf(key);
    const directory = path.dirname(target);
    await mkdir(directory, { recursive: true });
    const temporary = path.join(directory, `.${path.basename(target)}.${randomBytes(6).toString('hex')}.partial`);
    const hash = createHash('sha256');
    let bytes = 0;
    const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
    const meter = new Transform({
      transform(chunk: Buffer | string, _encoding, done) {
        const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        bytes += buffer.length;
        if (bytes > maxBytes) {
          done(new StorageLimitError(maxBytes));
          return;
        }
        hash.update(buffer);
        done(null, buffer);
      },
    });
    try {
      await pipeline(source, meter, createWriteStream(temporary, { flags: 'wx' }));
      const handle = await open(temporary, 'r');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, target);
      await syncDirectory(directory);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
    return { bytes, sha256: hash.digest('hex') };
  }

  read(key: string): Readable {
    return createReadStream(this.pathOf(key), { highWaterMark: 256 * 1024 });
  }

  async size(key: string): Promise<number | undefined> {
    try {
      return (await stat(this.pathOf(key))).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  private pathOf(key: string): string {
    if (!/^[A-Za-z0-9_.-]{1,200}$/.test(key) || key.startsWith('.')) throw new Error(`invalid storage key: ${key}`);
    // Spread over subdirectories by the first characters after the id prefix.
    const start = key.indexOf('_') + 1;
    return path.join(this.root, key.slice(start, start + 2).replace(/\./g, '_') || '__', key);
  }
}

/** The rename is durable only once the directory entry is on disk too. */
async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, 'r');
  try {
    await handle.sync();
  } catch {
    // Some filesystems refuse fsync on a directory; the rename itself has happened.
  } finally {
    await handle.close();
  }
}

const storages = new Map<string, FileStorage>();

/** The process's storage for a data directory: `<dataDir>/files`. */
export function fileStorageFor(config: { dataDir: string }): FileStorage {
  const root = path.join(config.dataDir, 'files');
  let storage = storages.get(root);
  if (!storage) {
    storage = new LocalDiskStorage(root);
    storages.set(root, storage);
  }
  return storage;
}
