import { once } from 'node:events';
import type { HiveServices } from '../../../shared/composition/hive.js';
import { exportRecords } from '../../../shared/hive/export.js';
import { coverage, doctor, map, review, snapshot, stats } from '../../../shared/hive/reports.js';
import { coverageBody, exportBody, reportBody, reviewBody, snapshotBody } from '../../../shared/hive/schemas.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/**
 * Waits until a response takes more (drain) or goes away (close). The wait that loses the race is
 * taken off the response: left, every pause of a long export added a listener for the response's
 * lifetime (Node warned at eleven).
 */
async function drainedOrClosed(res: NodeJS.EventEmitter): Promise<void> {
  const settled = new AbortController();
  try {
    await Promise.race([once(res, 'drain', { signal: settled.signal }), once(res, 'close', { signal: settled.signal })]);
  } finally {
    settled.abort();
  }
}

/** Export, the snapshot and the read-only reports. */
export function reportRoutes(hive: HiveServices): HiveRouteDefinition[] {
  const { db } = hive;
  return [
    hiveRoute({
      method: 'post', path: '/v1/export', summary: 'Every node, memory, version, link, event and task of a project or organisation with every provenance field, streamed as JSON lines', access: 'credential', body: exportBody,
      handle: async ({ res, body, credential }) => {
        const records = exportRecords(hive, credential, body);
        // The first record comes before any header is sent, so a refusal (403) is still an ordinary error answer.
        const first = await records.next();
        res.status(200).setHeader('Content-Type', 'application/x-ndjson; charset=utf-8');
        res.setHeader('Cache-Control', 'no-store');
        try {
          for (let next = first; !next.done; next = await records.next()) {
            // The client went away: stop reading (the request itself is consumed, and so "destroyed", from the start).
            if (res.destroyed) break;
            if (!res.write(`${JSON.stringify(next.value)}\n`)) await drainedOrClosed(res);
          }
        } finally {
          await records.return(undefined);
        }
        res.end();
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/snapshot', summary: 'A readable digest of the store per node and scope, as JSON and Markdown', access: 'credential', body: snapshotBody,
      handle: async ({ res, body, credential }) => {
        res.json(await snapshot(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/stats', summary: 'Report: counts of memories by type, tier, scope and age', access: 'credential', body: reportBody,
      handle: async ({ res, body, credential }) => {
        res.json(await stats(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/map', summary: 'Report: scopes, pins, recent tombstones and measures', access: 'credential', body: reportBody,
      handle: async ({ res, body, credential }) => {
        res.json(await map(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/coverage', summary: 'Report: what the hive holds near a subject, with a verdict', access: 'credential', body: coverageBody,
      handle: async ({ res, body, credential }) => {
        res.json(await coverage(hive, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/review', summary: 'Report: stale memories, those due for re-confirmation, likely duplicates', access: 'credential', body: reviewBody,
      handle: async ({ res, body, credential }) => {
        res.json(await review(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/doctor', summary: 'Report: dangling supersession links, orphans, index drift', access: 'credential', body: reportBody,
      handle: async ({ res, body, credential }) => {
        res.json(await doctor(hive, credential, body));
      },
    }),
  ];
}
