import pg from 'pg';
import type { Logger } from '../logger.js';

/**
 * A connection LISTENing on one PostgreSQL channel, re-opened 2 s after it is lost. Notifications
 * sent while no connection listened are gone, so `connected` runs each time listening (re)starts,
 * for the caller to catch up, and `lost` each time it stops, for the caller to stop trusting
 * what it learns only from notifications.
 */
export interface Listener {
  close(): Promise<void>;
}

export interface ListenerHandlers {
  notification(payload: string | undefined): void;
  connected?(): void;
  lost?(): void;
}

export function listenTo(databaseUrl: string, channel: string, logger: Logger, handlers: ListenerHandlers): Listener {
  let client: pg.Client | undefined;
  let closed = false;
  let retryTimer: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: databaseUrl });
    next.on('notification', (message) => handlers.notification(message.payload));
    next.on('error', (error) => {
      logger.warn({ err: error, channel }, 'listening connection lost; reconnecting');
      reconnect(next);
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${channel}`);
      if (closed) return void (await next.end().catch(() => undefined));
      client = next;
      handlers.connected?.();
    } catch (error) {
      logger.warn({ err: error, channel }, 'could not listen; retrying in 2 s');
      reconnect(next);
    }
  };

  const reconnect = (failed: pg.Client): void => {
    failed.end().catch(() => undefined);
    if (client === failed) {
      client = undefined;
      handlers.lost?.();
    }
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
      const open = client;
      client = undefined;
      if (open) handlers.lost?.();
      await open?.end().catch(() => undefined);
    },
  };
}
