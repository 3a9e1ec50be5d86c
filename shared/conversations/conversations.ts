import type { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { customerReference, getCustomer } from '../customers/customers.js';
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

/**
 * Conversations of a customer: a history of turns, each appending the user's message, running one
 * chat call over the conversation so far through the gateway's own chat path (metering, wallets,
 * limits, customers, cascades), and appending the reply. A turn holds the conversation's lock
 * (409 conversation_locked for a second one); 5,000 messages at most (409 conversation_full);
 * metadata at most 2 KB.
 */
export const MAX_CONVERSATION_MESSAGES = 5_000;
/** How long a turn holds its conversation before another may take it over (spec 1: 10 minutes). */
export const TURN_LOCK_MS = 10 * 60 * 1000;
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
  // Side by side: the conversation is read by the developer's id alone and must prove to be the customer's.
  const [customerId, conversation] = await Promise.all([customerOf(db, caller, reference), repo.findConversation(db, caller.developerId, id)]);
  if (!conversation || conversation.customer_id !== customerId) throw serviceError('not_found', { message: 'No such conversation.' });
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

const TURN_REFUSALS = {
  missing: () => serviceError('not_found', { message: 'No such conversation.' }),
  archived: () => serviceError('conversation_archived'),
  full: () => serviceError('conversation_full'),
  locked: () => serviceError('conversation_locked'),
};

/**
 * The start of a turn, one statement (repository.beginTurn): the conversation proves to be the
 * caller's, the lock is taken (409 conversation_locked) and the history read. The body and model
 * are then checked against that history before any model call; a bad one releases the lock and
 * leaves nothing behind. `finish` stores the user's message and the reply together and releases;
 * `abandon` releases without either, so a turn is all or nothing.
 */
async function beginTurn(platform: GatewayServices, caller: ConversationCaller, reference: string, id: string, body: z.output<typeof sendMessageBody>) {
  const customer = customerReference(reference);
  if (customer === null) throw TURN_REFUSALS.missing();
  const begun = await repo.beginTurn(platform.db, { developerId: caller.developerId, conversationId: id, customer, pinnedCustomerId: caller.pinnedCustomerId }, MAX_CONVERSATION_MESSAGES, TURN_LOCK_MS);
  if (begun.verdict !== 'begun') throw TURN_REFUSALS[begun.verdict]();
  const { fence, history } = begun;
  const abandon = () => repo.endTurn(platform.db, id, fence);
  try {
    const input = parseChatInput(
      {
        model: body.model,
        messages: [...(body.instructions ? [{ role: 'system', content: body.instructions }] : []), ...history, { role: 'user', content: body.content }],
        ...(body.temperature !== undefined && { temperature: body.temperature }),
        ...(body.max_tokens !== undefined && { max_tokens: body.max_tokens }),
      },
      { idempotencyKey: undefined },
    );
    const targets = await planChat(input, resolutionContextFor(platform, caller.developerId), platform.providers);
    const userMessage = { id: newId('msg_'), content: body.content };
    return {
      input,
      targets,
      async finish(content: string, model: string, usage: repo.MessageRow['usage']) {
        const reply = await repo.completeTurn(platform.db, id, fence, userMessage, { id: newId('msg_'), content, model, usage });
        if (!reply) throw serviceError('conversation_locked', { message: 'The turn took longer than its lock; a later turn has taken the conversation over.' });
        return { object: 'conversation.turn' as const, conversation_id: id, user_message_id: userMessage.id, message: formatMessage(reply), usage: reply.usage };
      },
      abandon,
    };
  } catch (error) {
    await abandon();
    throw error;
  }
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
