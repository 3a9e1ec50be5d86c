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

/**
 * Warms a timed loop the way a busy caller's traffic warms the API: at least `atLeast` calls, then
 * on until the payer's quota grant serves. A grant opens once a payer makes
 * METERING_GRANT_MIN_RATE calls in a second and lapses two seconds after its calls stop, so the
 * timed calls that follow meter in memory, as that caller's would. A loop too slow to earn one
 * (fewer calls a second than the rate) stops warming after two windows of the rate and is timed
 * metering in PostgreSQL, as such a caller is. Returns the calls made and whether a grant serves.
 */
export async function warmUntilGranted(platform: GatewayServices, developerId: string, atLeast: number, warmOne: (i: number) => Promise<unknown>): Promise<{ calls: number; granted: boolean }> {
  const granted = () => platform.grants.servingFor(developerId) > 0;
  const started = performance.now();
  let calls = 0;
  while (calls < atLeast || (!granted() && performance.now() - started < GRANT_RATE_WINDOWS_MS)) await warmOne(calls++);
  return { calls, granted: granted() };
}

/** How a warmed loop's calls were metered, for its row of a table. */
export const meteredWhere = (warmed: { granted: boolean }): string => (warmed.granted ? 'from the quota grant' : 'in PostgreSQL (too slow a loop for a grant)');

/** Two of the grants' one-second rate windows: a loop that earns a grant has by then. */
const GRANT_RATE_WINDOWS_MS = 2_000;
