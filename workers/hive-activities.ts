import type { GatewayServices } from '../shared/composition/gateway.js';
import { eraseMemoryPage, erasurePages, eraseRemainder } from '../shared/hive/compliance/erasure.js';
import { embedSweepPage, finishEmbedSweep } from '../shared/hive/compliance/embed-sweep.js';
import { openScheduledJob, type ComplianceServices, type HiveAdminChange } from '../shared/hive/compliance/jobs.js';
import { liftHold, placeHold } from '../shared/hive/compliance/holds.js';
import { replaceNodeSettings } from '../shared/hive/compliance/settings.js';
import type { JobKind } from '../shared/hive/compliance/repository.js';
import { applyRetentionPage, finishRetention, planRetentionJob } from '../shared/hive/compliance/retention.js';
import { beatingWhile } from './activity-support.js';

/**
 * Activities of the memory hive's compliance workflows: thin adapters over
 * shared/hive/compliance. The worker's infrastructure serves them (the hive's tables are in the
 * same database; embeddings go through the same provider adapters), and every step heartbeats,
 * so a step whose worker died resumes on another within seconds.
 */
export function createHiveActivities(platform: GatewayServices) {
  const hive: ComplianceServices = platform;
  return {
    openScheduledHiveJob: (kind: JobKind, workflowId: string) => openScheduledJob(hive.db, kind, workflowId),
    planHiveRetention: (jobId: string) => beatingWhile(2_000, () => planRetentionJob(hive, jobId)),
    applyHiveRetentionPage: (jobId: string, page: number) => beatingWhile(2_000, () => applyRetentionPage(hive, jobId, page)),
    finishHiveRetention: (jobId: string) => beatingWhile(2_000, () => finishRetention(hive, jobId)),
    hiveErasurePages: (jobId: string) => erasurePages(hive, jobId),
    eraseHiveMemoryPage: (jobId: string, page: number) => beatingWhile(2_000, () => eraseMemoryPage(hive, jobId, page)),
    eraseHiveRemainder: (jobId: string) => beatingWhile(2_000, () => eraseRemainder(hive, jobId)),
    hiveEmbedSweepPage: (jobId: string, after: string) => beatingWhile(2_000, () => embedSweepPage(hive, jobId, after)),
    placeHiveHold: (change: Extract<HiveAdminChange, { kind: 'hold.place' }>) => placeHold(hive.db, change),
    liftHiveHold: (change: Extract<HiveAdminChange, { kind: 'hold.lift' }>) => liftHold(hive.db, change),
    replaceHiveSettings: (change: Extract<HiveAdminChange, { kind: 'settings.replace' }>) => replaceNodeSettings(hive.db, change),
    finishHiveEmbedSweep: (jobId: string, totals: { embedded: number; stale: number; refused: number; pages: number }) => finishEmbedSweep(hive, jobId, totals),
  };
}

export type HiveActivities = ReturnType<typeof createHiveActivities>;
