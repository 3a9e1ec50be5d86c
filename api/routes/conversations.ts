import type { Request } from 'express';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import {
  createConversation,
  deleteConversation,
  getConversation,
  listConversationMessages,
  listConversations,
  sendMessage,
  streamMessage,
  updateConversation,
  type ConversationCaller,
} from '../../shared/conversations/conversations.js';
import { conversationBody, conversationListQuery, conversationPatchBody, messageListQuery, sendMessageBody } from '../../shared/conversations/schemas.js';
import { ServiceError, serviceError, toEnvelope } from '../../shared/errors.js';
import { translateUpstream } from '../../shared/inference/upstream-call.js';
import { principalOf } from '../middleware/authenticate.js';
import { abortWhenClientLeaves, meteredCallOf } from '../middleware/metered-call.js';
import { developerKey, metered, route, type RouteDefinition } from '../route-table.js';

/**
 * Conversations of a customer (spec 1: /v1/customers/{id}/conversations/..., api:chat / api:read).
 * A client token with the conversations scope reads one conversation, and sends and lists its
 * messages, for its own customer only.
 */
export function conversationRoutes(platform: GatewayServices): RouteDefinition[] {
  const surface = 'conversations';
  const base = '/v1/customers/:id/conversations';
  /** A developer key's caller (routes client tokens cannot reach). */
  const developer = (req: Request): ConversationCaller => ({ developerId: principalOf(req).accountId, pinnedCustomerId: null });
  /** A metered route's caller: a client token is pinned to its customer. */
  const metered_ = (req: Request): ConversationCaller => {
    const call = meteredCallOf(req);
    return { developerId: call.developerId, pinnedCustomerId: req.credential?.scheme === 'client' ? (call.customer?.id ?? null) : null };
  };
  return [
    route({
      method: 'post', path: base, surface, summary: 'Create a conversation for a customer', access: developerKey('api:chat'), input: { body: conversationBody, bodyOptional: true },
      handle: async (req, res, { params, body }) => res.json(await createConversation(platform.db, developer(req), params.id, body)),
    }),
    route({
      method: 'get', path: base, surface, summary: "List a customer's conversations (status: active, locked or archived)", access: developerKey('api:read'), input: { query: conversationListQuery },
      handle: async (req, res, { params, query }) => res.json(await listConversations(platform.db, developer(req), params.id, query)),
    }),
    route({
      method: 'get', path: `${base}/:conversationId`, surface, summary: 'Retrieve a conversation', access: metered('api:read', 'conversations'),
      handle: async (req, res, { params }) => res.json(await getConversation(platform.db, metered_(req), params.id, params.conversationId)),
    }),
    route({
      method: 'patch', path: `${base}/:conversationId`, surface, summary: "Archive or reactivate a conversation, or set its metadata", access: developerKey('api:chat'), input: { body: conversationPatchBody },
      handle: async (req, res, { params, body }) => res.json(await updateConversation(platform.db, developer(req), params.id, params.conversationId, body)),
    }),
    route({
      method: 'delete', path: `${base}/:conversationId`, surface, summary: 'Delete a conversation', access: developerKey('api:chat'),
      handle: async (req, res, { params }) => res.json(await deleteConversation(platform.db, developer(req), params.id, params.conversationId)),
    }),
    route({
      method: 'get', path: `${base}/:conversationId/messages`, surface, summary: "List a conversation's messages", access: metered('api:read', 'conversations'), input: { query: messageListQuery },
      handle: async (req, res, { params, query }) => res.json(await listConversationMessages(platform.db, metered_(req), params.id, params.conversationId, query)),
    }),
    route({
      method: 'post', path: `${base}/:conversationId/messages`, surface, summary: 'Send a message: one chat turn over the conversation, the message and its reply appended together', access: metered('api:chat', 'conversations'),
      input: { body: sendMessageBody },
      handle: async (req, res, { params, body }) => {
        const signal = abortWhenClientLeaves(res);
        if (!body.stream) return res.json(await sendMessage(platform, metered_(req), meteredCallOf(req), params.id, params.conversationId, body, signal));
        // Errors before the first event (lock, limits, model) answer as plain errors; the stream opens on the first event.
        const events = streamMessage(platform, metered_(req), meteredCallOf(req), params.id, params.conversationId, body, signal);
        let opened = false;
        try {
          for await (const { event, data } of events) {
            if (!opened) {
              res.status(200).setHeader('content-type', 'text/event-stream');
              res.setHeader('cache-control', 'no-cache');
              opened = true;
            }
            res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
          }
        } catch (error) {
          if (!opened) throw error;
          const translated = translateUpstream(error);
          res.write(`event: error\ndata: ${JSON.stringify(toEnvelope(translated instanceof ServiceError ? translated : serviceError('upstream_unavailable')))}\n\n`);
        }
        if (!opened) return res.status(200).json({});
        res.end('data: [DONE]\n\n');
      },
    }),
  ];
}
