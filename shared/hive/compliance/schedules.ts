import type { ComplianceServices } from './jobs.js';

/**
 * The compliance schedules (Temporal schedules, readable in the Web UI): the applied retention
 * sweep of every organisation daily, the embedding sweep hourly. Made idempotently at worker
 * start: a worker that finds one already there leaves it. The ids carry the task queue, so each
 * deployment sharing a Temporal namespace has its own.
 */
export const COMPLIANCE_SCHEDULES = [
  { id: 'hive-retention', workflowType: 'hiveRetentionWorkflow', every: '1 day' },
  { id: 'hive-embed-sweep', workflowType: 'hiveEmbedSweepWorkflow', every: '1 hour' },
] as const;

export const scheduleIdOf = (id: string, taskQueue: string): string => `${id}-${taskQueue}`;

export async function ensureComplianceSchedules(services: Pick<ComplianceServices, 'temporal' | 'config'>): Promise<void> {
  for (const schedule of COMPLIANCE_SCHEDULES) {
    try {
      await services.temporal.client.schedule.create({
        scheduleId: scheduleIdOf(schedule.id, services.config.TEMPORAL_TASK_QUEUE),
        spec: { intervals: [{ every: schedule.every }] },
        action: { type: 'startWorkflow', workflowType: schedule.workflowType, taskQueue: services.config.TEMPORAL_TASK_QUEUE, args: [{}] },
        policies: { overlap: 'SKIP' },
      });
    } catch (error) {
      if ((error as Error).name !== 'ScheduleAlreadyRunning') throw error;
    }
  }
}
