/**
 * Rows recall ranks its candidates by, kept per process for the owners (brains, pack versions)
 * recalled most recently. A 100,000-entry recall reads the entry versions of 256 to 400 candidates
 * a draw, some 3 ms of PostgreSQL (that many primary-key lookups) in a recall of about 25 on this
 * project's 2-core machine, and a brain read again and again reads the same versions; a reference
 * mount's draws read their pack entries' facts the same way.
 *
 * An owner's rows are good for as long as its stamp stays: a brain's entry versions change only by
 * their use count and last use, which learn passes move in place (countUses) together with the
 * brain's usage_seq, its stamp; a pack version never changes (one stamp for ever). A read under a
 * newer stamp starts the owner's rows over; a read that began under an older stamp than the
 * cache's neither uses nor adds to it, since what it reads may be older than what is kept.
 *
 * Bounded by rows: past `maxRows`, the owners read least recently are dropped whole.
 */
export class RowCache<Row> {
  /** By owner, in order of last read (a Map keeps insertion order; an owner read moves to the end). */
  private readonly owners = new Map<string, { stamp: bigint; rows: Map<string, Row> }>();
  private size = 0;

  constructor(private readonly maxRows: number) {}

  /** The rows of `ids` (those that exist): kept ones from memory, the rest by `fetch`, which is given only the missing ids. */
  async read(owner: string, stamp: string | number, ids: string[], fetch: (missing: string[]) => Promise<Map<string, Row>>): Promise<Map<string, Row>> {
    const kept = this.current(owner, BigInt(stamp));
    if (!kept) return fetch(ids);
    const found = new Map<string, Row>();
    const missing: string[] = [];
    for (const id of ids) {
      const row = kept.get(id);
      if (row) found.set(id, row);
      else missing.push(id);
    }
    if (missing.length === 0) return found;
    const fetched = await fetch(missing);
    for (const [id, row] of fetched) found.set(id, row);
    // The owner's rows may have started over (or been dropped) while this read ran: add only to the ones it was read for.
    if (this.owners.get(owner)?.rows === kept) {
      // Two reads of the owner may both have fetched a row: it is counted once.
      for (const [id, row] of fetched) {
        if (!kept.has(id)) this.size += 1;
        kept.set(id, row);
      }
      this.trim(owner);
    }
    return found;
  }

  /** Rows kept for an owner (for tests and metrics). */
  keptFor(owner: string): number {
    return this.owners.get(owner)?.rows.size ?? 0;
  }

  /** The owner's rows as of `stamp`, now the most recently read; undefined when those kept are of a newer stamp. */
  private current(owner: string, stamp: bigint): Map<string, Row> | undefined {
    const known = this.owners.get(owner);
    if (known && known.stamp > stamp) return undefined;
    this.owners.delete(owner);
    if (known?.stamp === stamp) {
      this.owners.set(owner, known);
      return known.rows;
    }
    if (known) this.size -= known.rows.size;
    const fresh = { stamp, rows: new Map<string, Row>() };
    this.owners.set(owner, fresh);
    return fresh.rows;
  }

  /** Drops the owners read least recently until the rows fit; the owner just read goes last of all, and alone over the budget starts over. */
  private trim(keep: string): void {
    for (const [owner, entry] of this.owners) {
      if (this.size <= this.maxRows) return;
      if (owner === keep) continue;
      this.owners.delete(owner);
      this.size -= entry.rows.size;
    }
    const kept = this.owners.get(keep);
    if (kept && this.size > this.maxRows) {
      this.size -= kept.rows.size;
      kept.rows.clear();
    }
  }
}

/** A pack version never changes: its rows are kept under this one stamp. */
export const IMMUTABLE = 0;
