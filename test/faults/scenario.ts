import { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { FAULT_WORKLOAD, type InFlightWork, type StartedWork, type WorkContext } from './work.js';
import { ChatTrickle, type CallRecord } from './trickle.js';
import type { Developer, FaultWorld } from './world.js';

/**
 * The faults, one after another, each with fresh work in flight and the chat trickle running:
 * what callers got while the fault lasted, how long the platform took to serve again after the
 * dependency's (or the child's) return, and the work it was doing, to be checked done exactly once.
 * The fault suite asserts on these outcomes; `npm run bench` (bench/faults.ts) records them.
 */
export interface Fault {
  name: string;
  /** Whether callers may find the port closed meanwhile (the one API replica restarting). */
  refusesConnections?: boolean;
  /** Causes the fault and resolves at once. */
  cause(world: FaultWorld): Promise<void>;
  /** Ends it and resolves once the dependency or child is back (its own readiness, not the platform's). */
  restore(world: FaultWorld): Promise<void>;
}

/** How long a stopped service stays away: long enough for every request path to meet it. */
const DOWN_MS = 8_000;

export const FAULTS: Fault[] = [
  {
    name: 'PostgreSQL stopped for 8 s, then started',
    cause: (world) => world.postgres.stop(),
    restore: async (world) => {
      await sleep(DOWN_MS);
      await world.postgres.start();
    },
  },
  {
    name: 'Redis stopped for 8 s, then started empty',
    cause: (world) => world.redis.stop(),
    restore: async (world) => {
      await sleep(DOWN_MS);
      await world.redis.start();
    },
  },
  {
    name: 'Temporal server restarted',
    cause: (world) => world.temporal.stop(),
    restore: (world) => world.temporal.start(),
  },
  {
    name: 'worker killed with SIGKILL',
    cause: async (world) => killChild(world, 'workers/main.ts'),
    // Temporal lists a dead worker's pollers for a while after it died: wait for the new process's own.
    restore: (world) => waitFor(async () => pollersOf(world).then((pids) => pids.includes(world.childPid('workers/main.ts') ?? -1)), 180_000, 'a new worker to poll'),
  },
  {
    name: 'API killed with SIGKILL',
    refusesConnections: true,
    cause: async (world) => killChild(world, 'api/main.ts'),
    restore: (world) => waitFor(async () => (await fetch(`${world.gatewayUrl}/v1/health/live`).then((response) => response.ok, () => false)), 60_000, 'the API to answer again'),
  },
];

export interface FaultOutcome {
  fault: string;
  /** From the fault to the dependency's or child's return. */
  awayMs: number;
  calls: number;
  succeeded: number;
  /** 503 answers with the envelope and Retry-After. */
  unavailable: number;
  /** Connections refused or reset (only while the one API replica restarts). */
  refused: number;
  /** Anything else: a 500, a 503 without its envelope or Retry-After, a hang, a refused connection where none may be. */
  wrong: CallRecord[];
  slowestRefusalMs: number;
  slowestAnswerMs: number;
  /** From the return to the first successful answer, and to the start of an unbroken run of successes. */
  firstSuccessMs: number | null;
  fullSuccessMs: number | null;
  work: StartedWork[];
}

/** Settles after each fault: the calls of this long after the return show whether all succeed again. */
const SETTLE_MS = 10_000;
/** How long after the first submission the fault lands. */
const START_LEAD_MS = 1_500;

export async function runFault(world: FaultWorld, trickle: ChatTrickle, context: WorkContext, fault: Fault, workload: InFlightWork[] = FAULT_WORKLOAD): Promise<FaultOutcome> {
  // The fault lands while the work is being submitted and run: a submission that meets it is
  // refused with a 503 and sent again (each start retries those), so work crosses the fault both
  // ways. Only a cut-off connection cannot be retried safely, so the API is killed once all was accepted.
  const starting = Promise.all(workload.map((kind) => kind.start(context)));
  starting.catch(() => undefined); // awaited below; a failure must not count as unhandled meanwhile
  if (fault.refusesConnections) await starting;
  else await sleep(START_LEAD_MS);
  const faultAt = Date.now();
  await fault.cause(world);
  await fault.restore(world);
  const returnAt = Date.now();
  const work: StartedWork[] = await starting;
  await sleep(Math.max(0, returnAt + SETTLE_MS - Date.now()));

  const calls = trickle.between(faultAt);
  const isUnavailable = (call: CallRecord) => call.status === 503 && call.code === 'service_unavailable' && Boolean(call.retryAfter);
  const isRefused = (call: CallRecord) => call.status === 0 && Boolean(fault.refusesConnections);
  const answeredAt = (call: CallRecord) => call.at + call.ms;
  const afterReturn = calls.filter((call) => answeredAt(call) >= returnAt);
  const lastFailure = afterReturn.filter((call) => call.status !== 200).at(-1);
  const firstSuccess = afterReturn.find((call) => call.status === 200);
  const fullSuccess = lastFailure ? afterReturn.find((call) => call.status === 200 && call.at > lastFailure.at) : firstSuccess;
  const refusals = calls.filter(isUnavailable);
  return {
    fault: fault.name,
    awayMs: returnAt - faultAt,
    calls: calls.length,
    succeeded: calls.filter((call) => call.status === 200).length,
    unavailable: refusals.length,
    refused: calls.filter(isRefused).length,
    wrong: calls.filter((call) => call.status !== 200 && !isUnavailable(call) && !isRefused(call)),
    slowestRefusalMs: Math.max(0, ...refusals.map((call) => call.ms)),
    slowestAnswerMs: Math.max(0, ...calls.map((call) => call.ms)),
    firstSuccessMs: firstSuccess ? answeredAt(firstSuccess) - returnAt : null,
    fullSuccessMs: fullSuccess ? Math.max(0, answeredAt(fullSuccess) - returnAt) : null,
    work,
  };
}

/** Waits until every piece of work has finished (or throws with the one that failed). */
export async function awaitWork(work: StartedWork[], timeoutMs = 240_000): Promise<void> {
  const waiting = new Set(work);
  await waitFor(
    async () => {
      for (const piece of [...waiting]) if (await piece.finished()) waiting.delete(piece);
      return waiting.size === 0;
    },
    timeoutMs,
    () => `work to finish: ${[...waiting].map((piece) => piece.describe()).join('; ')}`,
  );
}

/** What the trickle's developer was charged, beside what its successful calls recorded. */
export async function chargesOf(world: FaultWorld, developer: Developer, creditMicros: number) {
  const { rows } = await world.db.query<{ balance: string; usage_rows: number; usage_cost: string; request_ids: string[]; open_holds: number }>(
    `SELECT (SELECT balance_micros::text FROM wallets WHERE account_id = $1) AS balance,
            (SELECT count(*)::int FROM usage_records WHERE developer_id = $1) AS usage_rows,
            (SELECT coalesce(sum(cost_micros), 0)::text FROM usage_records WHERE developer_id = $1) AS usage_cost,
            (SELECT coalesce(array_agg(request_id), '{}') FROM usage_records WHERE developer_id = $1) AS request_ids,
            (SELECT count(*)::int FROM billing_holds WHERE developer_id = $1 AND status = 'held') AS open_holds`,
    [developer.accountId],
  );
  const row = rows[0]!;
  return { spentMicros: creditMicros - Number(row.balance), usageRows: row.usage_rows, usageCostMicros: Number(row.usage_cost), requestIds: row.request_ids, openHolds: row.open_holds };
}

async function killChild(world: FaultWorld, script: string): Promise<void> {
  const pid = world.childPid(script);
  if (!pid) throw new Error(`no ${script} child of the start command is running:\n${world.output().slice(-20).join('\n')}`);
  process.kill(pid, 'SIGKILL');
  await waitFor(async () => world.childPid(script) !== pid || !isAlive(pid), 10_000, `${script} (${pid}) to die`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The process ids of the workers polling the platform's workflow task queue (the SDK's identity is pid@host). */
async function pollersOf(world: FaultWorld): Promise<number[]> {
  const connection = await Connection.connect({ address: world.temporal.address, connectTimeout: 2_000 });
  try {
    const response = await connection.workflowService.describeTaskQueue({
      namespace: 'default',
      taskQueue: { name: world.taskQueue, kind: TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    });
    return (response.pollers ?? []).map((poller) => Number(poller.identity?.split('@')[0]));
  } finally {
    await connection.close();
  }
}

export async function waitFor(condition: () => Promise<boolean>, timeoutMs: number, what: string | (() => string)): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${typeof what === 'string' ? what : what()}`);
    await sleep(250);
  }
}

const { TaskQueueKind, TaskQueueType } = proto.temporal.api.enums.v1;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
