import pg from 'pg';
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
  let client: pg.Client | undefined;
  let closed = false;
  let requesting = false;
  let again = false;
  let retryTimer: NodeJS.Timeout | undefined;

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

  const connect = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: databaseUrl });
    next.on('notification', () => void wake());
    next.on('error', (error) => {
      logger.warn({ err: error }, 'outbox listener connection lost; reconnecting');
      reconnect(next);
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${OUTBOX_CHANNEL}`);
      if (closed) return void (await next.end().catch(() => undefined));
      client = next;
      void wake(); // whatever committed while no one listened
    } catch (error) {
      logger.warn({ err: error }, 'outbox listener could not connect; retrying in 2 s');
      reconnect(next);
    }
  };

  const reconnect = (failed: pg.Client): void => {
    failed.end().catch(() => undefined);
    if (client === failed) client = undefined;
    if (closed || retryTimer) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, 2_000);
  };

  void connect();
  return {
    async close() {
      closed = true;
      if (retryTimer) clearTimeout(retryTimer);
      await client?.end().catch(() => undefined);
    },
  };
}
