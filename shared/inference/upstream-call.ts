import { startMeteredCall, type MeteredCall, type MeteredResult, type StartedCall, type UpstreamOutcome } from '../billing/metered-call.js';
import type { SettlementEvent } from '../billing/meter.js';
import type { GatewayServices } from '../composition/gateway.js';
import { serviceError, ServiceError } from '../errors.js';
import { UpstreamError } from '../providers/types.js';

/**
 * The one way a surface calls a provider: reserve the call's most it can cost, try the provider
 * (retrying retryable failures with backoff inside the surface's deadline), settle for what it
 * really cost, and turn a provider's failure into the caller's error. Chat, embeddings,
 * moderations, rerank, images, speech and transcriptions all go through `callUpstream`.
 */

/** How long one call of each surface may take, retries included. */
export const UPSTREAM_DEADLINES_MS = {
  chat: 120_000,
  media: 120_000,
  embeddings: 60_000,
  rerank: 60_000,
  moderation: 30_000,
} as const;

export type UpstreamSurface = keyof typeof UPSTREAM_DEADLINES_MS;

type MeteringServices = Pick<GatewayServices, 'db' | 'config' | 'limiter' | 'meteringTimings' | 'grants'>;

export interface UpstreamCallSpec<T> {
  surface: UpstreamSurface;
  /** The most the call can cost, reserved before it runs (0: recorded, never charged). */
  reserveMicros: number;
  /** Aborts the call: the client went away, a batch was cancelled. */
  signal: AbortSignal;
  /** One attempt at the provider. */
  attempt: () => Promise<T>;
  /** What the answered call is billed as. */
  meter: (result: T) => Omit<UpstreamOutcome<T>, 'result'>;
  /** Makes the charge idempotent (a batch line run again is never charged twice). */
  idempotencyKey?: string;
  /** The call's own events, committed with its charge. */
  events?: (outcome: UpstreamOutcome<T>) => SettlementEvent[];
  /** The call's deadline (epoch ms); by default the surface's from now. A chat model's re-prompts share one. */
  deadline?: number;
  /**
   * false: a provider failure is thrown as it is (an UpstreamError), for the chat cascade that
   * decides from it whether the next model may answer, and translates it itself.
   */
  translate?: boolean;
}

export async function callUpstream<T>(platform: MeteringServices, call: MeteredCall, spec: UpstreamCallSpec<T>): Promise<MeteredResult<T>> {
  const started = await startUpstreamCall(platform, call, spec);
  return { result: started.result, ...(await started.settled) };
}

/** callUpstream, returning as soon as the provider answered: the call's settlement runs on (see StartedCall). */
export async function startUpstreamCall<T>(platform: MeteringServices, call: MeteredCall, spec: UpstreamCallSpec<T>): Promise<StartedCall<T>> {
  const deadline = spec.deadline ?? Date.now() + UPSTREAM_DEADLINES_MS[spec.surface];
  try {
    return await startMeteredCall(
      platform,
      call,
      spec.reserveMicros,
      async () => {
        const result = await withRetries(spec.attempt, deadline, spec.signal);
        return { result, ...spec.meter(result) };
      },
      { ...(spec.idempotencyKey && { idempotencyKey: spec.idempotencyKey }), ...(spec.events && { events: spec.events }) },
    );
  } catch (error) {
    throw spec.translate === false ? error : translateUpstream(error);
  }
}

/** Backoff before each retry of a retryable upstream failure; the deadline bounds the whole call. */
const RETRY_DELAYS_MS = [250, 750, 2_000];

/**
 * Calls `attempt` until it succeeds, a failure is not retryable, the retries run out or the next
 * wait would pass the deadline. The provider's Retry-After is honoured when it fits.
 */
export async function withRetries<T>(attempt: () => Promise<T>, deadline: number, signal: AbortSignal): Promise<T> {
  for (let retry = 0; ; retry++) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof UpstreamError) || !error.retryable || retry >= RETRY_DELAYS_MS.length || signal.aborted) throw error;
      const wait = Math.max(RETRY_DELAYS_MS[retry]!, (error.retryAfterSeconds ?? 0) * 1000);
      if (Date.now() + wait >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/** A provider failure as the caller sees it: the provider's refusal of this request, or unavailability. */
export function translateUpstream(error: unknown): ServiceError | unknown {
  if (!(error instanceof UpstreamError)) return error;
  if (!error.retryable && (error.status === 400 || error.status === 404 || error.status === 413 || error.status === 422)) {
    return serviceError('upstream_rejected_request', { message: error.message });
  }
  return serviceError('upstream_unavailable', { message: `${error.message}` });
}
