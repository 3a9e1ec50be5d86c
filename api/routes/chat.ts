import type { Request, Response } from 'express';
import { z } from 'zod';
import { ServiceError, serviceError, toEnvelope } from '../../shared/errors.js';
import type { ChatInput, ChatTarget } from '../../shared/inference/chat.js';
import type { ChatMessage } from '../../shared/providers/types.js';
import { chatCompletionBody, chatMessage, newCompletionId, parseChatInput } from '../../shared/inference/chat.js';
import { answerChat, modelHeaders, openChatStream, type ChatReply } from '../../shared/inference/chat-completions.js';
import { IdempotencyStore } from '../../shared/inference/idempotency.js';
import { fileStorageFor } from '../../shared/files/storage.js';
import type { MeteredCall } from '../../shared/billing/metered-call.js';
import { translateUpstream } from '../../shared/inference/upstream-call.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { afterAmbientTurn, BRAIN_STATUS_HEADER, recallIntoPrompt, type AttachedRecall, type BrainAttachment, type BrainStatus } from '../../shared/brains/ambient.js';
import { ambientBrainHeaders } from '../../shared/brains/schemas.js';
import { parseWith } from '../../shared/validation.js';
import { abortWhenClientLeaves, meteredCallOf } from '../middleware/metered-call.js';
import { metered, route, type RouteDefinition } from '../route-table.js';

/** What the API documents: the body chat reads, with its messages spelled out. */
const chatRequest = chatCompletionBody.extend({
  model: z.union([z.string(), z.array(z.string())]).describe('A typed model reference (svc:, match:, slot:, dyn:) or a cascade of them.'),
  messages: z.array(chatMessage).min(1),
});

export function chatRoutes(platform: GatewayServices): RouteDefinition[] {
  const stores = { idempotency: new IdempotencyStore(platform.redis, platform.config.REDIS_KEY_PREFIX), files: fileStorageFor(platform.config) };
  return [
    route({
      method: 'post', path: '/v1/chat/completions', surface: 'chat.completions', summary: 'Create a chat completion (server-sent events when stream is true)',
      access: metered('api:chat', 'chat'),
      input: { body: chatRequest, read: (raw, req) => parseChatInput(raw, { idempotencyKey: req.get('idempotency-key') }), headers: ambientBrainHeaders.partial() },
      response: { headers: { [BRAIN_STATUS_HEADER]: 'With a Brain header: attached, attached:empty_recall, ignored:unknown_brain, ignored:client_token or ignored:recall_failed (an open set).' } },
      handle: async (req, res, { body: input }) => {
        const call = meteredCallOf(req);
        const signal = abortWhenClientLeaves(res);
        const brain = ambientBrainOf(req, res);
        let attached: AttachedRecall | null = null;
        const augment = brain && ((messages: ChatMessage[]) => recallIntoPrompt(platform, call, brain, messages).then((recalled) => {
          attached = recalled;
          reportBrain(res, recalled.status);
          return recalled.messages;
        }));
        const answer = await answerChat(platform, stores, call, { input, body: req.body, idempotencyKey: req.get('idempotency-key'), signal, ...(augment && { augment }) });
        let answerText: string | null;
        if (answer.kind === 'stream') answerText = await relayStream(platform, req, res, call, answer.input, answer.target, signal);
        else {
          sendReply(res, answer.reply);
          answerText = replyText(answer.reply);
        }
        if (brain) afterAmbientTurn(platform, call, brain, { attached, answer: answerText });
      },
    }),
  ];
}

/**
 * The Brain headers of a chat completion: honoured under Bearer auth only (a client token's call
 * runs as if they were absent, and says so in Brain-Status). Malformed values are a 400.
 */
