import type { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { getCustomer } from '../customers/customers.js';
import type { Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { parseChatInput, planChat } from '../inference/chat.js';
import { openChatStream } from '../inference/chat-completions.js';
import { completeChat } from '../inference/complete-chat.js';
import { parseMetadata } from '../metadata.js';
import { resolutionContextFor } from '../models/definitions.js';
import { pageRequest, toPage, withIds } from '../pagination.js';
import * as repo from './repository.js';
import type { conversationListQuery, conversationPatchBody, messageListQuery, sendMessageBody } from './schemas.js';
import { ConversationTurnLock, LOCK_TTL_MS } from './turn-lock.js';

/**
 * Conversations of a customer: a history of turns, each appending the user's message, running one
 * chat call over the conversation so far through the gateway's own chat path (metering, wallets,
 * limits, customers, cascades), and appending the reply. A turn holds the conversation's lock
 * (409 conversation_locked for a second one); 5,000 messages at most (409 conversation_full);
 * metadata at most 2 KB.
 */
export const MAX_CONVERSATION_MESSAGES = 5_000;
const METADATA_BYTES = 2_048;
const PAGE = { defaultLimit: 20, maxLimit: 100 };

/** Who asks: the developer, and under a client token the customer it is pinned to (it reaches no other). */
export interface ConversationCaller {
  developerId: string;
  pinnedCustomerId: string | null;
}

async function customerOf(db: Db, caller: ConversationCaller, reference: string): Promise<string> {
  const customer = await getCustomer(db, caller.developerId, reference);
  if (caller.pinnedCustomerId !== null && customer.id !== caller.pinnedCustomerId) throw serviceError('not_found', { message: 'No such conversation.' });
  return customer.id;
}

async function conversationOf(db: Db, caller: ConversationCaller, reference: string, id: string): Promise<repo.ConversationRow> {
  const customerId = await customerOf(db, caller, reference);
  const conversation = await repo.findConversation(db, caller.developerId, customerId, id);
  if (!conversation) throw serviceError('not_found', { message: 'No such conversation.' });
  return conversation;
}

export async function createConversation(db: Db, caller: ConversationCaller, reference: string, body: { metadata?: Record<string, unknown> | null }) {
  const customerId = await customerOf(db, caller, reference);
  const metadata = body.metadata == null ? null : parseMetadata(body.metadata, METADATA_BYTES);
  return formatConversation(await repo.insertConversation(db, { id: newId('conv_'), developerId: caller.developerId, customerId, metadata }));
}

export async function getConversation(db: Db, caller: ConversationCaller, reference: string, id: string) {
  return formatConversation(await conversationOf(db, caller, reference, id));
}

export async function listConversations(db: Db, caller: ConversationCaller, reference: string, query: z.output<typeof conversationListQuery>) {
  const customerId = await customerOf(db, caller, reference);
  const page = pageRequest({ limit: query.limit, after: idCursor(query.after, 'conv_') }, PAGE);
  return withIds(toPage(await repo.listConversations(db, caller.developerId, customerId, page, query.status), page, formatConversation));
}

/** Status moves between active and archived only; locked belongs to turns (400 invalid_status_transition). */
export async function updateConversation(db: Db, caller: ConversationCaller, reference: string, id: string, body: z.output<typeof conversationPatchBody>) {
  const conversation = await conversationOf(db, caller, reference, id);
  if (body.status !== undefined && body.status !== 'active' && body.status !== 'archived') {
    throw serviceError('invalid_status_transition', { param: 'status', message: `status can be set to active or archived, not ${JSON.stringify(body.status).slice(0, 40)}.` });
  }
  if (body.status === undefined && body.metadata === undefined) throw serviceError('empty_patch');
  const metadata = body.metadata === undefined ? undefined : body.metadata === null ? null : parseMetadata(body.metadata, METADATA_BYTES);
  return formatConversation(await repo.updateConversation(db, conversation.id, { ...(body.status && { status: body.status as 'active' | 'archived' }), ...(metadata !== undefined && { metadata }) }));
}

export async function deleteConversation(db: Db, caller: ConversationCaller, reference: string, id: string) {
  const conversation = await conversationOf(db, caller, reference, id);
  await repo.deleteConversation(db, conversation.id);
  return { id: conversation.id, object: 'conversation.deleted' as const, deleted: true };
}

export async function listConversationMessages(db: Db, caller: ConversationCaller, reference: string, id: string, query: z.output<typeof messageListQuery>) {
  const conversation = await conversationOf(db, caller, reference, id);
  const page = pageRequest({ limit: query.limit, after: idCursor(query.after, 'msg_') }, PAGE);
  return withIds(toPage(await repo.listMessages(db, conversation.id, page, query.order ?? 'asc'), page, formatMessage));
}

/**
 * One turn: the lock (409 conversation_locked), the user's message, the chat call over the
 * history, the reply. The lock is released however the turn ends; a turn whose lock lapsed and
 * was taken over cannot write its reply (the fence in the row has moved on).
 */
export async function sendMessage(platform: GatewayServices, caller: ConversationCaller, call: MeteredCall, reference: string, id: string, body: z.output<typeof sendMessageBody>, signal: AbortSignal) {
  const turn = await beginTurn(platform, caller, reference, id, body);
  try {
    const completed = await completeChat(platform, call, turn.input, turn.targets, { signal });
    const choice = completed.body.choices[0]!;
    const content = typeof choice.message.content === 'string' ? choice.message.content : '';
    const usage = { prompt_tokens: completed.body.usage.prompt_tokens, completion_tokens: completed.body.usage.completion_tokens, total_tokens: completed.body.usage.total_tokens };
    return await turn.finish(content, completed.body.model, usage);
  } catch (error) {
    await turn.abandon();
    throw error;
  }
}

export type TurnEvent = { event: 'conversation.message.delta'; data: { delta: string } } | { event: 'conversation.message.completed'; data: Awaited<ReturnType<typeof sendMessage>> };

/**
 * A turn streamed: the same lock, history and reply as sendMessage, the reply's text yielded as
 * the model generates it and appended when the stream ends. A stream that breaks writes no reply.
 */
export async function* streamMessage(platform: GatewayServices, caller: ConversationCaller, call: MeteredCall, reference: string, id: string, body: z.output<typeof sendMessageBody>, signal: AbortSignal): AsyncGenerator<TurnEvent> {
  const turn = await beginTurn(platform, caller, reference, id, body);
  let finished = false;
  try {
    const stream = await openChatStream(platform, call, turn.input, turn.targets[0]!, signal);
    let content = '';
    let failure: unknown;
    try {
      for await (const event of stream.events()) {
        if (event.type === 'delta' && event.content) {
          content += event.content;
          yield { event: 'conversation.message.delta', data: { delta: event.content } };
        }
      }
    } catch (error) {
      failure = error;
    }
    const usage = await stream.finish(failure === undefined, newId('chatcmpl-'));
    if (failure !== undefined) throw failure;
    const reply = await turn.finish(content, turn.targets[0]!.resolution.model.id, { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens });
    finished = true;
    yield { event: 'conversation.message.completed', data: reply };
  } finally {
    if (!finished) await turn.abandon();
  }
}

/**
 * The start of a turn: the body and model checked (before the lock and before anything is
 * written, so a bad request costs nothing), the lock taken (409 conversation_locked), the user's
 * message appended. `finish` appends the reply and releases; `abandon` releases without one.
 */
async function beginTurn(platform: GatewayServices, caller: ConversationCaller, reference: string, id: string, body: z.output<typeof sendMessageBody>) {
  // The history is read beside the conversation; it is used only once the conversation proves to be the caller's.
  const [conversation, history] = await Promise.all([conversationOf(platform.db, caller, reference, id), repo.history(platform.db, id)]);
  if (conversation.status === 'archived') throw serviceError('conversation_archived');
  if (conversation.message_count + 2 > MAX_CONVERSATION_MESSAGES) throw serviceError('conversation_full');
  // Checked before the lock and before anything is written: a bad model or body costs nothing.
  const input = parseChatInput(
    {
      model: body.model,
      messages: [...(body.instructions ? [{ role: 'system', content: body.instructions }] : []), ...history.map((message) => ({ role: message.role, content: message.content })), { role: 'user', content: body.content }],
      ...(body.temperature !== undefined && { temperature: body.temperature }),
      ...(body.max_tokens !== undefined && { max_tokens: body.max_tokens }),
    },
    { idempotencyKey: undefined },
  );
  const targets = await planChat(input, resolutionContextFor(platform, caller.developerId), platform.providers);

  const lock = new ConversationTurnLock(platform.redis, platform.config.REDIS_KEY_PREFIX);
  const fence = await lock.acquire(conversation.id);
  if (fence === null) throw serviceError('conversation_locked');
  const userMessageId = newId('msg_');
  try {
    const begun = await repo.beginTurn(platform.db, conversation.id, fence, { id: userMessageId, content: body.content }, MAX_CONVERSATION_MESSAGES, LOCK_TTL_MS);
    if (begun === 'missing') throw serviceError('not_found', { message: 'No such conversation.' });
    if (begun === 'archived') throw serviceError('conversation_archived');
    if (begun === 'full') throw serviceError('conversation_full');
    if (begun === 'fenced') throw serviceError('conversation_locked');
  } catch (error) {
    await lock.release(conversation.id, fence);
    throw error;
  }
  return {
    input,
    targets,
    async finish(content: string, model: string, usage: repo.MessageRow['usage']) {
      try {
        const reply = await repo.appendReply(platform.db, conversation.id, fence, { id: newId('msg_'), role: 'assistant', content, model, usage });
        if (!reply) throw serviceError('conversation_locked', { message: 'The turn took longer than its lock; a later turn has taken the conversation over.' });
        return { object: 'conversation.turn' as const, conversation_id: conversation.id, user_message_id: userMessageId, message: formatMessage(reply), usage: reply.usage };
      } finally {
        await lock.release(conversation.id, fence);
      }
    },
    async abandon() {
      try {
        await repo.endTurn(platform.db, conversation.id, fence);
      } finally {
        await lock.release(conversation.id, fence);
      }
    },
  };
}

function idCursor(after: string | undefined, prefix: string): string | undefined {
  return after?.startsWith(prefix) ? Buffer.from(JSON.stringify({ id: after })).toString('base64url') : after;
}

export function formatConversation(conversation: repo.ConversationRow) {
  const locked = conversation.locked_until !== null && conversation.locked_until.getTime() > Date.now();
  return {
    id: conversation.id,
    object: 'conversation' as const,
    customer_id: conversation.customer_id,
    status: locked ? ('locked' as const) : conversation.status,
    metadata: conversation.metadata ?? {},
    message_count: conversation.message_count,
    created_at: Math.floor(conversation.created_at.getTime() / 1000),
    updated_at: Math.floor(conversation.updated_at.getTime() / 1000),
  };
}

export function formatMessage(message: repo.MessageRow) {
  return {
    id: message.id,
    object: 'conversation.message' as const,
    conversation_id: message.conversation_id,
    role: message.role,
    content: message.content,
    model: message.model,
    usage: message.usage,
    created_at: Math.floor(message.created_at.getTime() / 1000),
  };
}
