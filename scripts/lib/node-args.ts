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
 */
export const API_NODE_ARGS = ['--max-semi-space-size=32'];

/** The worker streams batch files and deliveries: a capped heap keeps its memory flat instead of letting V8 grow toward its default ceiling. */
export const WORKER_NODE_ARGS = ['--max-old-space-size=256'];
