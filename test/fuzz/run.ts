import fc from 'fast-check';
import { caseArbitrary, describeMutation, type FuzzCase } from './mutations.js';
import { baseParts, operationName, type Operation } from './operations.js';
import { encodeRequest, send, type WireResponse } from './wire.js';
import type { FuzzWorld } from './world.js';

/**
 * A fuzz run: `cases` requests, each a valid request of one operation with one part spoiled, drawn
 * from `seed`. Every answer must be below 500, a 4xx must be the server's error envelope, and no
 * answer may carry a stack, SQL or a driver's words. The run goes on past a failure to find every
 * class of them; the first case of each class is then replayed and shrunk to its smallest form.
 */
export interface FuzzReport {
  seed: number;
  cases: number;
  statuses: Record<string, number>;
  /** Cases that reached a handler's success, per operation: how deep the base requests get. */
  succeeded: Record<string, number>;
  failures: FuzzFailure[];
  /** Failures beyond the first of their class. */
  repeats: number;
  /** Errors nothing caught in this process, where both servers run: each would have ended a server. */
  uncaught: string[];
}

export interface FuzzFailure {
  /** The operation and the class of spoiling: one line per bug, whatever the exact value. */
  signature: string;
  reason: string;
  /** `FUZZ_SEED=<seed> FUZZ_PATH=<path>` replays this case alone. */
  path: string;
  /** The shrunk case, as sent. */
  smallest: string;
}

const CASE_TIMEOUT_MS = 30_000;
/** How long each class's shrinking may take: a case that fails slowly must not hold the run. */
const SHRINK_TIME_LIMIT_MS = 60_000;
const HEAL_EVERY = 100;
/** What an answer must never show a caller: a stack frame, SQL, a driver's or the runtime's words. */
const LEAK = /\bat [\w.<>]+ \(|node_modules|\bSELECT\b.*\bFROM\b|\bINSERT INTO\b|\bSQLSTATE\b|violates .* constraint|invalid input syntax|invalid byte sequence|ECONNREFUSED|TypeError:|ReferenceError:|Cannot read propert/;

export async function runFuzz(world: FuzzWorld, options: { cases: number; seed: number; path?: string; onProgress?: (done: number) => void }): Promise<FuzzReport> {
  const statuses: Record<string, number> = {};
  const succeeded: Record<string, number> = {};
  const firstOfClass = new Map<string, { reason: string; run: number }>();
  let repeats = 0;
  let run = 0;
  const uncaught: string[] = [];
  const onUncaught = (error: unknown) => uncaught.push(`after case ${run}: ${error instanceof Error ? `${error.name}: ${error.message}\n${error.stack?.split('\n').slice(1, 4).join('\n')}` : String(error)}`);
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);

  async function attempt(fuzzCase: FuzzCase) {
    const operation = world.operations[fuzzCase.operationIndex]!;
    const pathValues = Object.fromEntries(operation.pathParams.map((name) => [name, world.pathValue(operation, name) ?? 'missing']));
    const base = baseParts(operation, pathValues, world.fieldValue, fuzzCase.variant);
    const request = encodeRequest(operation, base, await world.credentialFor(operation), fuzzCase.mutation);
    const response = await send(world.baseUrlOf(operation), request, CASE_TIMEOUT_MS);
    return { operation, request, response, reason: judge(operation, response) };
  }

  const arbitrary = caseArbitrary(world.operations);
  let outcome: fc.RunDetails<[FuzzCase]>;
  try {
    outcome = await fc.check(
      fc.asyncProperty(arbitrary, async (fuzzCase) => {
        const index = run++;
        if (index % HEAL_EVERY === 0) await world.heal();
        const { operation, response, reason } = await attempt(fuzzCase);
        const status = response.kind === 'answered' ? String(response.status) : response.kind;
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (response.kind === 'answered' && response.status < 300) succeeded[operationName(operation)] = (succeeded[operationName(operation)] ?? 0) + 1;
        if (reason) {
          const signature = `${operationName(operation)} — ${describeMutation(fuzzCase.mutation)}`;
          if (firstOfClass.has(signature)) repeats += 1;
          else firstOfClass.set(signature, { reason, run: index });
        }
        options.onProgress?.(index + 1);
        return true;
      }),
      { seed: options.seed, numRuns: options.cases, ...(options.path && { path: options.path }), endOnFailure: true },
    );
  } finally {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
  }

  // The property only ever answers true: a stop before `cases` is the fuzzer's own fault (a request it could not build).
  if (outcome.failed) throw new Error(`the fuzzer broke at case ${run} (FUZZ_SEED=${options.seed} FUZZ_PATH=${outcome.counterexamplePath}): ${String(outcome.errorInstance)}`);

  const failures: FuzzFailure[] = [];
  for (const [signature, { reason, run: index }] of firstOfClass) {
    const path = options.path ? `${options.path}` : String(index);
    failures.push({ signature, reason, path, smallest: await shrink(arbitrary, options.seed, path, attempt) });
  }
  return { seed: options.seed, cases: run, statuses, succeeded, failures, repeats, uncaught };
}

