import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');

export interface AdminResult {
  code: number;
  /** stdout's JSON on success, the `{"error":…}` line of stderr on failure. */
  json: any;
  stdout: string;
  stderr: string;
}

/** Runs `npm run admin -- <args>` as an operator would, against the given database. */
export function runAdmin(databaseUrl: string, ...args: string[]): Promise<AdminResult> {
  return runAdminWith({ DATABASE_URL: databaseUrl }, ...args);
}

/** As runAdmin, with the operator's environment set as given (DATABASE_URL among it). */
export async function runAdminWith(env: { DATABASE_URL: string } & Record<string, string>, ...args: string[]): Promise<AdminResult> {
  try {
    const { stdout, stderr } = await run('npm', ['run', '--silent', 'admin', '--', ...args], { cwd: ROOT, env: { ...process.env, ...env } });
    return { code: 0, json: JSON.parse(stdout), stdout, stderr };
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string };
    const errorLine = failure.stderr.split('\n').find((line) => line.startsWith('{"error"'));
    return { code: failure.code, json: errorLine ? JSON.parse(errorLine) : null, stdout: failure.stdout, stderr: failure.stderr };
  }
}
