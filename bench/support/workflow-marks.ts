import type { Client } from '@temporalio/client';

/**
 * When each step of a workflow happened, from its history's event times (ms since the epoch):
 * 'workflow started', 'first workflow task started', '<activity> scheduled', '<activity> started',
 * '<activity> completed' and 'workflow completed'. A retried activity keeps its last attempt's marks.
 */
export async function workflowMarks(client: Client, workflowId: string): Promise<Map<string, number>> {
  const { events } = await client.workflow.getHandle(workflowId).fetchHistory();
  const marks = new Map<string, number>();
  const activities = new Map<string, string>();
  for (const event of events ?? []) {
    const at = timestampMs(event.eventTime);
    const scheduled = event.activityTaskScheduledEventAttributes;
    const activityEnd = event.activityTaskStartedEventAttributes ?? event.activityTaskCompletedEventAttributes;
    if (event.workflowExecutionStartedEventAttributes) marks.set('workflow started', at);
    else if (event.workflowTaskStartedEventAttributes && !marks.has('first workflow task started')) marks.set('first workflow task started', at);
    else if (scheduled) {
      activities.set(String(event.eventId), scheduled.activityType?.name ?? 'activity');
      marks.set(`${scheduled.activityType?.name} scheduled`, at);
    } else if (activityEnd) marks.set(`${activities.get(String(activityEnd.scheduledEventId))} ${event.activityTaskStartedEventAttributes ? 'started' : 'completed'}`, at);
    else if (event.workflowExecutionCompletedEventAttributes) marks.set('workflow completed', at);
  }
  return marks;
}

function timestampMs(time: { seconds?: { toNumber(): number } | number | null; nanos?: number | null } | null | undefined): number {
  const seconds = time?.seconds ?? 0;
  return (typeof seconds === 'number' ? seconds : seconds.toNumber()) * 1000 + (time?.nanos ?? 0) / 1e6;
}
