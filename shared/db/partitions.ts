/**
 * The name of a per-resource partition: the table, then the resource's id lowercased (PostgreSQL
 * folds unquoted names) with a short FNV-1a hash of the exact id, since lowercasing can make two
 * base62 ids one name. Ids are checked against `pattern` first, so the name is safe in DDL.
 */
export function partitionName(table: string, id: string, pattern: RegExp, prefixLength: number): string {
  if (!pattern.test(id)) throw new Error(`not an id for ${table}: ${id}`);
  return `${table}_${id.slice(prefixLength).toLowerCase()}_${fnv1a(id)}`;
}

function fnv1a(id: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193);
  return (hash >>> 0).toString(36);
}
