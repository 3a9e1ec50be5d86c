import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayApp } from '../api/app.js';
import { describeRoute } from '../shared/compatibility/surfaces.js';
import { mountedRoutes } from './support/mounted-routes.js';
import { call, startTestPlatform, type TestPlatform } from './support/test-platform.js';

let gateway: TestPlatform;
let surfaces: Array<{ surface: string; paths: string[]; status: string; compatible_with: string }>;
beforeAll(async () => {
  gateway = await startTestPlatform();
  surfaces = (await call(gateway.baseUrl, '/v1/compatibility')).body.surfaces;
});
afterAll(() => gateway?.close());

/** A path of the list with its {placeholders} filled, so the request reaches the route. */
const concrete = (path: string) => path.replace(/\{(\w+)\}/g, (_match, name: string) => `probe_${name}`);

describe('GET /v1/compatibility is derived from the mounted routes', () => {
  it('lists every mounted /v1 route under an available surface, and nothing that is not mounted', () => {
    const mounted = mountedRoutes(createGatewayApp(gateway.platform))
      .filter((route) => route.path.startsWith('/v1/'))
      .map(describeRoute);
    expect(mounted.length).toBeGreaterThan(50);
    const listed = surfaces.filter((surface) => surface.status === 'available').flatMap((surface) => surface.paths.filter((path) => path !== '*'));
    expect([...listed].sort()).toEqual([...new Set(mounted)].sort());
  });

  it('lists every built surface as available (files, batches, vector stores, assistants, conversations, brains, packs)', () => {
    const status = Object.fromEntries(surfaces.map((surface) => [surface.surface, surface.status]));
    expect(status).toMatchObject({ files: 'available', batches: 'available', 'chat.completions': 'available', vector_stores: 'available', assistants: 'available', conversations: 'available', brains: 'available', packs: 'available' });
    expect(surfaces.find((surface) => surface.surface === 'files')?.compatible_with).toBe('openai.files');
  });

  it('every available path answers, none with "No route"', async () => {
    const paths = surfaces.filter((surface) => surface.status === 'available').flatMap((surface) => surface.paths.filter((path) => path !== '*'));
    for (const entry of paths) {
      const [method, path] = entry.split(' ') as [string, string];
      const response = await call(gateway.baseUrl, concrete(path), { method, ...(method !== 'GET' && method !== 'DELETE' && { json: {} }) });
      const noRoute = response.status === 404 && /^No route for/.test(String(response.body?.error?.message));
      expect(noRoute, `${entry} answered ${response.status} ${JSON.stringify(response.body)}`).toBe(false);
    }
  });
});
