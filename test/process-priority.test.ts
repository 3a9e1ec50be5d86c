import { describe, expect, it } from 'vitest';
import { lastJsonOfChildScript } from './support/child-script.js';

describe('worker process priority', () => {
  it('lowers every thread of the process, and the threads started after take it too', async () => {
    // A child process: its threads (V8's, libuv's) exist before the call; a worker thread starts after it.
    const script = `
      import { readdirSync, readFileSync } from 'node:fs';
      import { Worker } from 'node:worker_threads';
      import { lowerProcessPriority } from './shared/platform/process-priority.ts';
      const niceness = () => readdirSync('/proc/self/task').map((tid) => Number(readFileSync('/proc/self/task/' + tid + '/stat', 'utf8').split(') ')[1].split(' ')[16]));
      const before = niceness();
      lowerProcessPriority(7);
      const worker = new Worker('setTimeout(() => {}, 200)', { eval: true });
      await new Promise((resolve) => worker.once('online', resolve));
      console.log(JSON.stringify({ before, after: niceness() }));
      await worker.terminate();
    `;
    const { before, after } = await lastJsonOfChildScript<{ before: number[]; after: number[] }>(script);
    expect(before.length).toBeGreaterThan(1);
    expect(before.every((value) => value !== 7)).toBe(true);
    expect(after.length).toBeGreaterThan(before.length);
    expect(new Set(after)).toEqual(new Set([7]));
  });
});
