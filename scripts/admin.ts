/**
 * Operator CLI: `npm run admin -- <command> [--flags]`. Every answer is one JSON document on
 * stdout; a failure is `{"error":{...}}` on stderr with exit code 1 (2 for a usage mistake).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import {
  createApiKey,
  creditDeveloperWallet,
  setLazyCustomerCreation,
  createDeveloperAccount,
  createProvisioningKey,
  getAccount,
  listApiKeys,
  revokeApiKey,
  type AccountWithWalletRow,
  type ApiKeyRow,
  type VoucherRow,
} from '../shared/accounts/accounts.js';
import { createVoucher, listVouchers } from '../shared/accounts/vouchers.js';
import { DEVELOPER_SCOPES } from '../shared/accounts/scopes.js';
import { loadConfig } from '../shared/config.js';
import { prepareDatabase } from '../shared/db/migrate.js';
import { createPool } from '../shared/db/pool.js';
import { ServiceError } from '../shared/errors.js';
import { HiveError } from '../shared/hive/errors.js';
import { addPerson, createPersonToken, listOrganisations } from '../shared/hive/operator.js';
import { createOrganisation } from '../shared/hive/people.js';
import { ROLES, type Role } from '../shared/hive/roles.js';
import { deviceApproveBody, signupBody } from '../shared/hive/schemas.js';
import { creditByOperator } from '../shared/hive/wallet.js';
import { createLogger } from '../shared/logger.js';
import { MICROS_PER_USD, microsToUsd, usdToMicros } from '../shared/money.js';

const USAGE = `usage: npm run admin -- <command> [options]

  create-developer --email <email> --password <8-256 chars> [--name <text>] [--credit-usd <amount>]
  get-account      --account <uuid>
  create-key       --account <uuid> --scopes <scope,scope> [--name <text>] [--expires-at <ISO 8601>]
  list-keys        --account <uuid>
  revoke-key       --account <uuid> --key <key id>
  create-provisioning-key --account <uuid>     (replaces the account's previous rsk_ key)
  create-voucher   --account <developer uuid> --amount-usd <amount>   (paid from the wallet now; code shown once)
  list-vouchers    --account <developer uuid>
  credit-wallet    --account <developer uuid> --amount-usd <amount> [--note <text>]
  set-lazy-create  --account <developer uuid> --enabled true|false   (create unknown customers on first use)

  memory hive (no signup option needed):
  create-hive-organisation --name <node name> --email <email> --password <12-200 chars>   (owner's first token shown once)
  list-hive-organisations
  add-hive-person  --organisation <org_…> --email <email> [--role ${ROLES.join('|')}] [--node <id or path>]   (default: member on the root)
  create-hive-token --organisation <org_…> --person <per_… or email> [--name <text>]   (a token of that person, shown once)
  credit-hive-wallet --organisation <org_…> --amount-usd <amount> [--note <text>]

  scopes: ${DEVELOPER_SCOPES.join(', ')}`;

const scopeList = z
  .string()
  .transform((text) => text.split(',').map((scope) => scope.trim()).filter(Boolean))
  .pipe(z.array(z.enum(DEVELOPER_SCOPES)).min(1, 'at least one scope is required'));

const hiveOrganisation = z.string().regex(/^org_[0-9A-Za-z]{24}$/, 'an organisation id (org_…)');

const commands = {
  'create-developer': z.object({
    email: z.email(),
    password: z.string().min(8).max(256),
    name: z.string().max(200).optional(),
    'credit-usd': z.coerce.number().finite().min(0).max(1_000_000).default(0),
  }),
  'get-account': z.object({ account: z.uuid() }),
  'create-key': z.object({
    account: z.uuid(),
    scopes: scopeList,
    name: z.string().max(80).default('default'),
    'expires-at': z.iso
      .datetime({ offset: true })
      .transform((text) => new Date(text))
      .refine((date) => date.getTime() > Date.now(), 'must be in the future')
      .optional(),
  }),
  'list-keys': z.object({ account: z.uuid() }),
  'revoke-key': z.object({ account: z.uuid(), key: z.uuid() }),
  'create-provisioning-key': z.object({ account: z.uuid() }),
  'create-voucher': z.object({
    account: z.uuid(),
    'amount-usd': z.coerce
      .number()
      .finite()
      .max(1_000_000)
      .refine((usd) => Math.round(usd * MICROS_PER_USD) >= 1, 'must be at least 0.000001'),
  }),
  'list-vouchers': z.object({ account: z.uuid() }),
  'credit-wallet': z.object({ account: z.uuid(), 'amount-usd': z.coerce.number().finite().positive().max(1_000_000), note: z.string().max(200).optional() }),
  'set-lazy-create': z.object({ account: z.uuid(), enabled: z.enum(['true', 'false']) }),
  // The hive's own rules for these fields, as its routes apply them.
  'create-hive-organisation': z.object({ name: signupBody.shape.organisation, email: signupBody.shape.email, password: signupBody.shape.password }),
  'list-hive-organisations': z.object({}),
  'add-hive-person': z.object({ organisation: hiveOrganisation, email: deviceApproveBody.shape.email, role: deviceApproveBody.shape.role.default('member'), node: deviceApproveBody.shape.node.optional() }),
  'create-hive-token': z.object({ organisation: hiveOrganisation, person: z.string().trim().min(1).max(254), name: z.string().trim().min(1).max(100).default('operator') }),
  'credit-hive-wallet': z.object({ organisation: hiveOrganisation, 'amount-usd': z.coerce.number().finite().positive().max(1_000_000), note: z.string().max(200).optional() }),
} as const;

type Command = keyof typeof commands;

/** The hive's errors carry a status only (spec 3); the CLI's JSON names it as the gateway's codes would. */
const HIVE_ERROR_CODES: Record<number, string> = { 400: 'invalid_request', 403: 'forbidden', 404: 'not_found', 409: 'conflict' };

