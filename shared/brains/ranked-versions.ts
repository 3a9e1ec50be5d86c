import type { Queryable } from '../db/pool.js';
import * as repo from './repository.js';

/**
 * What recall ranks each candidate by (its entry version's class, type, trust, scope, anchors and
 * use count), kept per process for the brains recalled most recently. A 100,000-entry recall reads
 * the versions of 256 to 400 candidates a draw, some 3 ms of PostgreSQL (that many primary-key
 * lookups) in a recall of about 25 on this project's 2-core machine, and the same versions again
 * and again while a brain is read.
 *
 * An entry version never changes but for its use count and last use, which learn passes move in
 * place (countUses), and its end (valid_to, which recall does not rank by). Every such move also
 * moves the brain's usage_seq in the same transaction, so a brain's cached versions are good for
 * as long as its usage_seq stays what it was when they were read; a recall that finds another
 * usage_seq starts the brain's cache over. A recall that began under an older usage_seq than the
 * cache's neither reads from nor adds to it: what it reads may be older than the cache.
 *
 * Bounded by rows: past `maxRows`, the brains recalled least recently are dropped whole.
 */
export class RankedVersions {
  /** By brain, in order of last use (a Map keeps insertion order; a brain used is moved to the end). */
  private readonly brains = new Map<string, { usageSeq: string; versions: Map<string, repo.RankedVersion> }>();
  private rows = 0;

  constructor(private readonly maxRows: number) {}

  /** The ranked versions of `versionIds` in `brain`: cached ones from memory, the rest read on `q` (recall's search connection). */
  async read(q: Queryable, brain: Pick<repo.BrainRow, 'id' | 'usage_seq'>, versionIds: string[]): Promise<Map<string, repo.RankedVersion>> {
    const cache = this.current(brain);
    if (!cache) return repo.versionsByIds(q, versionIds);
    const found = new Map<string, repo.RankedVersion>();
    const missing: string[] = [];
    for (const id of versionIds) {
      const version = cache.get(id);
      if (version) found.set(id, version);
      else missing.push(id);
    }
    if (missing.length === 0) return found;
    const read = await repo.versionsByIds(q, missing);
    for (const [id, version] of read) found.set(id, version);
    // The brain's cache may have started over (or been dropped) while this read ran: add only to the one it was read for.
    if (this.brains.get(brain.id)?.versions === cache) {
      for (const [id, version] of read) cache.set(id, version);
      this.rows += read.size;
      this.trim(brain.id);
    }
    return found;
  }

  /** Versions cached for the brain (for tests and metrics). */
  cachedFor(brainId: string): number {
    return this.brains.get(brainId)?.versions.size ?? 0;
  }

  /** The brain's cache as of its usage_seq, now the most recently used; undefined when the cache is newer than the caller's read of the brain. */
  private current(brain: Pick<repo.BrainRow, 'id' | 'usage_seq'>): Map<string, repo.RankedVersion> | undefined {
    const known = this.brains.get(brain.id);
    if (known && BigInt(known.usageSeq) > BigInt(brain.usage_seq)) return undefined;
    this.brains.delete(brain.id);
    if (known?.usageSeq === brain.usage_seq) {
      this.brains.set(brain.id, known);
      return known.versions;
    }
    if (known) this.rows -= known.versions.size;
    const fresh = { usageSeq: brain.usage_seq, versions: new Map<string, repo.RankedVersion>() };
    this.brains.set(brain.id, fresh);
    return fresh.versions;
  }

  /** Drops the brains recalled least recently until the rows fit; the brain just read goes last of all, and alone over the budget starts over. */
  private trim(keep: string): void {
    for (const [brainId, entry] of this.brains) {
      if (this.rows <= this.maxRows) return;
      if (brainId === keep) continue;
      this.brains.delete(brainId);
      this.rows -= entry.versions.size;
    }
    const kept = this.brains.get(keep);
    if (kept && this.rows > this.maxRows) {
      this.rows -= kept.versions.size;
      kept.versions.clear();
    }
  }
}
