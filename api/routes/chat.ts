import { Router, type Request, type Response } from 'express';
import type { MeteredCall } from '../../shared/billing/metered-call.js';
import { ServiceError, serviceError, toEnvelope } from '../../shared/errors.js';
import { newCompletionId, parseChatInput, planChat, translateUpstream, type ChatInput, type ChatTarget } from '../../shared/inference/chat.js';
import { MeteredChatStream } from '../../shared/inference/chat-stream.js';
import { CALL_DEADLINE_MS, completeChat } from '../../shared/inference/complete-chat.js';
import { fileStorageFor } from '../../shared/files/storage.js';
import { resolveFileParts } from '../../shared/inference/file-parts.js';
import { IdempotencyStore, type StoredResult } from '../../shared/inference/idempotency.js';
import { messageTexts, moderateInline, moderates } from '../../shared/inference/moderations.js';
import { resolutionContextFor } from '../../shared/models/definitions.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { UpstreamError } from '../../shared/providers/types.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';

export function chatRoutes(platform: GatewayServices): Router {
  const router = Router();
  const idempotency = new IdempotencyStore(platform.redis, platform.config.REDIS_KEY_PREFIX);
  const files = fileStorageFor(platform.config);
  router.post('/v1/chat/completions', meteredCall(platform, { developer: 'api:chat', clientToken: 'chat' }), async (req, res) => {
    const input = parseChatInput(req.body, { idempotencyKey: req.get('idempotency-key') });
    const call = meteredCallOf(req);
    input.messages = await resolveFileParts(platform.db, files, call.developerId, input.messages);
    const targets = await planChat(input, resolutionContextFor(platform, call.developerId), platform.providers);
    const key = req.get('idempotency-key');
    if (input.stream) {
      if (key) throw serviceError('invalid_request', { param: 'idempotency-key', message: 'A stream cannot be replayed: send idempotency-key with non-streaming calls only.' });
      await streamCompletion(platform, req, res, call, input, targets[0]!);
      return;
    }
    if (!key) {
      await completeWithCascade(platform, res, call, input, targets);
      return;
    }
    const scope = { developerId: call.developerId, customerId: call.customer?.id ?? null, key };
    const claim = await idempotency.begin(scope, req.body);
    if ('replay' in claim) {
      for (const [name, value] of Object.entries(claim.replay.headers)) res.setHeader(name, value);
      res.setHeader('Idempotent-Replayed', 'true');
      res.status(claim.replay.status).json(claim.replay.body);
      return;
    }
    try {
      const body = await completeWithCascade(platform, res, call, input, targets);
      await idempotency.complete(scope, req.body, replayOf(res, body));
    } catch (error) {
      await idempotency.abandon(scope);
      throw error;
    }
  });
  return router;
}

/** Headers a replay repeats: what describes the original answer, not this request. */
const REPLAYED_HEADERS = ['x-svc-model-resolved', 'x-svc-model-newer-available', 'x-svc-model-used', 'x-svc-models-tried', 'x-svc-fallback-triggered', 'x-svc-dynamic-profile', 'x-svc-dynamic-reason', 'x-svc-wallet-deducted', 'x-svc-wallet-balance'];

function setModelHeaders(res: Response, targets: ChatTarget[], used: ChatTarget, tried: string[]): void {
  const { resolution } = used;
  if (resolution.requested !== resolution.model.id) res.setHeader('X-Svc-Model-Resolved', resolution.model.id);
  if (resolution.newerAvailable) res.setHeader('X-Svc-Model-Newer-Available', resolution.newerAvailable);
  if (resolution.dynamic) {
    res.setHeader('X-Svc-Dynamic-Profile', resolution.dynamic.profile);
    res.setHeader('X-Svc-Dynamic-Reason', resolution.dynamic.reason);
  }
  if (targets.length > 1) {
    res.setHeader('X-Svc-Model-Used', resolution.model.id);
    res.setHeader('X-Svc-Models-Tried', tried.join(','));
    res.setHeader('X-Svc-Fallback-Triggered', String(tried.length > 1));
  }
}

/** Non-streaming: the completion is the domain's; the route adds the headers. Returns the body it sent. */
async function completeWithCascade(platform: GatewayServices, res: Response, call: MeteredCall, input: ChatInput, targets: ChatTarget[]): Promise<StoredResult['body']> {
  const completed = await completeChat(platform, call, input, targets, { signal: abortWhenClientLeaves(res) });
  setModelHeaders(res, targets, completed.target, completed.tried);
  setWalletHeaders(res, completed);
  res.json(completed.body);
  return completed.body;
}

/** What a completed call sent, for an idempotent replay: its body and the headers that describe it. */
function replayOf(res: Response, body: StoredResult['body']): StoredResult {
  const headers = Object.fromEntries(REPLAYED_HEADERS.flatMap((name) => (res.hasHeader(name) ? [[name, String(res.getHeader(name))]] : [])));
  return { status: 200, headers, body };
}

/**
 * Streaming: the response opens on the first upstream event (so a failure before it is still a
 * plain error response); a stream that breaks mid-way ends with an error event, never a silent
 * truncation. The money side (reserve, settle for what was generated) is MeteredChatStream's.
 */
async function streamCompletion(platform: GatewayServices, req: Request, res: Response, call: MeteredCall, input: ChatInput, target: ChatTarget): Promise<void> {
  const model = target.resolution.model;
  const signal = abortWhenClientLeaves(res);
  // Only pre moderation combines with a stream (parseChatInput refuses the others): before any model call.
  if (moderates(input.moderation, 'pre')) {
    await moderateInline(platform, call, messageTexts(input.messages), { stage: 'pre', signal, chatModel: model.id });
  }
  let stream: MeteredChatStream;
  try {
    stream = await MeteredChatStream.open(platform, call, target, input, signal, Date.now() + CALL_DEADLINE_MS);
  } catch (error) {
    throw error instanceof ServiceError ? error : translateUpstream(error);
  }
  const id = newCompletionId();
  const created = Math.floor(Date.now() / 1000);
  const chunk = (fields: Record<string, unknown>) => `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: model.id, ...fields })}\n\n`;
  const delta = (content: Record<string, unknown>, finishReason: string | null) =>
    chunk({ choices: [{ index: 0, delta: content, logprobs: null, finish_reason: finishReason }], ...(input.includeUsage && { usage: null }) });

  setModelHeaders(res, [target], target, [model.id]);
  res.status(200).setHeader('content-type', 'text/event-stream');
  res.setHeader('cache-control', 'no-cache');
  // The headers leave with this first chunk, in one write (flushing them first cost the first byte a write of its own).
  res.write(delta({ role: 'assistant', content: '' }, null));

  let failure: unknown;
  try {
    for await (const event of stream.events()) {
      if (event.type === 'delta') {
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
  if (res.writableEnded || signal.aborted) return;
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
}

