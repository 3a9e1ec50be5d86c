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
 *
 * An owner can also be filled whole (fill): a 100,000-entry brain's first pass over queries never
 * seen read versions for 1.4 ms at p50 and 4.2 at p95 a draw, its recalls p95 22.6 ms against
 * 18.8 over the same queries once their versions were kept (stage marks, 200 queries). Filled in
 * the background once a stamp, up to half of `maxRows`, so one large owner leaves room for others.
 */
export class RowCache<Row> {
  /** By owner, in order of last read (a Map keeps insertion order; an owner read moves to the end). */
  private readonly owners = new Map<string, { stamp: bigint; rows: Map<string, Row>; filling?: Promise<void> }>();
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
    if (this.owners.get(owner)?.rows === kept) this.add(owner, kept, fetched);
    return found;
  }

  /** Two reads of the owner (or a read and its fill) may both have fetched a row: it is counted once. */
  private add(owner: string, kept: Map<string, Row>, rows: Map<string, Row>): void {
    for (const [id, row] of rows) {
      if (!kept.has(id)) this.size += 1;
      kept.set(id, row);
    }
    this.trim(owner);
  }

  /**
   * Keeps every row of the owner as of `stamp`, page by page from `pages` (given the most rows to
   * read), in the background: started once a stamp, and only while that stamp is the owner's
   * newest. A page is added only while the owner's rows are still the ones the fill began with
   * (a newer stamp starts them over); rows written after the fill are read by id as before. The
   * caller reads the stamp before calling, so whatever the pages read is at least that fresh. A
   * fill that fails is reported to `failed` and tried again by the next call under the stamp.
   */
  fill(owner: string, stamp: string | number, pages: (most: number) => AsyncIterable<Map<string, Row>>, failed: (error: unknown) => void): void {
    const most = Math.floor(this.maxRows / 2);
    const kept = this.current(owner, BigInt(stamp));
    const known = this.owners.get(owner);
    if (!kept || !known || known.filling || most === 0) return;
    const filling: Promise<void> = (async () => {
      for await (const page of pages(most)) {
        if (this.owners.get(owner)?.rows !== kept) return;
        this.add(owner, kept, page);
      }
    })().catch((error: unknown) => {
      if (known.filling === filling) delete known.filling;
      failed(error);
    });
    known.filling = filling;
  }

  /** Settles when the owner's fill under its current stamp has ended (for benchmarks that measure the steady state). */
  filled(owner: string): Promise<void> {
    return this.owners.get(owner)?.filling ?? Promise.resolve();
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
