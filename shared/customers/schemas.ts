import { z } from 'zod';
import { pageQuery } from '../pagination.js';
import { withErrorCode } from '../validation.js';

/** Spec 1's customer fields, each with the code its validation failure carries; unknown fields are refused. */
export const EXTERNAL_ID = z.string().min(1).max(256).regex(/^[\x20-\x7e]+$/, 'printable ASCII');
const nonNegative = z.number().finite().min(0);
const positiveInteger = z.int32().positive();

export const customerBody = z.strictObject({
  external_id: withErrorCode(EXTERNAL_ID.nullable(), 'invalid_external_id').optional(),
  monthly_budget_usd: withErrorCode(nonNegative.max(1e9).nullable(), 'invalid_monthly_budget_usd').optional(),
  rpm_limit: withErrorCode(positiveInteger.nullable(), 'invalid_rpm_limit').optional(),
  tpm_limit: withErrorCode(positiveInteger.nullable(), 'invalid_tpm_limit').optional(),
  default_billable_markup_pct: withErrorCode(nonNegative.max(1e6).nullable(), 'invalid_default_billable_markup_pct').optional(),
  default_billable_amount_usd: withErrorCode(nonNegative.max(1e6).nullable(), 'invalid_default_billable_amount_usd').optional(),
  lazy_create_customers: withErrorCode(z.boolean(), 'invalid_lazy_create_customers').optional(),
  metadata: withErrorCode(z.unknown(), 'invalid_metadata').optional(),
});

export type CustomerInput = z.output<typeof customerBody>;

/** GET /v1/customers: a page, optionally of one status. */
export const customerListQuery = pageQuery.extend({
  status: z.enum(['active', 'archived'], { error: 'must be active or archived' }).optional(),
});

export type CustomerListQuery = z.output<typeof customerListQuery>;
