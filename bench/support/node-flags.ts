import { API_NODE_ARGS } from '../../scripts/lib/node-args.js';

/** Node flags from an environment variable holding them space-separated; undefined when it is unset. */
export function flagsFrom(value: string | undefined): string[] | undefined {
  return value?.split(' ').filter(Boolean);
}

/** Under BENCH_PROFILE=1, the flags that write a process's CPU profile to `directory`. */
export function profileFlags(directory: string): string[] {
  return process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${directory}`] : [];
}

/**
 * The flags a bench starts the API with: the ones `npm start` gives it, a CPU profile in /tmp/prof
 * under BENCH_PROFILE=1, then BENCH_NODE_FLAGS (say --trace-gc-nvp; the last of a flag wins).
 */
export function benchApiNodeArgs(): string[] {
  return [...API_NODE_ARGS, ...profileFlags('/tmp/prof'), ...(flagsFrom(process.env.BENCH_NODE_FLAGS) ?? [])];
}