/**
 * Every operation's request as the fuzzer builds it before spoiling it, once: whether each reaches
 * its handler's success (or where it stops instead) says how deep the spoiled cases go.
 */
export async function runBaseline(world: FuzzWorld): Promise<Array<{ operation: string; status: number | string; reason?: string; answer: string }>> {
  const results = [];
  for (const operation of world.operations) {
    const pathValues = Object.fromEntries(operation.pathParams.map((name) => [name, world.pathValue(operation, name) ?? 'missing']));
    const request = encodeRequest(operation, baseParts(operation, pathValues, world.fieldValue, 0), await world.credentialFor(operation));
    const response = await send(world.baseUrlOf(operation), request, CASE_TIMEOUT_MS);
    const answer = response.kind === 'answered' ? response.body.toString('utf8').slice(0, 160) : '';
    results.push({ operation: operationName(operation), status: response.kind === 'answered' ? response.status : response.kind, reason: judge(operation, response), answer });
  }
  return results;
}

/** Replays the case at `path` and lets fast-check make it smaller while it still fails; the request it ends on, as text. */
async function shrink(arbitrary: fc.Arbitrary<FuzzCase>, seed: number, path: string, attempt: (fuzzCase: FuzzCase) => Promise<{ request: { method: string; target: string }; reason?: string }>): Promise<string> {
  let smallest = '(it passed when replayed)';
  await fc.check(
    fc.asyncProperty(arbitrary, async (fuzzCase) => {
      const { request, reason } = await attempt(fuzzCase);
      if (reason) smallest = `${request.method.toUpperCase()} ${request.target.slice(0, 200)} — ${describeMutation(fuzzCase.mutation)}: ${reason}`;
      return reason === undefined;
    }),
    { seed, path, numRuns: 1, interruptAfterTimeLimit: SHRINK_TIME_LIMIT_MS },
  );
  return smallest;
}

/** Why an answer is a defect, or undefined when it is a fair answer to what was sent. */
export function judge(operation: Operation, response: WireResponse): string | undefined {
  if (response.kind === 'timeout') return `no answer within ${CASE_TIMEOUT_MS / 1000} s`;
  if (response.kind === 'closed') return `the connection closed without an answer${response.error ? ` (${response.error})` : ''}`;
  const text = response.body.toString('utf8');
  if (response.status >= 500) return `${response.status}: ${text.slice(0, 300)}`;
  // A success returns what was stored, which may be anything (a delivery's last error, a memory quoting SQL).
  if (response.status < 400) return undefined;
  if (LEAK.test(text)) return `the answer shows internals: ${text.slice(0, 300)}`;
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    return `${response.status} without a JSON error body: ${text.slice(0, 120)}`;
  }
  const envelope = operation.server === 'hive'
    ? typeof body?.error === 'string' && body.error.length > 0
    : ['type', 'code', 'message'].every((field) => typeof body?.error?.[field] === 'string' && body.error[field].length > 0);
  return envelope ? undefined : `${response.status} outside the ${operation.server}'s error envelope: ${text.slice(0, 200)}`;
}
