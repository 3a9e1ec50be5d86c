import type { Response } from 'express';
import type { RouteResponse } from './route-table.js';

/**
 * How soon to read unfinished work again. The openai SDK's poll helpers (`runs.poll`,
 * `vectorStores.files.poll`, `vectorStores.fileBatches.poll`, and the `createAndPoll`,
 * `uploadAndPoll`, `createAndRunPoll` and `submitToolOutputsAndPoll` built on them) sleep between
 * retrieves for as many milliseconds as the last retrieve's `openai-poll-after-ms` says (unless
 * given pollIntervalMs), and 5 s without it. The create answers carry it too, for pollers of their
 * own. It is sent while the object is in a status those loops wait on, and left off once it is terminal.
 */
export const POLL_AFTER_HEADER = 'openai-poll-after-ms';

const PACES = {
  // A run's step is one model call, queued and started by a workflow: well under a second here.
  run: { afterMs: 200, while: ['queued', 'in_progress', 'cancelling'] },
  // A file's ingest (parse, chunk, embed, index) is a few queue stages of tens of milliseconds each.
  vector_store_file: { afterMs: 250, while: ['in_progress'] },
  // Up to 500 such ingests, run side by side.
  vector_store_file_batch: { afterMs: 500, while: ['in_progress'] },
  // A batch validates its file, then runs its lines a chunk at a time: seconds at least.
  batch: { afterMs: 1_000, while: ['validating', 'in_progress', 'finalizing', 'cancelling'] },
} satisfies Record<string, { afterMs: number; while: readonly string[] }>;

export type PolledWork = keyof typeof PACES;

/** Sets the header when `object` is still under way, and hands the object back: `res.json(paced(res, 'run', run))`. */
export function paced<T extends { status: string }>(res: Response, work: PolledWork, object: T): T {
  const pace = PACES[work];
  if ((pace.while as readonly string[]).includes(object.status)) res.setHeader(POLL_AFTER_HEADER, String(pace.afterMs));
  return object;
}

/** The header as a polled route's OpenAPI response describes it. */
export const POLLED_RESPONSE: Partial<RouteResponse> = {
  headers: { [POLL_AFTER_HEADER]: 'While the work is unfinished: milliseconds to wait before reading it again (the openai SDK poll helpers wait that long). Absent once it is terminal.' },
};
