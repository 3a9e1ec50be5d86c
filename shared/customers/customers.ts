import { withTransaction, type Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { newId } from '../ids.js';
import { parseMetadata } from '../metadata.js';
import { microsToUsd, usdToMicros } from '../money.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import { EXTERNAL_ID, type CustomerInput, type CustomerListQuery } from './schemas.js';
import * as repo from './repository.js';

export type { CustomerRow } from './repository.js';

const UNIQUE_VIOLATION = '23505';
function toValues(input: Partial<CustomerInput>): repo.CustomerValues {
  if (input.default_billable_markup_pct != null && input.default_billable_amount_usd != null) throw serviceError('billable_defaults_mutex');
  return {
    external_id: input.external_id,
    monthly_budget_micros: input.monthly_budget_usd === undefined ? undefined : input.monthly_budget_usd === null ? null : usdToMicros(input.monthly_budget_usd),
    rpm_limit: input.rpm_limit,
    tpm_limit: input.tpm_limit,
    default_billable_markup_pct: input.default_billable_markup_pct,
    default_billable_amount_micros:
      input.default_billable_amount_usd === undefined ? undefined : input.default_billable_amount_usd === null ? null : usdToMicros(input.default_billable_amount_usd),
    lazy_create_customers: input.lazy_create_customers,
    metadata: input.metadata === undefined ? undefined : parseMetadata(input.metadata),
  };
}

/** Creates a customer and records customer.created in the same transaction. */
export async function createCustomer(db: Db, developerId: string, input: CustomerInput): Promise<repo.CustomerRow> {
  const values = toValues(input);
  return withTransaction(db, async (tx) => {
    const customer = await repo.insertCustomer(tx, developerId, newId('cus_'), values, false);
    if (!customer) throw serviceError('external_id_taken', { param: 'external_id' });
    await recordEvent(tx, developerId, 'customer.created', { customer: formatCustomer(customer) });
    return customer;
  });
}

/** A patch must name at least one updatable field; both billable defaults may never be set at once. */
export async function updateCustomer(db: Db, developerId: string, reference: string, input: CustomerInput): Promise<repo.CustomerRow> {
  if (Object.keys(input).length === 0) throw serviceError('empty_patch');
  const existing = await getCustomer(db, developerId, reference);
  const values = toValues(input);
  // Setting one billable default while the other is stored would leave both set.
  const markup = values.default_billable_markup_pct !== undefined ? values.default_billable_markup_pct : existing.default_billable_markup_pct;
  const amount = values.default_billable_amount_micros !== undefined ? values.default_billable_amount_micros : existing.default_billable_amount_micros;
  if (markup != null && amount != null) throw serviceError('billable_defaults_mutex');
  try {
    const updated = await repo.updateCustomer(db, developerId, existing.id, values);
    if (!updated) throw customerNotFound();
    return updated;
  } catch (error) {
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw serviceError('external_id_taken', { param: 'external_id' });
    throw error;
  }
}

export async function archiveCustomer(db: Db, developerId: string, reference: string): Promise<repo.CustomerRow> {
  const existing = await getCustomer(db, developerId, reference);
  if (existing.status === 'archived') return existing;
  return withTransaction(db, async (tx) => {
    const archived = await repo.archiveCustomer(tx, developerId, existing.id);
    if (!archived) return (await repo.findCustomerById(tx, developerId, existing.id))!;
    await recordEvent(tx, developerId, 'customer.archived', { customer: formatCustomer(archived) });
    return archived;
  });
}

/** A path parameter names a customer by `cus_` id or by `ext:<external_id>`; anything else names none (null). */
export function customerReference(reference: string): { id: string } | { externalId: string } | null {
  if (reference.startsWith('ext:')) return { externalId: reference.slice(4) };
  return reference.startsWith('cus_') ? { id: reference } : null;
}

export async function getCustomer(db: Db, developerId: string, reference: string): Promise<repo.CustomerRow> {
  const named = customerReference(reference);
  const customer = named === null ? undefined : 'id' in named ? await repo.findCustomerById(db, developerId, named.id) : await repo.findCustomerByExternalId(db, developerId, named.externalId);
  if (!customer) throw customerNotFound();
  return customer;
}

export async function listCustomers(db: Db, developerId: string, query: CustomerListQuery): Promise<Page<ReturnType<typeof formatCustomer>>> {
  const page = pageRequest(query);
  return toPage(await repo.listCustomers(db, developerId, page, query.status), page, formatCustomer);
}

export interface Attribution {
  /** Svc-Customer header, or the body's `user` field: a `cus_` id or an external id. */
  reference: string;
  /** Svc-Customer-Strict: true refuses to create an unknown customer. */
  strict: boolean;
}

/**
 * The customer a call is attributed to. An unknown external id is created on first use unless the
 * call is strict or the developer turned lazy creation off; creation itself is rate limited.
 */
export async function attributeCustomer(db: Db, limiter: RateLimiter, developerId: string, attribution: Attribution, lazyCreatePerMinute: number): Promise<repo.CustomerRow> {
  const { reference, strict } = attribution;
  const existing = reference.startsWith('cus_')
    ? await repo.findCustomerById(db, developerId, reference)
    : await repo.findCustomerByExternalId(db, developerId, reference);
  if (existing) {
    if (existing.status !== 'active') throw serviceError('customer_not_found', { message: 'That customer is archived.' });
    return existing;
  }
  if (strict || reference.startsWith('cus_') || !EXTERNAL_ID.safeParse(reference).success || !(await repo.developerAllowsLazyCreation(db, developerId))) {
    throw serviceError('customer_not_found');
  }
  return withTransaction(db, async (tx) => {
    const created = await repo.insertCustomer(tx, developerId, newId('cus_'), { external_id: reference }, true);
    // Another request created it between our look-up and our insert: use theirs.
    if (!created) return (await repo.findCustomerByExternalId(tx, developerId, reference))!;
    // Only a real creation spends the allowance; a refusal here rolls the insert back.
    await limiter.enforce([
      { key: `lazy_create:${developerId}`, limit: lazyCreatePerMinute, cost: 1, code: 'lazy_create_rate_exceeded', countsRequests: false },
    ]);
    await recordEvent(tx, developerId, 'customer.created', { customer: formatCustomer(created) });
    return created;
  });
}

export function formatCustomer(customer: repo.CustomerRow) {
  return {
    id: customer.id,
    object: 'customer' as const,
    external_id: customer.external_id,
    monthly_budget_usd: customer.monthly_budget_micros === null ? null : microsToUsd(customer.monthly_budget_micros),
    rpm_limit: customer.rpm_limit,
    tpm_limit: customer.tpm_limit,
    default_billable_markup_pct: customer.default_billable_markup_pct === null ? null : Number(customer.default_billable_markup_pct),
    default_billable_amount_usd: customer.default_billable_amount_micros === null ? null : microsToUsd(customer.default_billable_amount_micros),
    lazy_create_customers: customer.lazy_create_customers,
    metadata: customer.metadata,
    status: customer.status,
    created_on_first_use: customer.created_on_first_use,
    created_at: customer.created_at.toISOString(),
    updated_at: customer.updated_at.toISOString(),
    archived_at: customer.archived_at?.toISOString() ?? null,
  };
}

const customerNotFound = () => serviceError('not_found', { message: 'No such customer.' });
