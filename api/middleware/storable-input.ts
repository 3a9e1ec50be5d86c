import type { Request, RequestHandler } from 'express';
import { assertStorableInput } from '../../shared/validation.js';

/**
 * Where request input becomes domain input on both servers: before anything reads the request
 * (the gateway's metered-call pipeline reads the body's `user` to attribute a customer; the hive
 * reads its credential), the path parameters, query and parsed body are held to the one text rule
 * (shared/validation.ts): every string is Unicode text without NUL that PostgreSQL stores as sent.
 * Headers need no check: Node refuses NUL and control characters in them and reads the rest as
 * Latin-1 text. A multipart body's fields are checked as they stream (api/route-table.ts, readForm).
 */
export function assertStorableRequest(req: Pick<Request, 'params' | 'query' | 'body'>): void {
  assertStorableInput(req.params);
  assertStorableInput(req.query);
  assertStorableInput(req.body);
}

export const storableInput: RequestHandler = (req, _res, next) => {
  assertStorableRequest(req);
  next();
};
