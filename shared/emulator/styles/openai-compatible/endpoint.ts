import type { Request, Response } from 'express';
import { z } from 'zod';
import type { EmulatorOptions } from '../../core.js';
import type { CatalogModel, ModelKind } from '../../../models/catalog.js';
import { invalidRequest } from './errors.js';

/** One request to one endpoint, after authentication, faults and the model check have passed. */
export interface EndpointCall {
  req: Request;
  res: Response;
  provider: string;
  model: CatalogModel;
  /** The parsed request: the JSON body, or the fields and file of a multipart form. */
  body: Record<string, unknown>;
  options: EmulatorOptions;
  /** A `disconnect` fault: a streaming answer drops the connection after this many content chunks. */
  disconnectAfter?: number;
  /** Tells the emulator a streaming caller went away before the end (seen at /_emulator/abandoned_streams). */
  noteAbandoned?: (chunksSent: number) => void;
}

/** An endpoint is served for a provider only when the catalog gives that provider a model of its kind. */
export interface Endpoint {
  path: string;
  kind: ModelKind;
  /** Used when the request names no model (moderations default to the latest model, as upstream). */
  defaultModel?: string;
  /** Reads a body that is not JSON (multipart forms); JSON bodies are parsed for every endpoint. */
  readBody?: (req: Request) => Promise<Record<string, unknown>>;
  handle: (call: EndpointCall) => Promise<void> | void;
}

/** Validates a request body; a failing field becomes the error's `param`, as upstream names it. */
export function parseBody<Schema extends z.ZodType>(schema: Schema, body: unknown): z.infer<Schema> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param = issue.path.map(String).join('.') || null;
  if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) {
    throw invalidRequest(`Missing required parameter: '${param}'.`, param, 'missing_required_parameter');
  }
  throw invalidRequest(`Invalid value for '${param}': ${issue.message}`, param, 'invalid_value');
}
