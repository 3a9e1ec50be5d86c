import { Piscina } from 'piscina';
import { mergeCompositeTopK, type CompositeTopK, type CompositeTopKInput } from '../scoring/composite.js';
import type { CosineTopKInput, CosineTopKResult } from '../scoring/cosine.js';
import { mergeTopK, type DotTopKInput, type KMeansInput, type KMeansResult, type TopK } from '../scoring/vector-index.js';
import type { SecretFinding, SecretScanInput } from '../scanning/secrets.js';

const TASKS_FILE = new URL('../../workers/tasks/cpu-tasks.mjs', import.meta.url).href;

/** A scan is split across threads only when each share has at least this many rows to score. */
const SPLIT_ROWS = 10_000;
/** The same for a composite scan, which does more a row. */
const COMPOSITE_SPLIT_ROWS = 4_096;

/**
 * CPU-heavy work (cosine scoring, secret scanning) runs on worker threads so the event loop keeps
 * serving requests. Typed arrays are transferred to the thread: the caller gives them up.
 * Index builds (k-means, tens of seconds at 100,000 vectors) run on a thread of their own, made
 * on the first build, so a search never queues behind one: it shares the cores with it instead.
 */
export class CpuPool {
  private readonly piscina: Piscina;
  private builds: Piscina | undefined;

  constructor(private readonly maxThreads: number) {
    // Every thread is kept (they sleep when idle): piscina ends a thread above minThreads as soon as
    // it idles, and starting one again (its isolate, tsx, the scoring modules) cost a split scan
    // about half a second (bench, 2026-11-27).
    this.piscina = new Piscina({ filename: TASKS_FILE, maxThreads, minThreads: maxThreads });
  }

  get threads(): number {
    return this.piscina.threads.length;
  }

  cosineTopK(input: CosineTopKInput): Promise<CosineTopKResult> {
    return this.piscina.run(input, { name: 'cosineTopK', transferList: [input.query.buffer, input.candidates.buffer] as ArrayBuffer[] });
  }

  /**
   * Scores unit vectors held on a SharedArrayBuffer in place; only the query, rows and mask move
   * (transferred). A scan of many rows is split across the pool's threads, each scoring its share
   * of the same shared block, and their top k merged: one exact scan of a large sealed store then
   * takes every core the pool has instead of one.
   */
  async dotTopK(input: DotTopKInput): Promise<TopK> {
    const shares = this.shares(input.rows ? input.rows.length : input.vectors.length / input.dims, SPLIT_ROWS);
    if (shares.length < 2) return this.dotTopKTask(input);
    const { rows: probed, ...rest } = input;
    const parts = await Promise.all(
      shares.map(({ from, to }) =>
        this.dotTopKTask({ ...rest, query: input.query.slice(), ...(input.allowed && { allowed: input.allowed.slice() }), ...(probed ? { rows: probed.slice(from, to) } : { range: { from, to } }) }),
      ),
    );
    return mergeTopK(parts, input.k);
  }

  private dotTopKTask(input: DotTopKInput): Promise<TopK> {
    const transfer = [input.query.buffer, input.rows?.buffer, input.allowed?.buffer].filter((buffer): buffer is ArrayBuffer => buffer instanceof ArrayBuffer);
    return this.piscina.run(input, { name: 'dotTopK', transferList: transfer });
  }

  kMeans(input: KMeansInput): Promise<KMeansResult> {
    const transfer = [input.sampleRows.buffer].filter((buffer): buffer is ArrayBuffer => buffer instanceof ArrayBuffer);
    this.builds ??= new Piscina({ filename: TASKS_FILE, maxThreads: 1, minThreads: 0, idleTimeout: 60_000 });
    return this.builds.run(input, { name: 'kMeans', transferList: transfer });
  }

  /**
   * A strict brain's composite top k over its opened vectors (the shared buffers are read in place;
   * the query, scope mask and rows are transferred), split across the pool's threads as dotTopK's
   * scans are once each share has COMPOSITE_SPLIT_ROWS rows: a 100,000-entry brain's probed lists
   * hold about 10,500, which one thread scored in about 14 ms.
   */
  async compositeTopK(input: CompositeTopKInput): Promise<CompositeTopK> {
    const rows = input.rows ? input.rows.length : Math.min(input.allowed.length, input.vectors.length / input.dims);
    const shares = this.shares(rows, COMPOSITE_SPLIT_ROWS);
    if (shares.length < 2) return this.compositeTopKTask(input);
    const all = input.rows ?? Int32Array.from({ length: rows }, (_, row) => row);
    const parts = await Promise.all(shares.map(({ from, to }) => this.compositeTopKTask({ ...input, query: input.query.slice(), allowed: input.allowed.slice(), rows: all.slice(from, to) })));
    return mergeCompositeTopK(parts, input.k);
  }

  /** A scan of `rows` rows cut into one share a thread, each of at least `minRows` rows; a single share is not worth splitting. */
  private shares(rows: number, minRows: number): { from: number; to: number }[] {
    const count = Math.max(1, Math.min(this.maxThreads, Math.floor(rows / minRows)));
    return Array.from({ length: count }, (_, share) => ({ from: Math.floor((rows * share) / count), to: Math.floor((rows * (share + 1)) / count) }));
  }

  private compositeTopKTask(input: CompositeTopKInput): Promise<CompositeTopK> {
    return this.piscina.run(input, { name: 'compositeTopK', transferList: [input.query.buffer, input.allowed.buffer, input.rows?.buffer].filter((buffer): buffer is ArrayBuffer => buffer instanceof ArrayBuffer) });
  }

  /** secretlint's recommended rules over a batch of texts: the first finding of each that holds a secret. */
  scanSecrets(input: SecretScanInput): Promise<SecretFinding[]> {
    return this.piscina.run(input, { name: 'scanSecrets' });
  }

  async close(): Promise<void> {
    await Promise.all([this.piscina.destroy(), this.builds?.destroy()]);
  }
}
