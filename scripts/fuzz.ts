import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { section, SECTION_ORDER, table, writeReport } from '../bench/support/report.js';

/**
 * `npm run fuzz -- --cases N --seed S [--path P]`: the fuzz suite (test/fuzz.test.ts) alone, on a
 * platform of its own, with as many cases as asked. It prints the cases, the statuses they got and
 * each class of failure with the seed and path that replay it, records the run in bench/README.md
 * (the fuzz section, replaced each run), and exits non-zero on any failure.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    cases: { type: 'string', default: '10000' },
    seed: { type: 'string', default: String(Date.now() % 2 ** 31) },
    path: { type: 'string' },
  },
});
for (const [name, value] of Object.entries({ cases: values.cases, seed: values.seed })) {
  if (!/^\d+$/.test(value)) {
    process.stderr.write(`fuzz: --${name} must be a whole number, not ${value}\n`);
    process.exit(2);
  }
}
const reportFile = path.join(ROOT, '.data', 'run', 'fuzz-report.json');
rmSync(reportFile, { force: true });
process.stderr.write(`fuzz: ${values.cases} cases, seed ${values.seed}${values.path ? `, replaying path ${values.path}` : ''}\n`);
const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/platform.ts', 'test', 'test/fuzz.test.ts'], {
  cwd: ROOT,
  stdio: 'inherit',
  env: { ...process.env, FUZZ_CASES: values.cases, FUZZ_SEED: values.seed, FUZZ_REPORT_FILE: reportFile, ...(values.path && { FUZZ_PATH: values.path }) },
});
const code = await new Promise<number>((resolve) => child.once('exit', (exitCode) => resolve(exitCode ?? 1)));

// A replay of one case is not a run worth recording.
if (existsSync(reportFile) && !values.path) {
  const report = JSON.parse(readFileSync(reportFile, 'utf8')) as {
    cases: number; seed: number; seconds: number; operations: number; statuses: Record<string, number>; succeeded: Record<string, number>; failures: Array<{ signature: string }>; repeats: number; uncaught: string[];
  };
  const command = `npm run fuzz -- --cases ${values.cases} --seed ${values.seed}`;
  section('fuzz', 'Fuzz suite, long run', 'Every operation of both servers (GET /v1/openapi.json and the hive\'s route table), each case a valid request with one part spoiled; every answer must be below 500, in the server\'s envelope, showing nothing internal. Platform, worker and fuzzer share the machine.', command);
  table('fuzz', 'fuzz run', [
    { figure: 'cases', value: report.cases },
    { figure: 'seed', value: report.seed },
    { figure: 'operations', value: report.operations },
    { figure: 'operations answering a success at least once', value: Object.keys(report.succeeded).length },
    { figure: 'answers of 500 or more, timeouts, closed without an answer', value: Object.entries(report.statuses).filter(([status]) => !/^[1-4]\d\d$/.test(status)).reduce((sum, [, count]) => sum + count, 0) },
    { figure: 'failure classes', value: report.failures.length },
    { figure: 'uncaught exceptions in the servers', value: report.uncaught.length },
    { figure: 'seconds', value: Math.round(report.seconds) },
    { figure: 'cases per second', value: Math.round(report.cases / report.seconds) },
    { figure: 'statuses', value: Object.entries(report.statuses).map(([status, count]) => `${status}: ${count}`).join(', ') },
  ]);
  writeReport(path.join(ROOT, 'bench', 'README.md'), SECTION_ORDER);
}
process.exit(code);
