import type { GatewayServices } from '../shared/composition/gateway.js';
import { attemptRetry, createWebhookRuntime, type RetryOutcome, type RetryWorkflowInput, type WebhookRuntime } from '../shared/webhooks/delivery.js';

export type { RetryWorkflowInput, RetryOutcome };

export interface RetryAttempt {
  deliveryId: string;
  /** 1-based, for the workflow history. */
  retry: number;
  of: number;
  /** Wait before the next retry; null on the last one, whose failure makes the delivery dead. */
  nextDelaySeconds: number | null;
}

/** Webhook delivery activities: thin adapters over shared/webhooks/delivery.ts. */
export function createWebhookActivities(platform: GatewayServices, runtime: WebhookRuntime = webhookRuntimeOf(platform)) {
  return {
    async attemptWebhookDelivery(attempt: RetryAttempt): Promise<RetryOutcome> {
      return attemptRetry(runtime, attempt.deliveryId, attempt.nextDelaySeconds);
    },
  };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;

const runtimes = new WeakMap<GatewayServices, WebhookRuntime>();

/** One delivery runtime (one keep-alive agent) per process platform, shared by activities and consumers. */
export function webhookRuntimeOf(platform: GatewayServices): WebhookRuntime {
  let runtime = runtimes.get(platform);
  if (!runtime) {
    runtime = createWebhookRuntime(platform);
    runtimes.set(platform, runtime);
  }
  return runtime;
}
