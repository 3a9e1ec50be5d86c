import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseCircular, parseDependencyTree } from 'dpdm';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * No module of the product imports itself back through others, type-only imports included: a cycle
 * makes load order matter and hides which of two domains depends on the other.
 */
describe('import graph', () => {
  it('has no cycle in the product code', async () => {
    const tree = await parseDependencyTree(['api/**/*.ts', 'shared/**/*.ts', 'workers/**/*.ts', 'workflows/**/*.ts', 'scripts/**/*.ts'], {
      context: ROOT,
      tsconfig: path.join(ROOT, 'tsconfig.json'),
      // Keep `import type`: a cycle through types is still two modules that each need the other.
      transform: false,
      skipDynamicImports: false,
    });
    expect(Object.keys(tree).length).toBeGreaterThan(100);
    expect(parseCircular(tree).map((cycle) => cycle.join(' -> '))).toEqual([]);
  });
});
