import { createHash, generateKeyPairSync } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

/**
 * The upstream emulator's shared behaviour. It stands in for every provider (no provider is
 * reachable from this machine): deterministic answers, token counts, latency, and faults that
 * tests inject through its control API. Each wire style lives in styles/ and uses only this.
 */

/** The credentials the emulator accepts; the gateway is configured with the same values. */
export interface EmulatorCredentials {
  /** Bearer / api-key style keys, by provider name (openai, anthropic, gemini, cohere, voyage, azure, ...). */
  apiKeys: Record<string, string>;
  /** AWS Signature V4 (bedrock). */
  aws: { accessKeyId: string; secretAccessKey: string; region: string };
  /** Google service-account key (vertex): the emulator verifies assertions with its public key. */
  googleServiceAccount: { clientEmail: string; privateKeyPem: string; publicKeyPem: string; projectId: string };
  /** IBM Cloud API key (watsonx) exchanged for an IAM bearer token. */
  ibmApiKey: string;
}

export interface EmulatorOptions {
  credentials: EmulatorCredentials;
  /** Added before every answer (and before the first chunk of a stream). */
  latencyMs: number;
  /** Pause between stream chunks. */
  chunkIntervalMs: number;
}

/** What a test asks the emulator to do to the next matching requests. */
export type Fault =
  | { kind: 'status'; status: number; retryAfterSeconds?: number }
  | { kind: 'timeout' }
  | { kind: 'disconnect'; afterChunks: number }
  | { kind: 'latency'; ms: number }
  /** A stream paced at this interval between chunks (the chat-completions style), slow enough for a caller to leave mid-way. */
  | { kind: 'slow_stream'; chunkIntervalMs: number };

export interface FaultRule {
  /** Provider name (the first path segment) and optionally the model; omitted = any. */
  provider?: string;
  model?: string;
  fault: Fault;
  /** How many matching requests it applies to; afterwards the rule is gone. */
  times: number;
}

/** Faults are first-come: the oldest matching rule with uses left applies to a request. */
export class FaultRegistry {
  private rules: FaultRule[] = [];

  add(rule: FaultRule): void {
    this.rules.push({ ...rule });
  }

  clear(): void {
    this.rules = [];
  }

  /** Streams whose caller went away before the end, as the emulator saw them (newest last). */
  readonly abandonedStreams: Array<{ provider: string; model: string; chunksSent: number; at: string }> = [];

  noteAbandoned(provider: string, model: string, chunksSent: number): void {
    this.abandonedStreams.push({ provider, model, chunksSent, at: new Date().toISOString() });
  }

  take(provider: string, model: string | undefined): Fault | undefined {
    const rule = this.rules.find((candidate) => (!candidate.provider || candidate.provider === provider) && (!candidate.model || candidate.model === model));
    if (!rule) return undefined;
    rule.times -= 1;
    if (rule.times <= 0) this.rules = this.rules.filter((candidate) => candidate !== rule);
    return rule.fault;
  }
}

const WORDS = [
  'the', 'gateway', 'answers', 'every', 'request', 'with', 'a', 'steady', 'stream', 'of', 'plain', 'words',
  'so', 'tests', 'can', 'count', 'tokens', 'and', 'compare', 'bytes', 'across', 'runs', 'without', 'surprise',
  'model', 'reply', 'emulated', 'upstream', 'deterministic', 'output', 'for', 'your', 'prompt', 'here', 'is', 'more',
];

/**
 * The same prompt to the same model always gets the same reply. `maxTokens` caps its length,
 * as a provider's max_tokens would; the reply is otherwise 12 to 40 tokens long.
 */
export function deterministicReply(model: string, prompt: string, maxTokens?: number): { text: string; finishReason: 'stop' | 'length' } {
  const digest = createHash('sha256').update(`${model}\n${prompt}`).digest();
  const natural = 12 + (digest[0]! % 29);
  const length = maxTokens !== undefined ? Math.min(natural, Math.max(1, maxTokens)) : natural;
  const words = Array.from({ length }, (_, i) => WORDS[digest[(i + 1) % digest.length]! % WORDS.length]!);
  return { text: words.join(' '), finishReason: maxTokens !== undefined && maxTokens < natural ? 'length' : 'stop' };
}

/** One token per word of a reply; for prompts, about four characters per token (at least one). */
export function countTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

export const replyTokens = (text: string) => (text === '' ? 0 : text.split(' ').length);

/** Splits a reply into the pieces a stream sends, one word (with its leading space) at a time. */
export function streamPieces(text: string): string[] {
  return text.split(' ').map((word, i) => (i === 0 ? word : ` ${word}`));
}

export { deterministicEmbedding, relevance } from './embeddings.js';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Applies the fault and latency for one request before its handler runs. Returns false when the
 * request was answered (an error status) or abandoned (a timeout), so the handler must not answer.
 * `disconnect` faults are returned for streaming handlers to apply after N chunks.
 */
export async function applyFault(
  req: Request,
  res: Response,
  context: { faults: FaultRegistry; options: EmulatorOptions; provider: string; model: string | undefined; errorBody: (status: number) => unknown },
): Promise<{ proceed: boolean; disconnectAfter?: number; chunkIntervalMs?: number }> {
  const fault = context.faults.take(context.provider, context.model);
  // No latency means none: even a 0 ms timer would hold every answer until the next timer tick (~1 ms).
  const latencyMs = context.options.latencyMs + (fault?.kind === 'latency' ? fault.ms : 0);
  if (latencyMs > 0) await sleep(latencyMs);
  if (!fault || fault.kind === 'latency') return { proceed: true };
  if (fault.kind === 'slow_stream') return { proceed: true, chunkIntervalMs: fault.chunkIntervalMs };
  if (fault.kind === 'timeout') {
    // Never answer; the caller's deadline decides. The socket closes when the caller gives up.
    req.socket.setTimeout(0);
    return { proceed: false };
  }
  if (fault.kind === 'status') {
    if (fault.retryAfterSeconds !== undefined) res.setHeader('retry-after', String(fault.retryAfterSeconds));
    res.status(fault.status).json(context.errorBody(fault.status));
    return { proceed: false };
  }
  if (fault.afterChunks <= 0) {
    req.socket.destroy();
    return { proceed: false };
  }
  return { proceed: true, disconnectAfter: fault.afterChunks };
}

/** Server-sent events helper shared by the streaming styles. */
export function startEventStream(res: Response): void {
  res.status(200);
  res.setHeader('content-type', 'text/event-stream');
  res.setHeader('cache-control', 'no-cache');
  res.setHeader('connection', 'keep-alive');
  res.flushHeaders();
}

export type Handler = (req: Request, res: Response, next: NextFunction) => unknown;

/**
 * Credentials for one emulator run: fixed, recognisable keys for the key-based providers, and a
 * fresh RSA key pair standing in for a Google service account. Tests and `npm start` configure
 * the gateway with these same values.
 */
export function createEmulatorCredentials(providers: readonly string[]): EmulatorCredentials {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    apiKeys: Object.fromEntries(providers.map((provider) => [provider, `emu-${provider}-key`])),
    aws: { accessKeyId: 'AKIAEMULATOR000000', secretAccessKey: 'emulator-secret-access-key', region: 'us-east-1' },
    googleServiceAccount: {
      clientEmail: 'gateway@emulator-project.iam.gserviceaccount.com',
      privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
      projectId: 'emulator-project',
    },
    ibmApiKey: 'emu-ibm-api-key',
  };
}
