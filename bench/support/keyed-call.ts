import { createApiKey } from '../../shared/accounts/accounts.js';
import type { MeteredCall } from '../../shared/billing/metered-call.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { developerTokensKey } from '../../shared/ratelimit/layers.js';

/**
 * The metered call a request with a developer key carries once the API's metered-call middleware
 * has read it (api/middleware/metered-call.ts): the key verified through the process's credential
 * cache, so the call reserves from its payer's quota grant in memory, as a request does, rather
 * than in PostgreSQL as work of a caller who is gone does (backgroundCall). A bench that times a
 * route's domain call times it with this.
 */
export async function keyedCall(platform: GatewayServices, developerId: string, requestId: string): Promise<MeteredCall> {
  // The API process listens for auth changes and so may serve calls from grants (api/app.ts); a bench process does the same.
  platform.grants.start();
  const { plaintext } = await createApiKey(platform.db, developerId, { name: 'bench', scopes: ['api:read', 'api:write'] });
  const { principal, generation } = await platform.credentials.developerKey(plaintext);
  return {
    developerId: principal.accountId,
    payerAccountId: principal.billingAccountId,
    customer: null,
    billableOverrideMicros: undefined,
    tokenCounterKeys: [developerTokensKey(principal.accountId)],
    requestId,
    credentials: { generation, reverify: async () => null },
  };
}
