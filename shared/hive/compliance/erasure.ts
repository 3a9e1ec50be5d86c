import { withTransaction } from '../../db/pool.js';
import { newId } from '../../ids.js';
import type { HiveCredential } from '../access.js';
import { hiveError } from '../errors.js';
import { itemTotals, ownedOrganisation, PAGE_SIZE, startAndAwaitJob, startCommittedJob, viewJob, type ComplianceServices } from './jobs.js';
import * as repo from './repository.js';

/**
 * Erasure of one person (POST /v1/admin/erase): what they wrote goes and their name comes off the
 * rest. A memory they created alone is deleted; one that retracts another (others point at it as
 * their replacement, migration 026's superseded_by) is anonymised instead, since deleting it would
 * bring back what it retracted; a memory others wrote too keeps its content without their name.
 * Their events, traits and trait evidence go; tasks, sessions, nodes, grants and tokens lose their
 * name. A legal hold outranks erasure: under one the request is refused with 409, carrying what
 * the erasure would do, and queued; its workflow waits and runs when the hold lifts.
 */
export async function requestErasure(services: ComplianceServices, credential: HiveCredential, input: { person: string; wait_seconds: number }) {
  const root = await ownedOrganisation(services.db, credential);
  // Addresses are stored lowercase; a person id is matched as given.
  const person = await repo.personInOrg(services.db, credential.orgId, input.person.includes('@') ? input.person.toLowerCase() : input.person);
  if (!person) throw hiveError(404, `No person ${input.person} in this organisation.`);
  const planned = await withTransaction(services.db, async (client) => {
    // The hold lock: no hold lands between the look at the holds and the job's status.
    await repo.lockOrganisationHolds(client, [credential.orgId]);
    const holds = await repo.holdsCoveringPerson(client, credential.orgId, person.id);
    const job = await repo.insertJob(client, {
      id: newId('cmp_'), orgId: credential.orgId, kind: 'erasure', apply: true, status: holds.length ? 'queued' : 'running',
      subjectPersonId: person.id, personId: credential.personId, tokenId: credential.tokenId,
    });
    const pages = await repo.planErasure(client, job, person.id, PAGE_SIZE);
    await repo.markPlanned(client, job.id, pages);
    const other = await repo.countPersonData(client, credential.orgId, person.id);
    await repo.insertAudit(client, [{
      orgId: credential.orgId, nodeId: root.id, action: holds.length ? 'erasure.queued' : 'erasure.requested', jobId: job.id,
      personId: credential.personId, tokenId: credential.tokenId, detail: { subject: person.id, holds: holds.map((hold) => hold.id) },
    }]);
    return { job, holds, other };
  });
  if (planned.holds.length === 0) return startAndAwaitJob(services, planned.job, input.wait_seconds);
  // Queued: its workflow waits for the lift (with Temporal away, the sweep starts it later).
  await startCommittedJob(services, planned.job);
  const job = await viewJob(services.db, planned.job.id);
  const totals = job.counts ?? {};
  throw hiveError(409, `A legal hold covers what ${person.email} wrote (${planned.holds.map((hold) => `${hold.id} on ${hold.node_path}`).join(', ')}); nothing was erased. The erasure is queued as ${job.id} and runs when the hold lifts.`, {
    would_be: {
      memories: { deleted: totals.would_delete ?? 0, anonymised: totals.would_anonymise ?? 0 },
      events_deleted: planned.other.events,
      traits_deleted: planned.other.traits,
      trait_evidence_deleted: planned.other.evidence,
    },
    holds: planned.holds.map((hold) => ({ id: hold.id, node: hold.node_path })),
    job,
  });
}

export type ErasureStep = 'held' | 'more' | 'done';

/**
 * One page of the erasure's memories in one transaction with its audit rows: under the
 * organisation's hold lock, a page touching a held node does nothing and answers `held` (the job
 * goes back to queued); otherwise each memory is re-read and deleted or anonymised as it stands.
 */
