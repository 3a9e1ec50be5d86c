import { z } from 'zod';
import { pageQuery } from '../pagination.js';
import { withErrorCode } from '../validation.js';

/** Request shapes of /v1/customers/{id}/conversations (spec 1: metadata at most 2 KB; status active or archived). */
const metadata = withErrorCode(z.record(z.string(), z.unknown()).nullable(), 'invalid_metadata');

export const conversationBody = z.strictObject({ metadata: metadata.optional() });

export const conversationPatchBody = z.strictObject({
  status: withErrorCode(z.string(), 'invalid_status_transition').optional().describe('active or archived; locked is set by turns only.'),
  metadata: metadata.optional(),
});

export const conversationListQuery = pageQuery.extend({
  status: withErrorCode(z.enum(['active', 'locked', 'archived']), 'invalid_status').optional(),
});

export const messageListQuery = pageQuery.extend({ order: z.enum(['asc', 'desc']).optional() });

export const sendMessageBody = z.strictObject({
  model: z.string().min(1).describe('A chat model reference of the gateway (svc:, match:, slot:, dyn:).'),
  content: withErrorCode(z.string().min(1).max(100_000), 'invalid_messages'),
  instructions: z.string().max(100_000).optional().describe('A system message put before the history for this turn.'),
  temperature: z.number().min(0).max(2).optional(),
  max_tokens: z.int32().positive().optional(),
  stream: z.boolean().optional().describe('Server-sent events: conversation.message.delta as the reply is generated, then conversation.message.completed.'),
});
