import { Router } from 'express';
import { z } from 'zod';
import { getBalance, getProvisionedAccount, listProvisionedAccounts, type AccountWithWalletRow } from '../../shared/accounts/accounts.js';
import { microsToUsd } from '../../shared/money.js';
import type { Platform } from '../../shared/platform/platform.js';
import { principalOf, requireDeveloperKey, requireProvisioningKey } from '../middleware/authenticate.js';

const listQuery = z.object({ limit: z.string().optional(), after: z.string().optional() });

export function accountRoutes(platform: Platform): Router {
  const { db } = platform;
  const router = Router();

  router.get('/v1/balance', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    const balance = await getBalance(db, principalOf(req).accountId);
    res.json(
      balance.billing === 'linked'
        ? { object: 'balance', account_id: balance.accountId, billing: 'linked' }
        : { object: 'balance', account_id: balance.accountId, billing: 'wallet', balance_usd: microsToUsd(balance.balanceMicros) },
    );
  });

  router.get('/v1/accounts', requireProvisioningKey(platform), async (req, res) => {
    const page = await listProvisionedAccounts(db, principalOf(req).accountId, listQuery.parse(req.query));
    res.json({ ...page, data: page.data.map(formatAccount) });
  });

  router.get('/v1/accounts/:id', requireProvisioningKey(platform), async (req, res) => {
    res.json(formatAccount(await getProvisionedAccount(db, principalOf(req).accountId, String(req.params.id))));
  });

  return router;
}

function formatAccount(account: AccountWithWalletRow) {
  const linked = account.funding === 'linked';
  return {
    id: account.id,
    object: 'account',
    email: account.email,
    username: account.username,
    owner_type: account.owner_type,
    status: account.status,
    funding: account.funding,
    balance_usd: linked ? 0 : microsToUsd(account.balance_micros),
    spend_usd: linked ? 0 : microsToUsd(account.spend_micros),
    created_at: account.created_at.toISOString(),
    closed_at: account.closed_at?.toISOString() ?? null,
  };
}
