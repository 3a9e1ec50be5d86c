import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export default defineConfig({
  test: {
    root,
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Files run in parallel, each with its own database, Redis prefix and task queue. A worker process
    // runs file after file without importing the platform afresh for each (isolate false): the imports
    // took 253 s of a full run's 661 (summed over its three workers), 34 s once per worker; a test of
    // process-wide state (an ephemeral key, a priority) runs it in a child process of its own.
    pool: 'forks',
    isolate: false,
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
