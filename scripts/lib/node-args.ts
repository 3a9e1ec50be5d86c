/**
 * The V8 flags each platform process runs with. `npm run serve:api` / `serve:worker` in
 * package.json (which the Dockerfile runs) spell out the same flags; keep them in step.
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
 */
export const API_NODE_ARGS = ['--max-semi-space-size=32', '--min-semi-space-size=16', '--heap-growing-percent=100'];

/** The worker streams batch files and deliveries: a capped heap keeps its memory flat instead of letting V8 grow toward its default ceiling. */
export const WORKER_NODE_ARGS = ['--max-old-space-size=256'];
