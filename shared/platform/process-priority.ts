import { readdirSync } from 'node:fs';
import os from 'node:os';

/**
 * Lowers the CPU priority of every thread of this process (Linux gives each thread its own
 * niceness, and threads started later take their starter's): the worker's background work yields
 * the CPU to the API's requests on a host the two share. Elsewhere the process's own priority.
 */
export function lowerProcessPriority(niceness: number): void {
  let threads: number[];
  try {
    threads = readdirSync('/proc/self/task').map(Number);
  } catch {
    threads = [process.pid];
  }
  for (const thread of threads) os.setPriority(thread, niceness);
}
