/**
 * The registry of event types: every type a webhook endpoint may subscribe to (spec 1, "Events":
 * 34 registered, some before they are emitted). Adding a type is an additive change under /v1;
 * removing or renaming one is not.
 */
export const EVENT_TYPES = [
  // Customers (spec 1).
  'customer.created',
  'customer.archived',
  'customer.hard_deleted',
  'customer.budget_exceeded',
  'customer.rate_limit_exceeded',
  // Wallets.
  'wallet.low',
  'wallet.empty',
  // Inference.
  'moderation.flagged',
  'request.failed_after_retry',
  'chat.completion.finished',
  // Batches.
  'batch.created',
  'batch.completed',
  'batch.failed',
  'batch.cancelled',
  // Vector stores: lifecycle, file ingestion, embedding-model migration.
  'vector_store.created',
  'vector_store.deleted',
  'vector_store.suspended',
  'vector_store.resumed',
  'vector_store.file.completed',
  'vector_store.file.failed',
  'vector_store.file_batch.completed',
  'vector_store.migration.completed',
  'vector_store.migration.failed',
  // Brains (spec 2, "Events").
  'brain.learning.proposed',
  'brain.conflict',
  'brain.autotune.frozen',
  'brain.policy.changed',
  'brain.learning.skipped',
  'brain.reindex.completed',
  'brain.reindex.failed',
  // Webhooks themselves: POST /v1/webhooks/{id}/test.
  'webhook.test',
  // Reserved: accepted at registration, emitted once runs roll out.
  'run.completed',
  'run.failed',
  'run.cancelled',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** Registered but not emitted yet; subscribing to them is allowed. */
export const RESERVED_EVENT_TYPES: readonly EventType[] = ['run.completed', 'run.failed', 'run.cancelled'];

const REGISTERED = new Set<string>(EVENT_TYPES);

export function isEventType(value: string): value is EventType {
  return REGISTERED.has(value);
}