function fail(code: string, message: string, exitCode: number): never {
  process.stderr.write(`${JSON.stringify({ error: { code, message } })}\n`);
  process.exit(exitCode);
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
if (existsSync(path.join(root, '.env'))) process.loadEnvFile(path.join(root, '.env'));

const { positionals, values } = parseCommandLine();
const command = positionals[0];
if (!command || command === 'help' || !(command in commands)) {
  if (command && command !== 'help') fail('unknown_command', `unknown command "${command}"\n${USAGE}`, 2);
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const parsed = commands[command as Command].safeParse(values);
if (!parsed.success) {
  const issue = parsed.error.issues[0]!;
  fail('invalid_arguments', `--${issue.path.join('.')}: ${issue.message}`, 2);
}
const options = parsed.data as Record<string, unknown>;

const config = loadConfig();
await prepareDatabase(config.DATABASE_URL);
const db = createPool(config.DATABASE_URL, 2, createLogger({ LOG_LEVEL: 'silent' }, 'admin'));

try {
  process.stdout.write(`${JSON.stringify(await execute(command as Command, options), null, 2)}\n`);
} catch (error) {
  if (error instanceof ServiceError) fail(error.code, error.message, 1);
  if (error instanceof HiveError) fail(HIVE_ERROR_CODES[error.status] ?? 'failed', error.message, 1);
  fail('failed', error instanceof Error ? error.message : String(error), 1);
} finally {
  await db.end();
}

/** An unknown flag or a flag without its value is a usage mistake like any other: JSON and exit 2. */
function parseCommandLine() {
  try {
    return parseArgs({
      allowPositionals: true,
      strict: true,
      options: Object.fromEntries(
        ['email', 'password', 'name', 'credit-usd', 'account', 'scopes', 'expires-at', 'key', 'amount-usd', 'note', 'enabled', 'organisation', 'role', 'node', 'person'].map((flag) => [flag, { type: 'string' as const }]),
      ),
    });
  } catch (error) {
    fail('invalid_arguments', `${error instanceof Error ? error.message : String(error)}\n${USAGE}`, 2);
  }
}

async function execute(name: Command, options: Record<string, unknown>): Promise<unknown> {
  const account = String(options.account);
  switch (name) {
    case 'create-developer':
      return formatAccount(
        await createDeveloperAccount(db, {
          email: String(options.email),
          password: String(options.password),
          displayName: options.name as string | undefined,
          initialCreditMicros: usdToMicros(Number(options['credit-usd'])),
        }),
      );
    case 'get-account':
      return formatAccount(await getAccount(db, account));
    case 'create-key': {
      const { key, plaintext } = await createApiKey(db, account, {
        name: String(options.name),
        scopes: options.scopes as (typeof DEVELOPER_SCOPES)[number][],
        expiresAt: options['expires-at'] as Date | undefined,
      });
      return { ...formatKey(key), api_key: plaintext, note: 'Shown once; only its SHA-256 is stored.' };
    }
    case 'list-keys':
      return { object: 'list', data: (await listApiKeys(db, account)).map(formatKey) };
    case 'revoke-key':
      await revokeApiKey(db, account, String(options.key));
      return { id: options.key, object: 'api_key', revoked: true };
    case 'create-provisioning-key': {
      const key = await createProvisioningKey(db, account);
      return {
        id: key.id,
        object: 'provisioning_key',
        account_id: account,
        display_prefix: key.display_prefix,
        created_at: key.created_at.toISOString(),
        provisioning_key: key.plaintext,
        note: 'Shown once; any previous rsk_ key of this account no longer works.',
      };
    }
    case 'create-voucher': {
      const { voucher, code } = await createVoucher(db, account, usdToMicros(Number(options['amount-usd'])));
      return {
        ...formatVoucher(voucher),
        voucher_code: code,
        note: 'Shown once; only its SHA-256 is stored. Its value has left the developer wallet; POST /v1/accounts with funding voucher redeems it once.',
      };
    }
    case 'list-vouchers':
      return { object: 'list', data: (await listVouchers(db, account)).map(formatVoucher) };
    case 'credit-wallet':
      return formatAccount(await creditDeveloperWallet(db, account, usdToMicros(Number(options['amount-usd'])), (options.note as string | undefined) ?? 'operator credit'));
    case 'set-lazy-create':
      await setLazyCustomerCreation(db, account, options.enabled === 'true');
      return { id: account, object: 'account', lazy_create_customers: options.enabled === 'true' };
    case 'create-hive-organisation':
      return createOrganisation({ db, config }, { organisation: String(options.name), email: String(options.email), password: String(options.password) });
    case 'list-hive-organisations':
      return listOrganisations(db);
    case 'add-hive-person':
      return addPerson(db, { orgId: String(options.organisation), email: String(options.email), role: options.role as Role, node: (options.node as string | undefined) ?? null });
    case 'create-hive-token':
      return createPersonToken(db, { orgId: String(options.organisation), person: String(options.person), name: String(options.name) });
    case 'credit-hive-wallet': {
      const credited = await creditByOperator(db, String(options.organisation), usdToMicros(Number(options['amount-usd'])), options.note as string | undefined);
      return {
        organisation: { id: options.organisation },
        credited_usd: Number(options['amount-usd']),
        balance_usd: microsToUsd(credited.balanceMicros),
        reference: credited.reference,
      };
    }
  }
}

function formatVoucher(row: VoucherRow) {
  return {
    id: row.id,
    object: 'voucher',
    account_id: row.account_id,
    display_prefix: row.display_prefix,
    amount_usd: microsToUsd(row.amount_micros),
    status: row.redeemed_at ? 'redeemed' : 'available',
    created_at: row.created_at.toISOString(),
    redeemed_at: row.redeemed_at?.toISOString() ?? null,
    redeemed_account_id: row.redeemed_account_id,
  };
}

function formatAccount(row: AccountWithWalletRow) {
  return {
    id: row.id,
    object: 'account',
    owner_type: row.owner_type,
    email: row.email,
    name: row.display_name,
    status: row.status,
    balance_usd: microsToUsd(row.balance_micros),
    created_at: row.created_at.toISOString(),
  };
}

function formatKey(row: ApiKeyRow) {
  return {
    id: row.id,
    object: 'api_key',
    account_id: row.account_id,
    name: row.name,
    display_prefix: row.display_prefix,
    scopes: row.scopes,
    expires_at: row.expires_at?.toISOString() ?? null,
    created_at: row.created_at.toISOString(),
  };
}
