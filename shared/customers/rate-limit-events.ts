import { recordEvent } from '../events/outbox.js';
import type { GatewayServices } from '../composition/gateway.js';

/**
 * customer.rate_limit_exceeded, at most once a minute per customer: a flood of refused calls
 * must not become a flood of webhook deliveries. Redis decides which refusal reports it.
 */
export async function recordCustomerRateLimited(platform: Pick<GatewayServices, 'db' | 'redis' | 'config'>, developerId: string, customerId: string): Promise<void> {
  const first = await platform.redis.set(`${platform.config.REDIS_KEY_PREFIX}:event-throttle:rate_limit:${customerId}`, '1', 'EX', 60, 'NX');
  if (first !== 'OK') return;
  await recordEvent(platform.db, developerId, 'customer.rate_limit_exceeded', { customer_id: customerId, window_seconds: 60 });
}
