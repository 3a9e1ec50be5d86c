import { z } from 'zod';
import { getCustomer } from '../customers/customers.js';
import type { Db } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { microsToUsd } from '../money.js';
import * as repo from './repository.js';

/**
 * Usage and margin over a date range, grouped by UTC day or by concrete model. Margin is what the
 * developer billed minus the raw provider cost. Dates are YYYY-MM-DD (UTC), `end` inclusive;
 * the default range is the current UTC month.
 */
export const usageQuery = z.object({
  start: z.iso.date().optional(),
  end: z.iso.date().optional(),
  group_by: z.enum(['day', 'model']).default('day'),
});

export type UsageQuery = z.output<typeof usageQuery>;

export async function usageReport(db: Db, developerId: string, query: UsageQuery, customerRef?: string) {
  const now = new Date();
  const from = query.start ? new Date(`${query.start}T00:00:00Z`) : new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const to = query.end ? new Date(new Date(`${query.end}T00:00:00Z`).getTime() + 86_400_000) : new Date(now.getTime() + 1);
  if (to <= from) throw serviceError('invalid_request', { param: 'end', message: 'end must not be before start.' });
  const customerId = customerRef ? (await getCustomer(db, developerId, customerRef)).id : null;
  const rows = await repo.usageTotals(db, { developerId, customerId, from, to, groupBy: query.group_by });
  const data = rows.map((row) => {
    const cost = Number(row.cost_micros);
    const billable = Number(row.billable_micros);
    return {
      [query.group_by]: row.bucket,
      requests: Number(row.requests),
      tokens_in: Number(row.tokens_in),
      tokens_out: Number(row.tokens_out),
      cost_usd: microsToUsd(cost),
      billable_usd: microsToUsd(billable),
      margin_usd: microsToUsd(billable - cost),
    };
  });
  const sum = (key: 'requests' | 'cost_usd' | 'billable_usd' | 'margin_usd') => data.reduce((total, row) => total + (row[key] as number), 0);
  return {
    object: 'usage_report' as const,
    customer_id: customerId,
    start: from.toISOString().slice(0, 10),
    end: new Date(to.getTime() - 1).toISOString().slice(0, 10),
    group_by: query.group_by,
    data,
    totals: { requests: sum('requests'), cost_usd: round(sum('cost_usd')), billable_usd: round(sum('billable_usd')), margin_usd: round(sum('margin_usd')) },
  };
}

const round = (usd: number) => Math.round(usd * 1e6) / 1e6;
