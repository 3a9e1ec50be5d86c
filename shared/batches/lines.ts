import type { MeteredCall } from '../billing/metered-call.js';
import { attributeCustomer, type CustomerRow } from '../customers/customers.js';
import { ServiceError, serviceError, toEnvelope } from '../errors.js';
import { newId } from '../ids.js';
import { parseChatInput, planChat } from '../inference/chat.js';
import { translateUpstream } from '../inference/upstream-call.js';
import { completeChat } from '../inference/complete-chat.js';
import { createEmbeddings, embeddingsBody, planEmbeddings } from '../inference/embeddings.js';
import { parseBody } from '../validation.js';
import { resolveFileParts } from '../inference/file-parts.js';
import { fileStorageFor } from '../files/storage.js';
import { moderate, moderationsBody, planModeration } from '../inference/moderations.js';
import { resolutionContextFor } from '../models/definitions.js';
import type { GatewayServices } from '../composition/gateway.js';
import type { BatchEndpoint, RequestResult } from './repository.js';

/**
 * One batch line through the same inference path as a synchronous call: customer attribution by
 * the body's `user`, model references, wallet authorize/settle with usage records. Its charges
 * are idempotent under `batch:<batch id>:<custom_id>`, so a line run again after a worker died is
 * never charged twice. Refusals and provider failures become the line's error response; only an
 * abort (cancel, expiry, shutdown) or an infrastructure failure escapes, leaving the line pending.
 */
export interface BatchContext {
  batchId: string;
  developerId: string;
  payerAccountId: string;
  endpoint: BatchEndpoint;
  /** Half price from 10 requests up (spec 1), else the normal price. */
  priceFactor: number;
  signal: AbortSignal;
  /** Customers attributed in this chunk, by their `user` reference. */
  customers: Map<string, Promise<CustomerRow>>;
  /** Bounds lines in flight per upstream provider; `run` holds a slot for the call. */
  limit: <T>(provider: string, run: () => Promise<T>) => Promise<T>;
  /** The chunk's attempt: an unexpected failure that keeps coming back becomes the line's error. */
  attempt: number;
}

/** After this many attempts of a chunk, a line that keeps throwing is recorded as failed (500). */
const ATTEMPTS_BEFORE_LINE_FAILS = 5;

export async function runBatchLine(platform: GatewayServices, batch: BatchContext, line: { custom_id: string; body: Record<string, unknown> }): Promise<RequestResult> {
  const requestId = newId('req_');
  const resultId = newId('batch_req_');
  // Each line gets its own signal, tied to the chunk's: the HTTP client leaves a listener on the
  // signal it is given until the request is collected, so one shared signal would gather thousands.
  const lineAbort = new AbortController();
  const onAbort = () => lineAbort.abort(batch.signal.reason);
  if (batch.signal.aborted) onAbort();
  else batch.signal.addEventListener('abort', onAbort, { once: true });
  const context = { ...batch, signal: lineAbort.signal };
  try {
    const body = await execute(platform, context, line, requestId);
    return { customId: line.custom_id, resultId, succeeded: true, statusCode: 200, requestId, response: { status_code: 200, request_id: requestId, body }, error: null };
  } catch (caught) {
    if (context.signal.aborted) throw caught;
    const translated = caught instanceof ServiceError ? caught : translateUpstream(caught);
    let error: ServiceError;
    if (translated instanceof ServiceError) error = translated;
    else {
      if (context.attempt < ATTEMPTS_BEFORE_LINE_FAILS) throw caught;
      platform.logger.error({ err: caught, batchId: context.batchId, customId: line.custom_id }, 'batch line kept failing; recorded as internal_error');
      error = serviceError('internal_error');
    }
    return {
      customId: line.custom_id,
      resultId,
      succeeded: false,
      statusCode: error.status,
      requestId,
      response: { status_code: error.status, request_id: requestId, body: toEnvelope(error) },
      error: null,
    };
  } finally {
    batch.signal.removeEventListener('abort', onAbort);
  }
}

async function execute(platform: GatewayServices, context: BatchContext, line: { custom_id: string; body: Record<string, unknown> }, requestId: string): Promise<unknown> {
  const call: MeteredCall = {
    developerId: context.developerId,
    payerAccountId: context.payerAccountId,
    customer: await customerOf(platform, context, line.body.user),
    billableOverrideMicros: undefined,
    // A batch paces itself (bounded concurrency per upstream); its tokens do not spend the
    // developer's per-minute window that synchronous calls share.
    tokenCounterKeys: [],
    requestId,
  };
  const billingKey = `batch:${context.batchId}:${line.custom_id}`;
  switch (context.endpoint) {
    case '/v1/chat/completions': {
      const parsed = parseChatInput(line.body, { idempotencyKey: undefined });
      // File references (svc_file:<id>, file_id) resolve against the batch owner's files, as on a synchronous call.
      const input = { ...parsed, messages: await resolveFileParts(platform.db, fileStorageFor(platform.config), context.developerId, parsed.messages) };
      if (input.stream) throw serviceError('invalid_request', { param: 'stream', message: 'A batch line cannot stream; drop stream or set it to false.' });
      const targets = await planChat(input, resolutionContextFor(platform, context.developerId), platform.providers);
      const completed = await context.limit(targets[0]!.resolution.model.provider, () =>
        completeChat(platform, call, input, targets, { signal: context.signal, billingKey, priceFactor: context.priceFactor }),
      );
      return completed.body;
    }
    case '/v1/embeddings': {
      const plan = planEmbeddings(parseBody(embeddingsBody, line.body), platform.providers);
      const created = await context.limit(plan.model.provider, () => createEmbeddings(platform, call, plan, { signal: context.signal, billingKey, priceFactor: context.priceFactor }));
      return created.body;
    }
    case '/v1/moderations': {
      const plan = planModeration(parseBody(moderationsBody, line.body), platform.providers);
      // Metered at zero, like POST /v1/moderations: recorded, never charged.
      return context.limit(plan.model.provider, () => moderate(platform, call, plan, { signal: context.signal, billingKey }));
    }
  }
}

/** A line's `user` attributes it to a customer the way a synchronous call's does (created on first use unless lazy creation is off). */
function customerOf(platform: GatewayServices, context: BatchContext, user: unknown): Promise<CustomerRow> | null {
  if (user === undefined || user === null || user === '') return null;
  if (typeof user !== 'string') throw serviceError('invalid_request', { param: 'user', message: 'user must be a string: a cus_ id or your own id for the end user.' });
  let customer = context.customers.get(user);
  if (!customer) {
    customer = attributeCustomer(platform.db, platform.limiter, context.developerId, { reference: user, strict: false }, platform.config.LAZY_CREATE_PER_MINUTE);
    // A refusal is this line's answer, not the next line's: do not keep it.
    customer.catch(() => context.customers.delete(user));
    context.customers.set(user, customer);
  }
  return customer;
}
