import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishRunEvents, RunEventReader, type RunEvent } from '../shared/assistants/run-events.js';
import { loadConfig } from '../shared/config.js';
import { pollUntil } from './support/poll.js';

/**
 * The run event reader against the real Redis: every follower of every run in a process is served
 * by one blocking connection, each gets exactly its run's events after its cursor, in order, and
 * one that starts while the read is blocked is read for at once.
 */
const { REDIS_URL } = loadConfig();
const prefix = `test-run-events-${process.pid}-${Date.now()}`;
const readerName = `test-run-events-${process.pid}`;
let commands: Redis;
let publisher: Redis;

beforeAll(() => {
  commands = new Redis(REDIS_URL);
  publisher = new Redis(REDIS_URL);
});
afterAll(async () => {
  await commands.quit();
  await publisher.quit();
});

/** A reader whose blocking reads wait `blockMs`: long enough that a follower left out of one would time its test out. */
function reader(blockMs = 60_000): RunEventReader {
  return new RunEventReader(commands, () => new Redis(REDIS_URL, { connectionName: readerName, maxRetriesPerRequest: null }), prefix, blockMs);
}

async function readerConnections(): Promise<number> {
  const list = (await commands.client('LIST')) as string;
  return list.split('\n').filter((line) => line.includes(` name=${readerName} `)).length;
}

async function collect(events: AsyncGenerator<RunEvent>): Promise<string[]> {
  const names: string[] = [];
  for await (const event of events) names.push(`${event.event}:${JSON.stringify(event.data)}`);
  return names;
}

const publish = (runId: string, ...events: [string, unknown][]) => publishRunEvents(publisher, prefix, runId, events.map(([event, data]) => ({ event, data })));

describe('run event reader', () => {
  it('serves twenty runs followed at once over one connection, each its own events in order until its last', async () => {
    const events = reader();
    try {
      const runs = Array.from({ length: 20 }, (_, i) => `run_many_${i}`);
      const followed = runs.map((runId) => collect(events.follow(runId, '0', new AbortController().signal)));
      await new Promise((resolve) => setTimeout(resolve, 50));
      for (const [i, runId] of runs.entries()) await publish(runId, ['thread.run.in_progress', { i }], ['thread.message.delta', { i }]);
      for (const [i, runId] of runs.entries()) await publish(runId, ['thread.run.completed', { i }], ['thread.run.step.created', { after: true }]);
      const received = await Promise.all(followed);
      received.forEach((names, i) => expect(names).toEqual([`thread.run.in_progress:{"i":${i}}`, `thread.message.delta:{"i":${i}}`, `thread.run.completed:{"i":${i}}`]));
      expect(await readerConnections()).toBe(1);
    } finally {
      await events.close();
    }
  });

  it('reads at once for a follower that starts while the read is blocked on other runs', { timeout: 20_000 }, async () => {
    const events = reader();
    try {
      const waiting = new AbortController();
      const blocked = collect(events.follow('run_blocked', '0', waiting.signal));
      await new Promise((resolve) => setTimeout(resolve, 100));
      const late = collect(events.follow('run_late', '0', new AbortController().signal));
      await new Promise((resolve) => setTimeout(resolve, 20));
      await publish('run_late', ['thread.run.completed', { late: true }]);
      expect(await late).toEqual(['thread.run.completed:{"late":true}']);
      waiting.abort();
      expect(await blocked).toEqual([]);
    } finally {
      await events.close();
    }
  });

  it('reads again for followers that come after every earlier one has gone, on the same connection', async () => {
    // Reads of 50 ms: between rounds the read loop finds no one to read for and stops.
    const events = reader(50);
    try {
      for (const round of [1, 2, 3]) {
        const followed = collect(events.follow(`run_round_${round}`, '0', new AbortController().signal));
        await publish(`run_round_${round}`, ['thread.run.completed', round]);
        expect(await followed).toEqual([`thread.run.completed:${round}`]);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(await readerConnections()).toBe(1);
    } finally {
      await events.close();
    }
  });

  it('gives each follower of one run the events after its own cursor', async () => {
    const events = reader();
    try {
      await publish('run_cursor', ['thread.run.queued', 1], ['thread.run.in_progress', 2]);
      const [, second] = (await publisher.xrange(`${prefix}:run-events:run_cursor`, '-', '+')).map(([id]) => id);
      const fromStart = collect(events.follow('run_cursor', '0', new AbortController().signal));
      const fromSecond = collect(events.follow('run_cursor', second!, new AbortController().signal));
      await publish('run_cursor', ['thread.run.requires_action', 3]);
      expect(await fromStart).toEqual(['thread.run.queued:1', 'thread.run.in_progress:2', 'thread.run.requires_action:3']);
      expect(await fromSecond).toEqual(['thread.run.requires_action:3']);
    } finally {
      await events.close();
    }
  });

  it('stops a follower whose caller left, and ends the ones still waiting when it closes', async () => {
    const events = reader();
    const left = new AbortController();
    const leaving = collect(events.follow('run_left', '0', left.signal));
    const staying = collect(events.follow('run_staying', '0', new AbortController().signal)).then(
      () => 'ended quietly',
      (error: Error) => error.message,
    );
    await publish('run_left', ['thread.run.in_progress', 'a']);
    await new Promise((resolve) => setTimeout(resolve, 50));
    left.abort();
    expect(await leaving).toEqual(['thread.run.in_progress:"a"']);
    await events.close();
    expect(await staying).toBe('the run event reader closed');
    expect(await pollUntil(readerConnections, (open) => open === 0, { timeoutMs: 10_000 })).toBe(0);
  });
});
