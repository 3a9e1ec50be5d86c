import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { restartDelay, RESTART_POLICY, Supervised, type RestartPolicy } from '../scripts/lib/supervisor.js';
import { pollUntil } from './support/poll.js';

/** The start command's supervision of its children (issue 56), on real child processes with a fast policy. */
const FAST: RestartPolicy = { firstDelayMs: 20, maxDelayMs: 80, healthyAfterMs: 60_000, crashLoop: { exits: 5, withinMs: 60_000 } };
const running: Supervised[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((supervised) => supervised.stop(1_000)));
});

const node = (code: string): Promise<ChildProcess> => Promise.resolve(spawn(process.execPath, ['-e', code], { stdio: 'ignore' }));

function supervise(start: () => Promise<ChildProcess>, options: { hint?: string } = {}) {
  const lines: string[] = [];
  const supervised = new Supervised('child', start, (line) => lines.push(line), { policy: FAST, ...options });
  running.push(supervised);
  return { supervised, lines };
}

describe('restart backoff', () => {
  it('doubles from half a second to a cap of thirty', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 8, 50].map((n) => restartDelay(n))).toEqual([500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000]);
    expect(RESTART_POLICY.healthyAfterMs).toBe(60_000);
  });
});

describe('a supervised child', () => {
  it('is started again after it is killed, with one line naming the signal', async () => {
    const { supervised, lines } = supervise(() => node('setInterval(() => {}, 1000)'));
    expect(await supervised.run()).toBe(true);
    const first = supervised.current!;
    first.kill('SIGKILL');
    await pollUntil(async () => supervised.current, (current) => current !== undefined && current !== first);
    expect(lines).toEqual(['child exited (SIGKILL); restarting in 0.02 s (restart 1).']);
    expect(supervised.current!.exitCode).toBeNull();
  });

  it('says a crash loop loudly with its hint, and keeps retrying at the cap', async () => {
    const { supervised, lines } = supervise(() => node('process.exit(3)'), { hint: 'Check its key.' });
    await supervised.run();
    await pollUntil(async () => supervised.restarts, (restarts) => restarts >= 7);
    expect(lines[0]).toBe('child exited (code 3); restarting in 0.02 s (restart 1).');
    expect(lines.slice(0, 4).every((line) => !line.includes('CRASH LOOP'))).toBe(true);
    expect(lines[4]).toContain('CRASH LOOP: 5 exits within 60 s; the rest keeps serving. Check its key.');
    expect(lines[6]).toContain('restarting in 0.08 s');
  });

  it('retries a start that fails, saying why', async () => {
    let attempts = 0;
    const { supervised, lines } = supervise(async () => {
      attempts += 1;
      if (attempts < 3) throw new Error('the port is taken');
      return node('setInterval(() => {}, 1000)');
    });
    expect(await supervised.run()).toBe(false);
    await pollUntil(async () => supervised.current, (current) => current !== undefined);
    expect(lines).toEqual([
      'child could not start: the port is taken; restarting in 0.02 s (restart 1).',
      'child could not start: the port is taken; restarting in 0.04 s (restart 2).',
    ]);
  });

  it('stays stopped once stopped, whatever its process does', async () => {
    const { supervised, lines } = supervise(() => node('setInterval(() => {}, 1000)'));
    await supervised.run();
    const child = supervised.current!;
    await supervised.stop(1_000);
    expect(child.signalCode ?? child.exitCode).not.toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(supervised.current).toBeUndefined();
    expect(lines).toEqual([]);
  });
});
