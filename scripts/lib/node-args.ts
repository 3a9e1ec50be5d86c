/**
 * The V8 flags each platform process runs with. `npm run serve:api` / `serve:worker` in
 * package.json (which the Dockerfile runs) spell out the same flags, and so does `npm run bench`,
 * whose process times the API's domain calls (recall among them) as the API would run them; keep
 * them in step.
 */

/**
 * The API allocates about 50 KB a metered call, so at 1,000 calls a second V8's default 16 MB
 * young generation is collected four times a second, each a 2 ms pause that every request
 * arriving meanwhile waits out. At 32 MB it is collected half as often and each pause takes about
 * as long (what a collection copies is the few calls in flight, not the garbage); at 64 MB a pause
 * grew to 3.5-5.5 ms. Measured with --trace-gc-nvp on the hot-path bench (see README).
 *
 * Two more keep full (mark-compact) collections rare under steady load. A mark-compact pauses the
 * API 4-8 ms and slows it for 30-60 ms more while it marks; at 500 gateway calls a second (bench
 * gateway, --trace-gc) one came every 2-6 s, and each was one of the latency spikes that made the
 * gateway's p99. They came that often because V8 let the old generation grow only ~10 % past what
 * the last one kept, and because a spell idle (the bench's direct runs) shrank the young generation to 1 MB, so that
 * under load again it promoted far more. A young generation of at least 16 MB, and an old one
 * allowed to double before it is collected, left one mark-compact in a 20 s run; added p99 at
 * 500/s went from 6.1-16.4 ms to 2.6-4.8 ms in three runs each. The cost is memory: the heap may
 * hold about twice its live size (~45 MB live here) before a full collection.
 *
 * No allocation-site pretenuring. V8 allocates straight into the old generation from any site whose
 * objects once survived a collection in large numbers. A process that keeps a brain's 100,000 entry
 * versions (row-cache.ts) teaches it exactly that about the sites a recall allocates from: query
 * rows, candidates, composites. A recall's garbage then landed in the old generation, and the young
 * objects it pointed to were copied as if alive. Over 200 recalls of a 100,000-entry brain with
 * V8's default young generation (--trace-gc-nvp), each young collection promoted 1.1 MB with
 * pretenuring and 0.75 MB without, and paused 5.2 ms against 3.4. Under these flags, in two runs
 * of three rounds of 200 recalls each (gc performance entries, rounds after the first),
 * collections paused the recalls for 44-63 ms a round with pretenuring and 16-21 ms without, the
 * longest pause 8.7-15.4 ms against 3.2-8.3; recall p95 17.9-19.7 ms against 16.8-18.9.
 */
export const API_NODE_ARGS = ['--max-semi-space-size=32', '--min-semi-space-size=16', '--heap-growing-percent=100', '--no-allocation-site-pretenuring'];

/** The worker streams batch files and deliveries: a capped heap keeps its memory flat instead of letting V8 grow toward its default ceiling. */
export const WORKER_NODE_ARGS = ['--max-old-space-size=256'];
