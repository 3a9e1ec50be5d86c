import type { Logger } from 'pino';
import type { Principal } from '../shared/accounts/authenticate.js';

export type Credential = { scheme: 'bearer' | 'client'; value: string };

declare global {
  namespace Express {
    interface Request {
      /** The request id (X-Request-Id): the caller's own value or a fresh `req_` id. */
      id: string;
      /** A logger bound to the request id (see middleware/request-log.ts). */
      log: Logger;
      /** What the Authorization header carried, before it is verified. */
      credential: Credential | undefined;
      /** Who is calling, once a route's authentication middleware verified the credential. */
      principal?: Principal;
    }
  }
}
