import type { ConsumerDefinition } from '../shared/platform/queues.js';
import type { Platform } from '../shared/platform/platform.js';

/**
 * The BullMQ consumers this process runs (outbox relay, ingest stages, usage roll-ups), each a thin
 * adapter over domain code. Each domain adds its definitions here as it is written.
 */
export function consumerDefinitions(_platform: Platform): ConsumerDefinition[] {
  return [];
}
