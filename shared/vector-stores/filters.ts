import type { SearchFilter } from './schemas.js';

/**
 * OpenAI's attribute filters as SQL over a file's `attributes` (jsonb): comparison filters (eq,
 * ne, gt, gte, lt, lte, in, nin) and compound ones (and, or). Values travel as parameters; a key
 * the file lacks, or of another type than the value, does not match (ne and nin: it does).
 * Ordering comparisons compare numbers as numbers and strings in byte order.
 */
export function filterSql(filter: SearchFilter, column: string, params: unknown[]): string {
  if ('filters' in filter) {
    const parts = filter.filters.map((inner) => `(${filterSql(inner, column, params)})`);
    return parts.join(filter.type === 'and' ? ' AND ' : ' OR ');
  }
  const key = param(params, filter.key);
  const field = `${column} -> ${key}`;
  const value = filter.value;
  switch (filter.type) {
    case 'eq':
      return `${field} = ${param(params, JSON.stringify(value))}::jsonb`;
    case 'ne':
      return `${field} IS DISTINCT FROM ${param(params, JSON.stringify(value))}::jsonb`;
    case 'in':
    case 'nin': {
      const list = Array.isArray(value) ? value : [value];
      const member = `${field} IN (SELECT jsonb_array_elements(${param(params, JSON.stringify(list))}::jsonb))`;
      return filter.type === 'in' ? `coalesce(${member}, false)` : `NOT coalesce(${member}, false)`;
    }
    default: {
      const op = { gt: '>', gte: '>=', lt: '<', lte: '<=' }[filter.type];
      if (typeof value === 'number') {
        return `CASE WHEN jsonb_typeof(${field}) = 'number' THEN (${column} ->> ${key})::numeric ${op} ${param(params, value)}::numeric ELSE false END`;
      }
      if (typeof value === 'string') {
        return `CASE WHEN jsonb_typeof(${field}) = 'string' THEN (${column} ->> ${key}) COLLATE "C" ${op} ${param(params, value)}::text ELSE false END`;
      }
      return 'false';
    }
  }
}

function param(params: unknown[], value: unknown): string {
  params.push(value);
  return `$${params.length}`;
}
