import { listenTo } from '../db/listener.js';
import type { Logger } from '../logger.js';
import type { QueueRegistry } from '../platform/queues.js';
import { OUTBOX_CHANNEL, requestRelay } from './delivery.js';

/**
 * Wakes the relay the moment an outbox row commits: a trigger NOTIFYs at commit (migration 010)
 * and this LISTENing connection asks for a relay run. A burst of commits while one request is
 * on its way costs one more request, not one per commit. A lost connection is re-opened; the
 * relay's poll covers the gap.
 */
export interface OutboxListener {
  close(): Promise<void>;
}

export function startOutboxListener(databaseUrl: string, queues: QueueRegistry, logger: Logger): OutboxListener {
  let requesting = false;
  let again = false;
  let closed = false;

  const wake = async (): Promise<void> => {
    if (requesting) {
      again = true;
      return;
    }
    requesting = true;
    try {
      do {
        again = false;
        await requestRelay(queues);
      } while (again && !closed);
    } catch (error) {
      logger.warn({ err: error }, 'could not ask for an outbox relay; the poll will pick the events up');
    } finally {
      requesting = false;
    }
  };

  // On (re)connecting: whatever committed while no one listened.
  const listener = listenTo(databaseUrl, OUTBOX_CHANNEL, logger, { notification: () => void wake(), connected: () => void wake() });
  return {
    close() {
      closed = true;
      return listener.close();
    },
  };
}
