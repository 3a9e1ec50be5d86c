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
 * newer stamp brings the owner's rows up to it: with the owner's source, by reading only the rows
 * that changed since the stamp kept (a brain's versions whose use moved); without one, by
 * starting them over. A read that began under an older stamp than the cache's neither uses it nor
 * replaces what it holds.
 *
 * An owner can also be kept whole (keepWhole): a 100,000-entry brain's first pass over queries
 * never seen read versions for 1.4 ms at p50 and 4.2 at p95 a draw, its recalls p95 22.6 ms
 * against 18.8 over the same queries once their versions were kept (stage marks, 200 queries).
 * Filled in the background once, up to half of `maxRows`, so one large owner leaves room for
 * others; a newer stamp then costs one read of what changed, not a fill again (under learning a
 * brain's usage_seq moves several times a second).
 *
 * Bounded by rows: past `maxRows`, the owners read least recently are dropped whole.
 */
export class RowCache<Row> {
  /** By owner, in order of last read (a Map keeps insertion order; an owner read moves to the end). */
  private readonly owners = new Map<string, KeptOwner<Row>>();
  private size = 0;

  constructor(private readonly maxRows: number) {}

  /** The rows of `ids` (those that exist): kept ones from memory, the rest by `fetch`, which is given only the missing ids. */
  async read(owner: string, stamp: string | number, ids: string[], fetch: (missing: string[]) => Promise<Map<string, Row>>, source?: OwnerSource<Row>): Promise<Map<string, Row>> {
    const kept = await this.current(owner, BigInt(stamp), source);
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

  /**
   * Keeps every row of the owner, page by page from `source` in the background, brought up to
   * `stamp` first. Filled once for as long as the owner is kept (a newer stamp catches up, it
   * does not fill again); a page adds only rows not kept yet, since a row kept may be newer than
   * the page (caught up meanwhile), and rows written after the fill are read by id as before. The
   * caller reads the stamp before calling, so whatever the pages read is at least that fresh. A
   * fill that fails is reported to `failed` and tried again by the next call.
   */
  keepWhole(owner: string, stamp: string | number, source: OwnerSource<Row>, failed: (error: unknown) => void): void {
    const most = Math.floor(this.maxRows / 2);
    if (most === 0) return;
    void this.current(owner, BigInt(stamp), source).then((kept) => {
      const known = this.owners.get(owner);
      if (!kept || known?.rows !== kept || known.filling) return;
      const filling: Promise<void> = (async () => {
        for await (const page of source.pages(most)) {
          if (this.owners.get(owner)?.rows !== kept) return;
          this.add(owner, kept, page);
        }
      })().catch((error: unknown) => {
        if (known.filling === filling) delete known.filling;
        failed(error);
      });
      known.filling = filling;
    });
  }

  /** Settles when the owner is brought up to date and its fill, if one began, has ended (for benchmarks that measure the steady state). */
  async filled(owner: string): Promise<void> {
    await this.owners.get(owner)?.advancing;
    await this.owners.get(owner)?.filling;
  }

  /** Rows kept for an owner (for tests and metrics). */
  keptFor(owner: string): number {
    return this.owners.get(owner)?.rows.size ?? 0;
  }

  /**
   * Rows not kept yet are added. A row kept stays, since it may be newer than one read by id or by
   * a fill page, unless `replace` (a catch-up's rows, read after the stamp they bring it to).
   */
  private add(owner: string, kept: Map<string, Row>, rows: Map<string, Row>, replace = false): void {
    for (const [id, row] of rows) {
      const known = kept.has(id);
      if (known && !replace) continue;
      kept.set(id, row);
      if (!known) this.size += 1;
    }
    this.trim(owner);
  }

  /** The owner's rows as of `stamp`, now the most recently read; undefined when those kept are of a newer stamp. */
  private async current(owner: string, stamp: bigint, source: OwnerSource<Row> | undefined): Promise<Map<string, Row> | undefined> {
    for (;;) {
      const known = this.owners.get(owner);
      if (known && known.stamp > stamp) return undefined;
      if (known && known.stamp < stamp && source) {
        // One catch-up at a time: a read under a stamp newer still waits for it, then catches up from there.
        known.advancing ??= this.catchUp(owner, known, stamp, source);
        await known.advancing;
        continue;
      }
      this.owners.delete(owner);
      if (known?.stamp === stamp) {
        this.owners.set(owner, known);
        return known.rows;
      }
      if (known) this.size -= known.rows.size;
      const fresh: KeptOwner<Row> = { stamp, rows: new Map() };
      this.owners.set(owner, fresh);
      return fresh.rows;
    }
  }

  /**
   * Brings `known` to `stamp` with the rows that changed since its stamp, read after the caller
   * saw `stamp` (so they are at least that fresh) and put in place of the kept ones. When the read
   * fails, what changed is unknown: the owner is dropped, to start over under the new stamp.
   */
  private async catchUp(owner: string, known: KeptOwner<Row>, stamp: bigint, source: OwnerSource<Row>): Promise<void> {
    try {
      const changed = await source.changedSince(known.stamp);
      if (this.owners.get(owner) !== known) return;
      known.stamp = stamp;
      this.add(owner, known.rows, changed, true);
    } catch {
      if (this.owners.get(owner) === known) {
        this.owners.delete(owner);
        this.size -= known.rows.size;
      }
    } finally {
      delete known.advancing;
    }
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

/** How an owner's rows are read whole, and what changed since a stamp. */
export interface OwnerSource<Row> {
  /** Every row of the owner, a page at a time, at most `most`. */
  pages(most: number): AsyncIterable<Map<string, Row>>;
  /** The rows that changed after the owner's stamp was `since`. */
  changedSince(since: bigint): Promise<Map<string, Row>>;
}

interface KeptOwner<Row> {
  stamp: bigint;
  rows: Map<string, Row>;
  /** The background fill, once one began for these rows. */
  filling?: Promise<void>;
  /** A catch-up to a newer stamp under way. */
  advancing?: Promise<void>;
}

/** A pack version never changes: its rows are kept under this one stamp. */
export const IMMUTABLE = 0;
