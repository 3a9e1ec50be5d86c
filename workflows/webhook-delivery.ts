import { proxyActivities, sleep } from '@temporalio/workflow';
import type { RetryWorkflowInput, WebhookActivities } from '../workers/webhook-activities.js';
import { OUTBOUND_ATTEMPT } from './activity-profiles.js';

/**
 * The retries of one webhook delivery whose first attempt failed (workflow id
 * `webhook-delivery-<delivery id>`). Each retry waits on a durable timer (spec 1: 1 min, 5 min,
 * 30 min, 2 h, 6 h), so a restart of every process loses none; the last failure makes the
 * delivery dead. The history reads as: wait, retry 1 of 5, wait, retry 2 of 5, ...
 */
export async function webhookDeliveryWorkflow(input: RetryWorkflowInput): Promise<string> {
  const schedule = input.retryScheduleSeconds;
  for (let index = 0; index < schedule.length; index++) {
    const retry = index + 1;
    await sleep(schedule[index]! * 1_000, { summary: `wait ${describeSeconds(schedule[index]!)} before retry ${retry} of ${schedule.length}` });
    const { attemptWebhookDelivery } = proxyActivities<WebhookActivities>({
      ...OUTBOUND_ATTEMPT,
      summary: `retry ${retry} of ${schedule.length}: POST ${input.eventType} ${input.eventId}`,
    });
    const outcome = await attemptWebhookDelivery({ deliveryId: input.deliveryId, retry, of: schedule.length, nextDelaySeconds: schedule[index + 1] ?? null });
    // failed: wait for the next retry; succeeded, dead, stopped (endpoint paused, disabled or deleted): done.
    if (outcome !== 'failed') return outcome;
  }
  return 'dead';
}

function describeSeconds(seconds: number): string {
  if (seconds >= 3_600 && seconds % 3_600 === 0) return `${seconds / 3_600}h`;
  if (seconds >= 60 && seconds % 60 === 0) return `${seconds / 60}m`;
  return `${seconds}s`;
}
