import type { RequestHandler } from 'express';
import { newRequestId } from '../../shared/ids.js';

/** A caller's own id is echoed when it is a sane token; anything else gets a fresh `req_` id. */
const CALLER_ID = /^[\x21-\x7e]{1,128}$/;

export const requestId: RequestHandler = (req, res, next) => {
  const supplied = req.get('x-request-id');
  req.id = supplied && CALLER_ID.test(supplied) ? supplied : newRequestId();
  res.setHeader('X-Request-Id', req.id);
  next();
};
