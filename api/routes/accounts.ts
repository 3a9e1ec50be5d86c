import { z } from 'zod';
import { getBalance, getProvisionedAccount, listProvisionedAccounts, type AccountWithWalletRow } from '../../shared/accounts/accounts.js';
import { closeProvisionedAccount, provisionAccount, type ProvisionFunding } from '../../shared/accounts/provisioning.js';
import { MICROS_PER_USD, microsToUsd, usdToMicros } from '../../shared/money.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { principalOf } from '../middleware/authenticate.js';
import { developerKey, PROVISIONING_KEY, route, type RouteDefinition } from '../route-table.js';

const listQuery = z.object({ limit: z.string().optional(), after: z.string().optional() });

/** Lengths are counted in characters (code points), as the spec states them, not UTF-16 units. */
const secret = z.string().refine((text) => {
  const length = [...text].length;
  return length >= 8 && length <= 256;
}, 'must be 8-256 characters');

const createAccountBody = z
  .object({
    email: z.email().max(254),
    username: z.string().regex(/^[A-Za-z0-9_]{3,20}$/, 'must be 3-20 letters, digits or underscores'),
    password: secret,
    vault_password: secret.optional(),
    funding: z.enum(['self', 'grant', 'voucher', 'linked']).default('self'),
    amount_usd: z.number().positive().max(1_000_000_000).optional(),
    voucher_code: z.string().min(1).max(200).optional(),
  })
  .superRefine((body, ctx) => {
    // Runs even when a field above failed, so it reads `body` defensively.
    // Money fields only count with the mode that uses them; a stray one is refused, never ignored.
    if (body.funding === 'grant' && body.amount_usd === undefined) {
      ctx.addIssue({ code: 'custom', path: ['amount_usd'], message: 'is required with funding grant' });
    } else if (body.amount_usd !== undefined && body.funding !== 'grant') {
      ctx.addIssue({ code: 'custom', path: ['amount_usd'], message: 'is only accepted with funding grant' });
    } else if (typeof body.amount_usd === 'number' && Math.round(body.amount_usd * MICROS_PER_USD) < 1) {
      ctx.addIssue({ code: 'custom', path: ['amount_usd'], message: 'must be at least 0.000001' });
    }
    if (body.funding === 'voucher' && body.voucher_code === undefined) {
      ctx.addIssue({ code: 'custom', path: ['voucher_code'], message: 'is required with funding voucher' });
    } else if (body.voucher_code !== undefined && body.funding !== 'voucher') {
      ctx.addIssue({ code: 'custom', path: ['voucher_code'], message: 'is only accepted with funding voucher' });
    }
  });

type CreateAccountBody = z.infer<typeof createAccountBody>;

export function accountRoutes(platform: GatewayServices): RouteDefinition[] {
  const { db, config } = platform;
  const surface = 'accounts';
  return [
    route({
      method: 'get', path: '/v1/balance', surface: 'balance', summary: "The calling developer's wallet balance", access: developerKey('api:read'),
      handle: async (req, res) => {
        const balance = await getBalance(db, principalOf(req).accountId);
        res.json(
          balance.billing === 'linked'
            ? { object: 'balance', account_id: balance.accountId, billing: 'linked' }
            : { object: 'balance', account_id: balance.accountId, billing: 'wallet', balance_usd: microsToUsd(balance.balanceMicros) },
        );
      },
    }),
    // 201: a new resource exists. The ko_ key is in this response only.
    route({
      method: 'post', path: '/v1/accounts', surface, summary: 'Provision an account (its API key is in this response only)',
      access: PROVISIONING_KEY, input: { body: createAccountBody, bodyOptional: true }, response: { status: 201, description: 'Created' },
      handle: async (req, res, { body }) => {
        const created = await provisionAccount(
          db,
          principalOf(req).accountId,
          { email: body.email, username: body.username, password: body.password, vaultPassword: body.vault_password, funding: fundingOf(body) },
          { accountCap: config.ACCOUNT_CAP },
        );
        res.status(201).json({
          account: { id: created.account.id, email: created.account.email, username: created.account.username, owner_type: created.account.owner_type },
          api_key: created.apiKey.plaintext,
          api_key_prefix: created.apiKey.displayPrefix,
          credit: {
            balance_usd: microsToUsd(created.credit.balanceMicros),
            funding: created.credit.funding,
            applied: created.credit.applied,
            reason: created.credit.reason,
          },
          message: 'Account created. Store api_key now: it is shown once and cannot be recovered.',
        });
      },
    }),
    route({
      method: 'get', path: '/v1/accounts', surface, summary: 'List provisioned accounts', access: PROVISIONING_KEY, input: { query: listQuery },
      handle: async (req, res, { query }) => {
        const page = await listProvisionedAccounts(db, principalOf(req).accountId, query);
        res.json({ ...page, data: page.data.map(formatAccount) });
      },
    }),
    route({
      method: 'get', path: '/v1/accounts/:id', surface, summary: 'Retrieve a provisioned account', access: PROVISIONING_KEY,
      handle: async (req, res, { params }) => {
        res.json(formatAccount(await getProvisionedAccount(db, principalOf(req).accountId, params.id)));
      },
    }),
    route({
      method: 'delete', path: '/v1/accounts/:id', surface, summary: 'Close a provisioned account', access: PROVISIONING_KEY,
      handle: async (req, res, { params }) => {
        const closed = await closeProvisionedAccount(db, principalOf(req).accountId, params.id);
        res.json({ id: closed.id, object: 'account', status: closed.status, deleted: true });
      },
    }),
  ];
}

function fundingOf(body: CreateAccountBody): ProvisionFunding {
  switch (body.funding) {
    case 'grant':
      return { mode: 'grant', amountMicros: usdToMicros(body.amount_usd!) };
    case 'voucher':
      return { mode: 'voucher', voucherCode: body.voucher_code! };
    default:
      return { mode: body.funding };
  }
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
