import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's CPU times (USER_HZ): 100 on every common Linux build. */
const USER_HZ = 100;

/**
 * CPU time (user and system) a process has used so far, in seconds, with that of its children that
 * have ended; undefined off Linux or once it is gone. (bench/support/load.ts keeps the same reading
 * privately, in milliseconds.)
 */
export function processCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields after the parenthesised command name, which may itself hold spaces: utime, stime,
    // cutime and cstime are the 12th to 15th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
    return (fields[11]! + fields[12]! + fields[13]! + fields[14]!) / USER_HZ;
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds used so far by every process whose command name is `command` (`postgres`: the
 * server and its backends; a backend that ended is counted in the postmaster's children).
 */
export function commandCpuSeconds(command: string): number | undefined {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry));
  } catch {
    return undefined;
  }
  let total = 0;
  for (const pid of pids) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === command) total += processCpuSeconds(Number(pid)) ?? 0;
    } catch {
      // the process ended meanwhile
    }
  }
  return total;
}

/** The machine's CPU ticks so far (/proc/stat): all of them, those busy, and those stolen by the hypervisor; undefined off Linux. */
export function machineCpuTicks(): { total: number; busy: number; steal: number } | undefined {
  try {
    // user nice system idle iowait irq softirq steal
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = fields.reduce((sum, value) => sum + value, 0);
    return { total, busy: total - fields[3]! - fields[4]! - fields[7]!, steal: fields[7]! };
  } catch {
    return undefined;
  }
}
