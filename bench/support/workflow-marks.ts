import type { Client } from '@temporalio/client';

/**
 * When each step of a workflow happened, from its history's event times (ms since the epoch):
 * 'workflow started', 'first workflow task started', '<activity> scheduled', '<activity> started',
 * '<activity> completed' and 'workflow completed'. A retried activity keeps its last attempt's marks.
 * A local activity has only '<activity> completed', from its marker: it runs inside a workflow task,
 * so it is never queued on the server, and its marker records when it ended.
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
    else if (event.markerRecordedEventAttributes) {
      const local = localActivityMarker(event.markerRecordedEventAttributes);
      if (local) marks.set(`${local.activityType} completed`, local.completedMs);
    } else if (event.workflowExecutionCompletedEventAttributes) marks.set('workflow completed', at);
  }
  return marks;
}

type MarkerAttributes = { markerName?: string | null; details?: Record<string, { payloads?: { data?: Uint8Array | null }[] | null }> | null };

/** The SDK's local activity marker: its `data` detail is JSON naming the activity and when it completed. */
function localActivityMarker(marker: MarkerAttributes): { activityType: string; completedMs: number } | null {
  if (marker.markerName !== 'core_local_activity') return null;
  const bytes = marker.details?.data?.payloads?.[0]?.data;
  if (!bytes) return null;
  const data = JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, unknown>;
  const completed = data.complete_time ?? data.completeTime;
  const completedMs = typeof completed === 'string' ? Date.parse(completed) : timestampMs(completed as Parameters<typeof timestampMs>[0]);
  return { activityType: String(data.activity_type ?? data.activityType), completedMs };
}

function timestampMs(time: { seconds?: { toNumber(): number } | number | null; nanos?: number | null } | null | undefined): number {
  const seconds = time?.seconds ?? 0;
  return (typeof seconds === 'number' ? seconds : seconds.toNumber()) * 1000 + (time?.nanos ?? 0) / 1e6;
}
