import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationName } from './fuzz/operations.js';
import { runBaseline, runFuzz } from './fuzz/run.js';
import { startFuzzWorld, type FuzzWorld } from './fuzz/world.js';

/**
 * Issue 55's fuzz suite: every operation of both servers, read from GET /v1/openapi.json and the
 * hive's route table, sent valid but for one spoiled part (a field, a path segment, a query value,
 * a header, the body's bytes). A bounded pass runs in npm test; `npm run fuzz -- --cases N --seed S`
 * runs as many as asked (FUZZ_CASES, FUZZ_SEED, FUZZ_PATH to replay one case).
 */
const CASES = Number(process.env.FUZZ_CASES ?? 4_000);
const SEED = Number(process.env.FUZZ_SEED ?? 55);
const PATH = process.env.FUZZ_PATH;

let world: FuzzWorld;
beforeAll(async () => {
  world = await startFuzzWorld();
});
afterAll(() => world?.close());

describe('the fuzzer covers both servers', () => {
  it('knows every API route each server mounts, and has a value for every path parameter', () => {
    const known = new Set(world.operations.map(operationName));
    const missing = world.mountedApiRoutes().filter((route) => !known.has(operationName(route)));
    expect(missing.map(operationName)).toEqual([]);
    const unvalued = world.operations.flatMap((operation) => operation.pathParams.filter((name) => world.pathValue(operation, name) === undefined).map((name) => `${operationName(operation)} {${name}}`));
    expect(unvalued).toEqual([]);
  });
});

describe('no input reaches a 5xx', () => {
  it('answers every operation\'s unspoiled request below 500', async () => {
    const results = await runBaseline(world);
    const short = results.filter((result) => typeof result.status !== 'number' || result.status >= 300);
    console.log(`fuzz baseline: ${results.length - short.length} of ${results.length} operations succeed unspoiled; the rest stop at\n${short.map((result) => `  ${result.status} ${result.operation} ${result.answer}`).join('\n')}`);
    expect(results.filter((result) => result.reason).map((result) => `${result.operation}: ${result.reason}`)).toEqual([]);
  }, 10 * 60_000);

  it(`${CASES} spoiled requests (seed ${SEED}) answer below 500, 4xx in the server's envelope, nothing internal shown`, async () => {
    const started = performance.now();
    const report = await runFuzz(world, {
      cases: CASES,
      seed: SEED,
      ...(PATH && { path: PATH }),
      onProgress: (done) => {
        if (done % 5_000 === 0) console.log(`fuzz: ${done} of ${CASES} cases`);
      },
    });
    const deepest = Object.entries(report.succeeded).sort((a, b) => b[1] - a[1]);
    console.log(
      [
        `fuzz: ${report.cases} cases, seed ${report.seed}; statuses ${JSON.stringify(report.statuses)}`,
        `fuzz: ${deepest.length} of ${world.operations.length} operations answered a success at least once`,
        ...report.failures.map((failure) => `fuzz FAILURE ${failure.signature}\n  ${failure.reason}\n  replay: FUZZ_SEED=${report.seed} FUZZ_PATH=${failure.path}\n  smallest: ${failure.smallest}`),
        report.repeats ? `fuzz: ${report.repeats} more failing cases of the same classes` : '',
        ...report.uncaught.map((error) => `fuzz UNCAUGHT in a server: ${error}`),
      ].filter(Boolean).join('\n'),
    );
    if (process.env.FUZZ_REPORT_FILE) writeFileSync(process.env.FUZZ_REPORT_FILE, JSON.stringify({ ...report, seconds: (performance.now() - started) / 1000, operations: world.operations.length }));
    expect(report.failures.map((failure) => `${failure.signature}: ${failure.reason}`)).toEqual([]);
    expect(report.uncaught).toEqual([]);
    expect(report.cases).toBe(PATH ? report.cases : CASES);
    expect(await world.healthy()).toEqual({ gateway: 200, hive: 200 });
  }, 60 * 60_000);
});
