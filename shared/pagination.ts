import { z } from 'zod';
import { serviceError } from './errors.js';

/**
 * The one cursor pagination of every list: query `limit` (clamped, never rejected) and `after`
 * (the previous page's next_cursor); response `{object: 'list', data, has_more, next_cursor}`.
 * A cursor names the last row's id, opaque to callers; the repository seeks past that row's
 * (created_at, id), so no timestamp ever round-trips through JavaScript's millisecond Dates.
 */
/**
 * The query every list takes (read by pageRequest); what the API documents. Neither is ever
 * refused for its type: a parameter sent twice (an array) reads as absent, as pageRequest has
 * always treated anything but one string; a bad cursor string is refused by pageRequest.
 */
export const pageQuery = z.object({
  limit: z.string().optional().catch(undefined).describe('Page size, 1 to 100 (default 20); out-of-range values are clamped.'),
  after: z.string().optional().catch(undefined).describe('The next_cursor of the previous page.'),
});

export type PageQuery = z.output<typeof pageQuery>;

export interface PageRequest {
  limit: number;
  after: CursorPosition | undefined;
}

export interface CursorPosition {
  id: string;
}

export interface Page<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

export function pageRequest(query: { limit?: unknown; after?: unknown }, bounds = { defaultLimit: 20, maxLimit: 100 }): PageRequest {
  const asked = typeof query.limit === 'string' ? Number.parseInt(query.limit, 10) : Number.NaN;
  const limit = Number.isFinite(asked) ? Math.min(Math.max(asked, 1), bounds.maxLimit) : bounds.defaultLimit;
  const after = typeof query.after === 'string' && query.after !== '' ? decodeCursor(query.after) : undefined;
  return { limit, after };
}

/** Callers fetch `limit + 1` rows; the extra one only says whether another page exists. */
export function toPage<Row extends { id: string }, T>(rows: Row[], request: PageRequest, format: (row: Row) => T): Page<T> {
  const hasMore = rows.length > request.limit;
  const pageRows = hasMore ? rows.slice(0, request.limit) : rows;
  const last = pageRows.at(-1);
  return {
    object: 'list',
    data: pageRows.map(format),
    has_more: hasMore,
    next_cursor: hasMore && last ? encodeCursor({ id: last.id }) : null,
  };
}

function encodeCursor(position: CursorPosition): string {
  return Buffer.from(JSON.stringify({ id: position.id })).toString('base64url');
}

function decodeCursor(cursor: string): CursorPosition {
  try {
    const { id } = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { id?: unknown };
    if (typeof id !== 'string' || id === '') throw new Error('bad cursor');
    return { id };
  } catch {
    throw serviceError('invalid_request', { message: 'The after cursor is not one this API returned.', param: 'after' });
  }
}

/** OpenAI's list fields beside the spec's cursor (first_id, last_id), for the surfaces that mirror OpenAI's lists. */
export function withIds<T extends { id: string }>(page: Page<T>): Page<T> & { first_id: string | null; last_id: string | null } {
  return { ...page, first_id: page.data[0]?.id ?? null, last_id: page.data.at(-1)?.id ?? null };
}
