import type { z } from 'zod';
import type { GatewayServices } from '../composition/gateway.js';
import { withTransaction, type Db, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { parseMetadata } from '../metadata.js';
import { pageRequest, toPage, withIds } from '../pagination.js';
import { attachFiles } from '../vector-stores/store-files.js';
import { createVectorStore } from '../vector-stores/vector-stores.js';
import { activeStore } from '../vector-stores/common.js';
import { LIST_PAGE, secondsOrNull, seconds } from './assistants.js';
import * as repo from './repository.js';
import type { MessageBody, messageListQuery, threadBody, threadUpdateBody } from './schemas.js';

/**
 * Threads and their messages (OpenAI's /v1/threads and /v1/threads/{id}/messages). A thread holds
 * at most 5,000 messages (409 thread_full). A message's attachments for file_search are attached
 * to the thread's own vector store, made on first use, which its runs search beside the
 * assistant's stores.
 */
export const MAX_THREAD_MESSAGES = 5_000;

/** Who acts on a thread: the developer, and the customer a client token is pinned to (null for a developer key). */
export interface ThreadCaller {
  developerId: string;
  payerAccountId: string;
  /** A client token's customer: it reaches only that customer's threads. Null for a developer key. */
  customerId: string | null;
  /** The customer whose wallet pays for runs (a client token's, or Svc-Customer under a developer key). */
  billedCustomerId?: string | null;
}

export type ThreadServices = Pick<GatewayServices, 'db' | 'config' | 'queues' | 'vectorStoreKeys' | 'temporal' | 'logger'>;

export interface MessageContentText {
  type: 'text';
  text: { value: string; annotations: unknown[] };
}

/** A message body's content as OpenAI stores it: text parts with annotations. */
export function contentOf(content: MessageBody['content'], param: string): MessageContentText[] {
  if (typeof content === 'string') return [{ type: 'text', text: { value: content, annotations: [] } }];
  return content.map((part, i) => {
    if (part.type !== 'text' || typeof (part as { text?: unknown }).text !== 'string') {
      throw serviceError('invalid_messages', { param: `${param}.content.${i}`, message: 'Message content parts are text parts.' });
    }
    return { type: 'text', text: { value: (part as { text: string }).text, annotations: [] } };
  });
}

export function newMessages(messages: MessageBody[], param: string, run?: { runId: string; assistantId: string }): repo.NewMessage[] {
  return messages.map((message, i) => ({
    id: newId('msg_'),
    role: message.role,
    content: contentOf(message.content, `${param}.${i}`),
    attachments: message.attachments ?? null,
    assistant_id: run?.assistantId ?? null,
    run_id: run?.runId ?? null,
    step_index: null,
    metadata: message.metadata == null ? null : parseMetadata(message.metadata),
  }));
}

export async function createThread(platform: ThreadServices, caller: ThreadCaller, body: z.output<typeof threadBody>) {
  const messages = newMessages(body.messages ?? [], 'messages');
  const thread = await withTransaction(platform.db, async (client) => {
    const created = await repo.insertThread(client, {
      id: newId('thread_'),
      developer_id: caller.developerId,
      customer_id: caller.customerId,
      tool_resources: body.tool_resources ?? null,
      metadata: body.metadata == null ? null : parseMetadata(body.metadata),
    });
    if (messages.length > 0 && (await repo.appendMessages(client, created.id, messages, MAX_THREAD_MESSAGES)) === 'full') throw serviceError('thread_full');
    return created;
  });
  await attachToThreadStore(platform, caller, thread, messages);
  return formatThread(await threadOf(platform.db, caller, thread.id));
}

export async function threadOf(q: Queryable, caller: Pick<ThreadCaller, 'developerId' | 'customerId'>, id: string, lock = false): Promise<repo.ThreadRow> {
  const thread = await repo.findThread(q, caller.developerId, id, caller.customerId, lock);
  if (!thread) throw serviceError('not_found', { message: 'No such thread.' });
  return thread;
}

export async function getThread(db: Db, caller: ThreadCaller, id: string) {
  return formatThread(await threadOf(db, caller, id));
}

export async function updateThread(db: Db, caller: ThreadCaller, id: string, body: z.output<typeof threadUpdateBody>) {
  await threadOf(db, caller, id);
  return formatThread(
    await repo.updateThread(db, id, {
      ...(body.tool_resources !== undefined && { tool_resources: body.tool_resources }),
      ...(body.metadata !== undefined && { metadata: body.metadata === null ? null : parseMetadata(body.metadata) }),
    }),
  );
}

export async function deleteThread(db: Db, caller: ThreadCaller, id: string) {
  await threadOf(db, caller, id);
  await repo.deleteThread(db, id);
  return { id, object: 'thread.deleted' as const, deleted: true };
}

/** Adds a message; a thread with an active run refuses it (409 thread_locked), as OpenAI does. */
export async function createMessage(platform: ThreadServices, caller: ThreadCaller, threadId: string, body: MessageBody) {
  const [message] = newMessages([body], 'message');
  const thread = await threadOf(platform.db, caller, threadId);
  const written = await withTransaction(platform.db, async (client) => {
    if (await repo.hasActiveRun(client, threadId)) throw serviceError('thread_locked');
    const appended = await repo.appendMessages(client, threadId, [message!], MAX_THREAD_MESSAGES);
    if (appended === 'full') throw serviceError('thread_full');
    return appended[0]!;
  });
  await attachToThreadStore(platform, caller, thread, [message!]);
  return formatMessage(written);
}

export async function getMessage(db: Db, caller: ThreadCaller, threadId: string, id: string) {
  await threadOf(db, caller, threadId);
  const message = await repo.findMessage(db, threadId, id);
  if (!message) throw serviceError('not_found', { message: 'No such message in this thread.' });
  return formatMessage(message);
}

export async function updateMessage(db: Db, caller: ThreadCaller, threadId: string, id: string, metadata: Record<string, unknown> | null | undefined) {
  await threadOf(db, caller, threadId);
  const updated = await repo.updateMessageMetadata(db, threadId, id, metadata == null ? null : parseMetadata(metadata));
  if (!updated) throw serviceError('not_found', { message: 'No such message in this thread.' });
  return formatMessage(updated);
}

export async function listMessages(db: Db, caller: ThreadCaller, threadId: string, query: z.output<typeof messageListQuery>) {
  await threadOf(db, caller, threadId);
  const page = pageRequest({ limit: query.limit, after: typeof query.after === 'string' && query.after.startsWith('msg_') ? Buffer.from(JSON.stringify({ id: query.after })).toString('base64url') : query.after }, LIST_PAGE);
  const rows = await repo.listMessages(db, threadId, { ...page, order: query.order ?? 'desc' }, query.run_id);
  return withIds(toPage(rows, page, formatMessage));
}

/**
 * Files attached to messages for file_search go into the thread's own vector store (made on first
 * use, plaintext, text-embedding-3-small), which the thread's runs search.
 */
async function attachToThreadStore(platform: ThreadServices, caller: ThreadCaller, thread: repo.ThreadRow, messages: repo.NewMessage[]): Promise<void> {
  const fileIds = [
    ...new Set(
      messages.flatMap((message) =>
        ((message.attachments ?? []) as { file_id: string; tools?: { type: string }[] }[])
          .filter((attachment) => !attachment.tools || attachment.tools.some((tool) => tool.type === 'file_search'))
          .map((attachment) => attachment.file_id),
      ),
    ),
  ];
  if (fileIds.length === 0) return;
  const vectorCaller = { developerId: caller.developerId, payerAccountId: caller.payerAccountId, customerId: caller.customerId, passphrase: undefined };
  let storeId = thread.tool_resources?.file_search?.vector_store_ids?.[0];
  if (!storeId) {
    const store = await createVectorStore(platform, vectorCaller, { name: `Files of ${thread.id}`, embedding_model: 'text-embedding-3-small' });
    storeId = store.id;
    await repo.updateThread(platform.db, thread.id, { tool_resources: { ...thread.tool_resources, file_search: { vector_store_ids: [storeId] } } });
  }
  const store = await activeStore(platform.db, caller.developerId, storeId);
  await attachFiles(platform, vectorCaller, store, fileIds.map((fileId) => ({ file_id: fileId })), { batchId: null });
}

export function formatThread(thread: repo.ThreadRow) {
  return { id: thread.id, object: 'thread' as const, created_at: seconds(thread.created_at), metadata: thread.metadata ?? {}, tool_resources: thread.tool_resources ?? {} };
}

export function formatMessage(message: repo.MessageRow) {
  return {
    id: message.id,
    object: 'thread.message' as const,
    created_at: seconds(message.created_at),
    thread_id: message.thread_id,
    status: 'completed' as const,
    incomplete_details: null,
    completed_at: secondsOrNull(message.created_at),
    incomplete_at: null,
    role: message.role,
    content: message.content,
    assistant_id: message.assistant_id,
    run_id: message.run_id,
    attachments: message.attachments ?? [],
    metadata: message.metadata ?? {},
  };
}
