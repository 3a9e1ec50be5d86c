import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import type { z } from 'zod';
import { sleep, startEventStream, type EmulatorOptions } from '../../core.js';

/**
 * What the three native styles share: writing a stream frame by frame (with the chunk interval
 * and an injected disconnect), parsing a body with zod into a provider-specific message, and the
 * deterministic values that fill tool arguments and JSON-mode answers.
 */

/** One piece of a stream; `delta` marks the content pieces a `disconnect` fault counts. */
export interface StreamFrame {
  text: string;
  delta?: boolean;
}

/**
 * Writes the frames, pausing `chunkIntervalMs` between them. After `disconnectAfter` content
 * deltas the socket is destroyed, once those deltas have been handed to the kernel, so the caller
 * sees exactly N of them and then a broken connection.
 */
export async function writeFrames(
  req: Request,
  res: Response,
  frames: StreamFrame[],
  options: { emulator: EmulatorOptions; disconnectAfter?: number; contentType?: string },
): Promise<void> {
  if (options.contentType) {
    res.status(200).setHeader('content-type', options.contentType);
    res.flushHeaders();
  } else {
    startEventStream(res);
  }
  // A reply shorter than N deltas still breaks, after its last delta: the fault always bites.
  const totalDeltas = frames.filter((frame) => frame.delta).length;
  const breakAt = options.disconnectAfter === undefined ? undefined : Math.min(options.disconnectAfter, totalDeltas);
  let deltas = 0;
  for (const [i, frame] of frames.entries()) {
    if (res.destroyed || req.socket.destroyed) return;
    if (i > 0 && options.emulator.chunkIntervalMs > 0) await sleep(options.emulator.chunkIntervalMs);
    await new Promise<void>((resolve) => res.write(frame.text, () => resolve()));
    if (frame.delta) deltas += 1;
    if (breakAt !== undefined && deltas >= breakAt) {
      req.socket.destroy();
      return;
    }
  }
  res.end();
}

/** A named server-sent event, as Anthropic and Cohere send them. */
export const namedEvent = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** Parses a request body; a failure becomes `path: message` of the first issue, as providers word it. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): { ok: true; value: T } | { ok: false; message: string } {
  const result = schema.safeParse(body ?? {});
  if (result.success) return { ok: true, value: result.data };
  const issue = result.error.issues[0]!;
  const path = issue.path.map(String).join('.');
  return { ok: false, message: path ? `${path}: ${issue.message}` : issue.message };
}

/** The model name a request names before validation, so a fault rule can match it. */
export const modelOf = (body: unknown): string | undefined => {
  const model = (body as { model?: unknown } | undefined)?.model;
  return typeof model === 'string' ? model : undefined;
};

export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The marker a prompt carries to make the emulated model call a tool. */
export const CALL_TOOL_MARKER = 'EMULATOR_CALL_TOOL';

/**
 * A deterministic value for a JSON schema (OpenAPI-style upper-case types too, as Gemini uses):
 * every declared property is filled, so tool arguments and JSON-mode answers validate.
 */
export function valueForSchema(schema: unknown, seed: string): unknown {
  const node = (schema ?? {}) as { type?: unknown; properties?: Record<string, unknown>; items?: unknown; enum?: unknown[]; anyOf?: unknown[]; oneOf?: unknown[] };
  if (Array.isArray(node.enum) && node.enum.length > 0) return node.enum[parseInt(sha256(seed).slice(0, 8), 16) % node.enum.length];
  const variants = node.anyOf ?? node.oneOf;
  if (Array.isArray(variants) && variants.length > 0) return valueForSchema(variants[0], seed);
  const declared = Array.isArray(node.type) ? node.type.find((type) => type !== 'null') : node.type;
  const type = typeof declared === 'string' ? declared.toLowerCase() : node.properties ? 'object' : 'string';
  switch (type) {
    case 'object':
      return Object.fromEntries(Object.entries(node.properties ?? {}).map(([key, child]) => [key, valueForSchema(child, `${seed}.${key}`)]));
    case 'array':
      return [valueForSchema(node.items, `${seed}[0]`)];
    case 'integer':
    case 'number':
      return parseInt(sha256(seed).slice(0, 4), 16) % 100;
    case 'boolean':
      return parseInt(sha256(seed).slice(0, 2), 16) % 2 === 0;
    case 'null':
      return null;
    default:
      return `emulated ${sha256(seed).slice(0, 8)}`;
  }
}
