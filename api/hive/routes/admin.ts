import type { HiveServices } from '../../../shared/composition/hive.js';
import { requestEmbedSweep } from '../../../shared/hive/compliance/embed-sweep.js';
import { requestErasure } from '../../../shared/hive/compliance/erasure.js';
import { holdAction } from '../../../shared/hive/compliance/holds.js';
import { readJob } from '../../../shared/hive/compliance/jobs.js';
import { requestRetention } from '../../../shared/hive/compliance/retention.js';
import { embedBody, eraseBody, holdBody, jobBody, retentionBody, settingsBody } from '../../../shared/hive/compliance/schemas.js';
import { nodeSettings } from '../../../shared/hive/compliance/settings.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/**
 * Compliance (spec 3): owner on the organisation, except settings (admin on the node). Retention,
 * erasure and the embedding sweep are workflows: the route waits up to `wait_seconds` (20) for the
 * result (200), else answers 202 with the job, which POST /v1/admin/job reads until completed. A
 * hold placed or lifted and settings replaced are short workflows the route waits for.
 */
export function adminRoutes(hive: HiveServices): HiveRouteDefinition[] {
  return [
    hiveRoute({
      method: 'post', path: '/v1/admin/retention', summary: "Sweep the organisation's retention rules: a dry run naming what would go, unless apply", access: 'credential', body: retentionBody,
      handle: async ({ res, body, credential }) => {
        const { status, job } = await requestRetention(hive, credential, body);
        res.status(status).json(job);
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/admin/erase', summary: 'Erase what one person wrote and their attribution; 409, queued, under a legal hold', access: 'credential', body: eraseBody,
      handle: async ({ res, body, credential }) => {
        const { status, job } = await requestErasure(hive, credential, body);
        res.status(status).json(job);
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/admin/hold', summary: 'Place a legal hold on a node, lift one by id, or list them', access: 'credential', body: holdBody,
      handle: async ({ res, body, credential }) => {
        const answer = await holdAction(hive, credential, body);
        res.status(body.action === 'place' ? 201 : 200).json(answer);
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/admin/settings', summary: "Read, or replace whole, a node's retention map, sensitivity and audit-row lifetime", access: 'credential', body: settingsBody,
      handle: async ({ res, body, credential }) => {
        res.json(await nodeSettings(hive, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/admin/embed', summary: 'Run the embedding sweep now: embed what has no vector of the configured model', access: 'credential', body: embedBody,
      handle: async ({ res, body, credential }) => {
        const { status, job } = await requestEmbedSweep(hive, credential, body);
        res.status(status).json(job);
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/admin/job', summary: 'One compliance job (retention, erasure, embedding sweep) with its result', access: 'credential', body: jobBody,
      handle: async ({ res, body, credential }) => {
        res.json(await readJob(hive, credential, body.id));
      },
    }),
  ];
}
