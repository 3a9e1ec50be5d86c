import type { ScopeFilter } from './repository.js';

/**
 * A mount's scope_map (spec 2): a flat map of source scope paths to target scope paths, applied
 * by longest-prefix match. A pack row at /docs/api under {"/docs": "/kb"} reads as /kb/api; a row
 * no key covers is not mounted at all.
 */
export type ScopeMap = Record<string, string>;

const covers = (prefix: string, scope: string) => prefix === '/' || scope === prefix || scope.startsWith(`${prefix}/`);
const rest = (prefix: string, scope: string) => (prefix === '/' ? (scope === '/' ? '' : scope) : scope.slice(prefix.length));
const join = (base: string, tail: string) => (tail === '' ? base : base === '/' ? tail : `${base}${tail}`);

/** The target scope of a source scope, or null when no key covers it. */
export function remapScope(scopeMap: ScopeMap, scope: string): string | null {
  let best: string | null = null;
  for (const source of Object.keys(scopeMap)) if (covers(source, scope) && (best === null || source.length > best.length)) best = source;
  return best === null ? null : join(scopeMap[best]!, rest(best, scope));
}

/**
 * The source scopes whose rows may land in a recall's scopes: exact scopes, and prefixes whose
 * whole subtree may (null: every row). A superset: callers check each row with remapScope, since
 * a longer key can take a row elsewhere.
 */
export function sourceScopesFor(scopeMap: ScopeMap, filter: ScopeFilter): { scopes: string[]; prefixes: string[] } | null {
  if (filter.subtreeOf === '/') return null;
  const scopes = new Set<string>();
  const prefixes = new Set<string>();
  for (const [source, target] of Object.entries(scopeMap)) {
    for (const wanted of filter.scopes) if (covers(target, wanted)) scopes.add(join(source, rest(target, wanted)));
    const subtree = filter.subtreeOf;
    if (subtree === null) continue;
    if (covers(target, subtree)) prefixes.add(join(source, rest(target, subtree)));
    else if (covers(subtree, target)) {
      scopes.add(source);
      prefixes.add(source);
    }
  }
  // A source prefix of / is every row.
  return prefixes.has('/') ? null : { scopes: [...scopes], prefixes: [...prefixes] };
}
