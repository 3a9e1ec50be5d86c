import { awaitWork, FAULTS, runFault } from '../test/faults/scenario.js';
import { ChatTrickle } from '../test/faults/trickle.js';
import { startFaultWorld } from '../test/faults/world.js';
import { goal, table } from './support/report.js';

/**
 * Faults survived, measured: the fault suite's scenario (test/faults/scenario.ts) on its own
 * PostgreSQL, Redis and Temporal with the platform as `npm start` runs it, ten chat calls a second
 * and the suite's five kinds of work started before each fault. For each fault: what callers got,
 * how soon after the dependency's (or child's) return calls succeeded again, and whether the work in
 * flight finished exactly once.
 */
export async function runFaultBench(): Promise<void> {
  const world = await startFaultWorld();
  try {
    const caller = await world.newDeveloper();
    const context = { gatewayUrl: world.gatewayUrl, hiveUrl: world.hiveUrl, db: world.db, developer: await world.newDeveloper() };
    const trickle = new ChatTrickle(world.gatewayUrl, caller.key);
    trickle.start();
    const rows = [];
    let slowestRefusalMs = 0;
    let slowestRecoveryMs = 0;
    let lost = 0;
    for (const fault of FAULTS) {
      console.log(`fault: ${fault.name}`);
      const outcome = await runFault(world, trickle, context, fault);
      let work = 'finished, each exactly once';
      try {
        await awaitWork(outcome.work);
        for (const piece of outcome.work) await piece.verifyExactlyOnce();
      } catch (error) {
        lost += 1;
        work = `NOT: ${(error as Error).message.split('\n')[0]!.slice(0, 200)}`;
      }
      slowestRefusalMs = Math.max(slowestRefusalMs, outcome.slowestRefusalMs);
      if (!fault.refusesConnections) slowestRecoveryMs = Math.max(slowestRecoveryMs, outcome.fullSuccessMs ?? Infinity);
      rows.push({
        fault: fault.name,
        'away (s)': (outcome.awayMs / 1_000).toFixed(1),
        calls: outcome.calls,
        'answered 200': outcome.succeeded,
        '503 + Retry-After': outcome.unavailable,
        'connection refused': outcome.refused,
        'anything else': outcome.wrong.length,
        'slowest 503 (ms)': outcome.slowestRefusalMs,
        'first success after return (s)': outcome.firstSuccessMs === null ? 'none' : (outcome.firstSuccessMs / 1_000).toFixed(2),
        'all succeeding after return (s)': outcome.fullSuccessMs === null ? 'never' : (outcome.fullSuccessMs / 1_000).toFixed(2),
        'work in flight (5 kinds)': work,
      });
    }
    await trickle.stop();
    table('faults', 'each fault in turn, ten chat calls a second throughout; the return is the dependency answering again (a killed child: the new process polling or listening)', rows);
    goal('faults', { figure: 'slowest 503 during an outage', target: 'about 2 s', value: `${slowestRefusalMs} ms`, met: slowestRefusalMs <= 2_000 });
    goal('faults', { figure: 'all calls succeeding after a dependency returns', target: '≤ 5 s', value: `${(slowestRecoveryMs / 1_000).toFixed(2)} s`, met: slowestRecoveryMs <= 5_000 });
    goal('faults', { figure: 'work lost or done twice', target: 'nothing', value: lost === 0 ? 'nothing' : `${lost} fault(s)`, met: lost === 0 });
  } finally {
    await world.close();
  }
}
