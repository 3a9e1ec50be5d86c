import type { Express } from 'express';

/** Every route an Express app has mounted, read from its router stack (nested routers included). */
export function mountedRoutes(app: Express): Array<{ method: string; path: string }> {
  const found: Array<{ method: string; path: string }> = [];
  const walk = (stack: unknown[]) => {
    for (const layer of stack as Array<{ route?: { path: string; methods: Record<string, boolean> }; handle?: { stack?: unknown[] } }>) {
      if (layer.route) {
        for (const [method, on] of Object.entries(layer.route.methods)) if (on && method !== '_all') found.push({ method, path: layer.route.path });
      } else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: unknown[] } }).router.stack);
  return found;
}
