import type { Request } from 'express';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { createBrain, deleteBrain, getBrain, listBrains, updateBrain } from '../../shared/brains/brains.js';
import { deleteEntry, getEntry, listEntries, listScopes, patchEntry, putEntry } from '../../shared/brains/entries.js';
import { getEntity, listEntities } from '../../shared/brains/entities.js';
import { controlAutotune } from '../../shared/brains/autotune.js';
import { forget } from '../../shared/brains/forget.js';
import { observe } from '../../shared/brains/learning.js';
import { decideProposal, listConflicts, listProposals, resolveConflict } from '../../shared/brains/review.js';
import { recall } from '../../shared/brains/recall.js';
import { getReindexJob, reindex, rollbackReindex } from '../../shared/brains/reindex.js';
import {
  autotuneBody, brainListQuery, conflictResolutionBody, createBrainBody, entityListQuery, entryListQuery, forgetBody, observeBody, observeQuery, patchEntryBody, proposalDecisionBody,
  putEntryBody, recallBody, reindexBody, reviewListQuery, scopeListQuery, updateBrainBody,
} from '../../shared/brains/schemas.js';
import { IdempotencyStore } from '../../shared/inference/idempotency.js';
import { principalOf } from '../middleware/authenticate.js';
import { meteredCallOf } from '../middleware/metered-call.js';
import { developerKey, metered, route, type RouteDefinition } from '../route-table.js';

/**
 * Brains (spec 2), behind SVC_BRAINS_ENABLED: off, none of these routes is mounted and every
 * /v1/brains path answers 404. Writes that embed and recall are metered calls: Svc-Customer (or
 * the body's `user`) bills their embeddings to that customer. Entry writes honour Idempotency-Key.
 */