function ambientBrainOf(req: Request, res: Response): BrainAttachment | null {
  if (req.get('brain') === undefined) return null;
  if (req.credential?.scheme === 'client') {
    reportBrain(res, 'ignored:client_token');
    return null;
  }
  const headers = parseWith(ambientBrainHeaders, {
    brain: req.get('brain'),
    'brain-scope': req.get('brain-scope'),
    'brain-trust': req.get('brain-trust'),
    'brain-subtree': req.get('brain-subtree')?.toLowerCase(),
    'brain-learn': req.get('brain-learn')?.toLowerCase(),
  });
  return { brainId: headers.brain, scope: headers['brain-scope'], trust: headers['brain-trust'], subtree: headers['brain-subtree'] === 'true', learn: headers['brain-learn'] === 'true' };
}

/** Brain-Status, readable by browser callers too. */
function reportBrain(res: Response, status: BrainStatus): void {
  res.setHeader(BRAIN_STATUS_HEADER, status);
  res.setHeader('Access-Control-Expose-Headers', BRAIN_STATUS_HEADER);
}

function sendReply(res: Response, reply: ChatReply): void {
  for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
  if (reply.replayed) res.setHeader('Idempotent-Replayed', 'true');
  res.status(reply.status).json(reply.body);
}

/**
 * Streaming: the response opens on the first upstream event (so a failure before it is still a
 * plain error response); a stream that breaks mid-way ends with an error event, never a silent
 * truncation. The money side (reserve, settle for what was generated) is MeteredChatStream's.
 */
async function relayStream(platform: GatewayServices, req: Request, res: Response, call: MeteredCall, input: ChatInput, target: ChatTarget, signal: AbortSignal): Promise<string | null> {
  const model = target.resolution.model;
  const stream = await openChatStream(platform, call, input, target, signal);
  const id = newCompletionId();
  const created = Math.floor(Date.now() / 1000);
  const chunk = (fields: Record<string, unknown>) => `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: model.id, ...fields })}\n\n`;
  const delta = (content: Record<string, unknown>, finishReason: string | null) =>
    chunk({ choices: [{ index: 0, delta: content, logprobs: null, finish_reason: finishReason }], ...(input.includeUsage && { usage: null }) });

  for (const [name, value] of Object.entries(modelHeaders([target], target, [model.id]))) res.setHeader(name, value);
  res.status(200).setHeader('content-type', 'text/event-stream');
  res.setHeader('cache-control', 'no-cache');
  // The headers leave with this first chunk, in one write (flushing them first cost the first byte a write of its own).
  res.write(delta({ role: 'assistant', content: '' }, null));

  let failure: unknown;
  let text = '';
  try {
    for await (const event of stream.events()) {
      if (event.type === 'delta') {
        if (event.content) text += event.content;
        const toolCalls = event.toolCalls?.map((part) => ({
          index: part.index,
          ...(part.id && { id: part.id, type: 'function' }),
          function: { ...(part.name && { name: part.name }), ...(part.arguments !== undefined && { arguments: part.arguments }) },
        }));
        res.write(delta({ ...(event.content && { content: event.content }), ...(toolCalls && { tool_calls: toolCalls }) }, null));
      } else if (event.type === 'finish') res.write(delta({}, event.finishReason));
    }
  } catch (error) {
    failure = error;
  }

  // Settled before the stream ends, so a caller that sees the end also sees the charge.
  const usage = await stream.finish(failure === undefined, id);
  if (res.writableEnded || signal.aborted) return null;
  if (failure !== undefined) {
    req.log.warn({ err: failure, model: model.id }, 'upstream stream failed mid-way');
    const translated = translateUpstream(failure);
    res.write(`data: ${JSON.stringify(toEnvelope(translated instanceof ServiceError ? translated : serviceError('upstream_unavailable')))}\n\n`);
  } else {
    if (input.includeUsage) {
      res.write(chunk({ choices: [], usage: { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens } }));
    }
    res.write('data: [DONE]\n\n');
  }
  res.end();
  return failure === undefined ? text : null;
}

/** The text of a completed reply (an ambient turn learns from it); null for an error reply. */
function replyText(reply: ChatReply): string | null {
  if (reply.status !== 200) return null;
  const content = (reply.body as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
  return typeof content === 'string' ? content : null;
}
