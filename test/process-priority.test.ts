import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

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
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: process.cwd() });
    const { before, after } = JSON.parse(stdout.trim().split('\n').at(-1)!) as { before: number[]; after: number[] };
    expect(before.length).toBeGreaterThan(1);
    expect(before.every((value) => value !== 7)).toBe(true);
    expect(after.length).toBeGreaterThan(before.length);
    expect(new Set(after)).toEqual(new Set([7]));
  });
});
