import { walletHeaders, type MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { serviceError, ServiceError } from '../errors.js';
import type { FileStorage } from '../files/storage.js';
import type { ChatMessage } from '../providers/types.js';
import { resolutionContextFor } from '../models/definitions.js';
import { planChat, type ChatInput, type ChatTarget } from './chat.js';
import { MeteredChatStream } from './chat-stream.js';
import { completeChat, type CompletedChat } from './complete-chat.js';
import { resolveFileParts } from './file-parts.js';
import type { IdempotencyStore, StoredResult } from './idempotency.js';
import { messageTexts, moderateInline, moderates } from './moderations.js';
import { translateUpstream, UPSTREAM_DEADLINES_MS } from './upstream-call.js';

/**
 * POST /v1/chat/completions as the domain answers it, given its body as parseChatInput read it:
 * its file references resolved, every model reference planned; then a completion (through the cascade, replayed for
 * a repeated idempotency-key) or a stream for the route to relay. The route only formats.
 */
export interface ChatRequestContext {
  /** The body as parseChatInput read it. */
  input: ChatInput;
  /** The body as sent: a repeated idempotency-key must come with the same one. */
  body: unknown;
  idempotencyKey: string | undefined;
  /** Aborts the upstream call when the client leaves. */
  signal: AbortSignal;
  /** Adds context to the prompt once the request is valid, before it is planned (ambient brain recall). */
  augment?: (messages: ChatMessage[]) => Promise<ChatMessage[]>;
}

/** A completion (or its replay): status, the headers that describe it, the body. */
export interface ChatReply extends StoredResult {
  replayed: boolean;
}

export type ChatAnswer = { kind: 'reply'; reply: ChatReply } | { kind: 'stream'; input: ChatInput; target: ChatTarget };

/** What chat keeps between calls: replayable results, and the uploaded files messages may name. */
export interface ChatStores {
  idempotency: IdempotencyStore;
  files: FileStorage;
}

export async function answerChat(platform: GatewayServices, stores: ChatStores, call: MeteredCall, request: ChatRequestContext): Promise<ChatAnswer> {
  const { input } = request;
  input.messages = await resolveFileParts(platform.db, stores.files, call.developerId, input.messages);
  if (request.augment) input.messages = await request.augment(input.messages);
  const targets = await planChat(input, resolutionContextFor(platform, call.developerId), platform.providers);
  const key = request.idempotencyKey;
  if (input.stream) {
    if (key) throw serviceError('invalid_request', { param: 'idempotency-key', message: 'A stream cannot be replayed: send idempotency-key with non-streaming calls only.' });
    return { kind: 'stream', input, target: targets[0]! };
  }
  const complete = async (): Promise<ChatReply> => {
    const completed = await completeChat(platform, call, input, targets, { signal: request.signal });
    return { status: 200, headers: completionHeaders(targets, completed), body: completed.body, replayed: false };
  };
  if (!key) return { kind: 'reply', reply: await complete() };

  const scope = { developerId: call.developerId, customerId: call.customer?.id ?? null, key };
  const { idempotency } = stores;
  const claim = await idempotency.begin(scope, request.body);
  if ('replay' in claim) return { kind: 'reply', reply: { ...claim.replay, replayed: true } };
  try {
    const reply = await complete();
    await idempotency.complete(scope, request.body, { status: reply.status, headers: reply.headers, body: reply.body });
    return { kind: 'reply', reply };
  } catch (error) {
    await idempotency.abandon(scope);
    throw error;
  }
}

/**
 * Opens a stream on its one target: inline pre moderation first (the only kind a stream allows),
 * then the metered upstream stream. A failure before the first event is a plain error.
 */
export async function openChatStream(platform: GatewayServices, call: MeteredCall, input: ChatInput, target: ChatTarget, signal: AbortSignal): Promise<MeteredChatStream> {
  if (moderates(input.moderation, 'pre')) {
    await moderateInline(platform, call, messageTexts(input.messages), { stage: 'pre', signal, chatModel: target.resolution.model.id });
  }
  try {
    return await MeteredChatStream.open(platform, call, target, input, signal, Date.now() + UPSTREAM_DEADLINES_MS.chat);
  } catch (error) {
    throw error instanceof ServiceError ? error : translateUpstream(error);
  }
}

/**
 * The headers that describe a chat answer: how its reference resolved, which cascade entry
 * answered, and what the wallet paid. A replay repeats them.
 */
export function modelHeaders(targets: ChatTarget[], used: ChatTarget, tried: string[]): Record<string, string> {
  const { resolution } = used;
  const headers: Record<string, string> = {};
  if (resolution.requested !== resolution.model.id) headers['x-svc-model-resolved'] = resolution.model.id;
  if (resolution.newerAvailable) headers['x-svc-model-newer-available'] = resolution.newerAvailable;
  if (resolution.dynamic) {
    headers['x-svc-dynamic-profile'] = resolution.dynamic.profile;
    headers['x-svc-dynamic-reason'] = resolution.dynamic.reason;
  }
  if (targets.length > 1) {
    headers['x-svc-model-used'] = resolution.model.id;
    headers['x-svc-models-tried'] = tried.join(',');
    headers['x-svc-fallback-triggered'] = String(tried.length > 1);
  }
  return headers;
}

function completionHeaders(targets: ChatTarget[], completed: CompletedChat): Record<string, string> {
  return { ...modelHeaders(targets, completed.target, completed.tried), ...walletHeaders(completed) };
}