export function brainRoutes(platform: GatewayServices): RouteDefinition[] {
  if (!platform.config.SVC_BRAINS_ENABLED) return [];
  const surface = 'brains';
  const write = developerKey('api:write');
  const read = developerKey('api:read');
  const developer = (req: Request) => principalOf(req).accountId;
  const idempotency = new IdempotencyStore(platform.redis, platform.config.REDIS_KEY_PREFIX);

  /** An entry write once per Idempotency-Key (24 h); without one, every request writes. */
  const once = <T>(req: Request, body: unknown, work: () => Promise<T>): Promise<T> => {
    const key = req.get('idempotency-key');
    if (!key) return work();
    const call = meteredCallOf(req);
    return idempotency.run({ developerId: call.developerId, customerId: call.customer?.id ?? null, key: `brain-entry:${req.method}:${req.path}:${key}` }, body, work).then((outcome) => outcome.result);
  };

  return [
    route({
      method: 'post', path: '/v1/brains', surface, summary: 'Create a brain', access: write,
      input: { body: createBrainBody },
      handle: async (req, res, { body }) => res.json(await createBrain(platform, developer(req), body)),
    }),
    route({
      method: 'get', path: '/v1/brains', surface, summary: 'List brains (offset pagination, 100 a page by default)', access: read,
      input: { query: brainListQuery },
      handle: async (req, res, { query }) => res.json(await listBrains(platform, developer(req), query)),
    }),
    route({
      method: 'get', path: '/v1/brains/:id', surface, summary: 'Retrieve a brain', access: read,
      handle: async (req, res, { params }) => res.json(await getBrain(platform, developer(req), params.id)),
    }),
    route({
      method: 'patch', path: '/v1/brains/:id', surface, summary: "Update a brain's name, encryption (while empty) or memory_policy", access: write,
      input: { body: updateBrainBody },
      handle: async (req, res, { params, body }) => res.json(await updateBrain(platform, developer(req), params.id, body)),
    }),
    route({
      method: 'delete', path: '/v1/brains/:id', surface, summary: 'Delete a brain (its content is removed by a workflow)', access: write,
      handle: async (req, res, { params }) => res.json(await deleteBrain(platform, developer(req), params.id)),
    }),
    route({
      method: 'put', path: '/v1/brains/:id/entries', surface, summary: 'Write an entry (embedded in the request; Idempotency-Key honoured)',
      access: metered('api:write', null), input: { body: putEntryBody },
      handle: async (req, res, { params, body }) => res.json(await once(req, body, () => putEntry(platform, developer(req), meteredCallOf(req), params.id, body))),
    }),
    route({
      method: 'get', path: '/v1/brains/:id/entries', surface, summary: "List a brain's entries, newest first", access: read,
      input: { query: entryListQuery },
      handle: async (req, res, { params, query }) => res.json(await listEntries(platform, developer(req), params.id, query)),
    }),
    route({
      method: 'get', path: '/v1/brains/:id/entries/:entryId', surface, summary: 'Retrieve an entry (decrypted)', access: read,
      handle: async (req, res, { params }) => res.json(await getEntry(platform, developer(req), params.id, params.entryId)),
    }),
    route({
      method: 'patch', path: '/v1/brains/:id/entries/:entryId', surface, summary: 'Change some fields of an entry (re-embeds only when title, body or class change)',
      access: metered('api:write', null), input: { body: patchEntryBody },
      handle: async (req, res, { params, body }) => res.json(await once(req, body, () => patchEntry(platform, developer(req), meteredCallOf(req), params.id, params.entryId, body))),
    }),
    route({
      method: 'delete', path: '/v1/brains/:id/entries/:entryId', surface, summary: 'Delete an entry (it stays visible to recall as_of earlier instants)', access: write,
      handle: async (req, res, { params }) => res.json(await deleteEntry(platform, developer(req), params.id, params.entryId)),
    }),
    route({
      method: 'get', path: '/v1/brains/:id/scopes', surface, summary: 'Scopes at or below a scope, with their entry counts', access: read,
      input: { query: scopeListQuery },
      handle: async (req, res, { params, query }) => res.json(await listScopes(platform, developer(req), params.id, query)),
    }),
    route({
      method: 'get', path: '/v1/brains/:id/entities', surface, summary: 'Entities at or below a scope, with their linked entry counts (name: exact lookup)', access: read,
      input: { query: entityListQuery },
      handle: async (req, res, { params, query }) => res.json(await listEntities(platform, developer(req), params.id, query)),
    }),
    route({
      method: 'get', path: '/v1/brains/:id/entities/:entityId', surface, summary: 'Retrieve an entity with its relations', access: read,
      handle: async (req, res, { params }) => res.json(await getEntity(platform, developer(req), params.id, params.entityId)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/recall', surface, summary: 'Recall: composite-ranked hits, with explain, misses and as_of',
      access: metered('api:read', null), input: { body: recallBody },
      handle: async (req, res, { params, body }) => res.json(await recall(platform, developer(req), meteredCallOf(req), params.id, body)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/forget', surface, summary: 'Forget a scope and its descendants, a source, or an entity: every version erased (dry_run previews, preview_token guards)', access: write,
      input: { body: forgetBody },
      handle: async (req, res, { params, body }) => res.json(await forget(platform, developer(req), params.id, body)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/reindex', surface, summary: 'Reindex to another embedding model: the estimate, or with confirm the job (201)',
      access: metered('api:write', null), input: { body: reindexBody },
      handle: async (req, res, { params, body }) => {
        const outcome = await reindex(platform, developer(req), meteredCallOf(req), params.id, body);
        res.status(outcome.status).json(outcome.body);
      },
    }),
    route({
      method: 'get', path: '/v1/brains/:id/reindex/:jobId', surface, summary: 'A reindex job: status, chunks_done, chunks_total, rollback_expires_at', access: read,
      handle: async (req, res, { params }) => res.json(await getReindexJob(platform, developer(req), params.id, params.jobId)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/reindex/:jobId/rollback', surface, summary: 'Roll a completed reindex back, within 7 days (202; the job turns rolling_back)', access: write,
      handle: async (req, res, { params }) => res.status(202).json(await rollbackReindex(platform, developer(req), params.id, params.jobId)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/observe', surface, summary: 'Learn from a transcript: 202 while the pass learns, or its outcome with wait (body or query)',
      access: metered('api:write', null), input: { body: observeBody, query: observeQuery },
      handle: async (req, res, { params, body, query }) => {
        const outcome = await observe(platform, developer(req), meteredCallOf(req), params.id, body, { idempotencyKey: req.get('idempotency-key'), wait: body.wait ?? query.wait === 'true' });
        res.status(outcome.status).json(outcome.body);
      },
    }),
    route({
      method: 'get', path: '/v1/brains/:id/proposals', surface, summary: 'Pending review proposals, oldest first', access: read,
      input: { query: reviewListQuery },
      handle: async (req, res, { params, query }) => res.json(await listProposals(platform, developer(req), params.id, query)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/proposals', surface, summary: 'Approve (write the memory) or reject a proposal',
      access: metered('api:write', null), input: { body: proposalDecisionBody },
      handle: async (req, res, { params, body }) => res.json(await decideProposal(platform, developer(req), meteredCallOf(req), params.id, body)),
    }),
    route({
      method: 'get', path: '/v1/brains/:id/conflicts', surface, summary: 'Open conflicts: a turn that contradicted a stored memory', access: read,
      input: { query: reviewListQuery },
      handle: async (req, res, { params, query }) => res.json(await listConflicts(platform, developer(req), params.id, query)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/conflicts', surface, summary: 'Resolve a conflict: keep the memory, or accept the incoming statement',
      access: metered('api:write', null), input: { body: conflictResolutionBody },
      handle: async (req, res, { params, body }) => res.json(await resolveConflict(platform, developer(req), meteredCallOf(req), params.id, body)),
    }),
    route({
      method: 'post', path: '/v1/brains/:id/autotune', surface, summary: 'Freeze autotune (keep the learnt tier weights) or reset it', access: write,
      input: { body: autotuneBody },
      handle: async (req, res, { params, body }) => res.json(await controlAutotune(platform, developer(req), params.id, body.action)),
    }),
  ];
}
