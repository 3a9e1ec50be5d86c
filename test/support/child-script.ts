import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Runs an ES module script (TypeScript imports allowed, paths from the project root) in a node
 * process of its own and returns the JSON of its last line of output: for what is the process's
 * own (a priority, a key made once per process), which test files sharing a worker process share.
 */
export async function lastJsonOfChildScript<T>(script: string): Promise<T> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: process.cwd() });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as T;
}