export async function eraseMemoryPage(services: Pick<ComplianceServices, 'db'>, jobId: string, page: number): Promise<ErasureStep> {
  return withTransaction(services.db, async (client) => {
    const job = await repo.jobById(client, jobId);
    if (!job?.subject_person_id || !job.org_id || job.status === 'completed') return 'done';
    const items = await repo.unsettledItems(client, jobId, page);
    if (items.length === 0) return 'done';
    await repo.lockOrganisationHolds(client, [job.org_id]);
    const states = await repo.lockForErasure(client, items.map((item) => item.memory_id), job.subject_person_id);
    if (states.some((state) => state.held)) {
      await repo.setJobStatus(client, jobId, 'queued');
      return 'held';
    }
    await repo.setJobStatus(client, jobId, 'running');
    const byId = new Map(states.map((state) => [state.id, state]));
    const deleted = states.filter((state) => state.reason === null);
    const anonymised = states.filter((state) => state.reason !== null);
    await repo.anonymiseMemories(client, anonymised.map((state) => state.id), job.subject_person_id);
    await repo.deleteMemories(client, deleted.map((state) => state.id));
    await repo.settleItems(client, jobId, items.map((item) => {
      const state = byId.get(item.memory_id);
      if (!state) return { memoryId: item.memory_id, outcome: 'gone' as const };
      return state.reason === null ? { memoryId: item.memory_id, outcome: 'deleted' as const, reason: null } : { memoryId: item.memory_id, outcome: 'anonymised' as const, reason: state.reason };
    }));
    const nodes = new Map<string, { orgId: string; deleted: string[]; anonymised: string[] }>();
    for (const state of states) {
      const entry = nodes.get(state.node_id) ?? { orgId: state.org_id, deleted: [], anonymised: [] };
      (state.reason === null ? entry.deleted : entry.anonymised).push(state.id);
      nodes.set(state.node_id, entry);
    }
    await repo.insertAudit(client, [...nodes].map(([nodeId, entry]) => ({
      orgId: entry.orgId, nodeId, action: 'erasure.memories', jobId, personId: job.requested_by, tokenId: null,
      detail: { subject: job.subject_person_id, deleted: entry.deleted, anonymised: entry.anonymised },
    })));
    return 'more';
  });
}

/**
 * After the memories: the person's events a batch at a time (`more` until none are left), then in
 * one last transaction their traits, evidence and attribution, and the job's completion.
 */
export async function eraseRemainder(services: Pick<ComplianceServices, 'db'>, jobId: string): Promise<ErasureStep> {
  return withTransaction(services.db, async (client) => {
    const job = await repo.jobById(client, jobId, true);
    if (!job?.subject_person_id || !job.org_id || job.status === 'completed') return 'done';
    await repo.lockOrganisationHolds(client, [job.org_id]);
    if (await repo.personEventsHeld(client, job.org_id, job.subject_person_id)) {
      await repo.setJobStatus(client, jobId, 'queued');
      return 'held';
    }
    await repo.setJobStatus(client, jobId, 'running');
    const events = await repo.deletePersonEvents(client, job.org_id, job.subject_person_id, PAGE_SIZE);
    if (events.length > 0) {
      await repo.insertAudit(client, events.map((group) => ({
        orgId: job.org_id!, nodeId: group.node_id, action: 'erasure.events', jobId, personId: job.requested_by, tokenId: null,
        detail: { subject: job.subject_person_id, event_ids: group.ids },
      })));
      return 'more';
    }
    const remainder = await repo.erasePersonRemainder(client, job.org_id, job.subject_person_id);
    const result = {
      subject: job.subject_person_id,
      memories: await itemTotals(client, jobId),
      events_deleted: await repo.auditedEventCount(client, jobId),
      traits_deleted: remainder.traits,
      trait_evidence_deleted: remainder.evidence,
      attributions_removed: remainder.attributions,
    };
    const root = await repo.rootNodeOf(client, job.org_id);
    await repo.insertAudit(client, [{ orgId: job.org_id, nodeId: root.id, action: 'erasure.completed', jobId, personId: job.requested_by, tokenId: null, detail: result }]);
    await repo.completeJob(client, jobId, result);
    return 'done';
  });
}

/** The pages an erasure's plan holds (planned with the request). */
export async function erasurePages(services: Pick<ComplianceServices, 'db'>, jobId: string): Promise<number> {
  return (await repo.jobById(services.db, jobId))?.pages ?? 0;
}
