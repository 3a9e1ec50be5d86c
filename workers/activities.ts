import type { Platform } from '../shared/platform/platform.js';

/**
 * Activities are thin adapters over domain code, made by a factory over the process's shared
 * connections. Each domain's activities are spread in here as they are written.
 */
export function createActivities(_platform: Platform): Record<string, (...args: never[]) => Promise<unknown>> {
  return {};
}
