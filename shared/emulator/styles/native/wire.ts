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

/** The tool-call rules and schema values are shared with the other styles. */
export { CALL_TOOL_MARKER, valueForSchema } from '../../tool-calls.js';
