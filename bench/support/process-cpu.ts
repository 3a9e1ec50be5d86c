import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's CPU times (USER_HZ): 100 on every common Linux build. */
const USER_HZ = 100;

/**
 * CPU time (user and system) a process has used so far, in seconds, with that of its children that
 * have ended unless `reapedChildren` is false; undefined off Linux or once it is gone.
 */
export function processCpuSeconds(pid: number | undefined, reapedChildren = true): number | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields after the parenthesised command name, which may itself hold spaces: utime and stime
    // are the 12th and 13th, cutime and cstime (children waited for) the 14th and 15th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
    return (fields[11]! + fields[12]! + (reapedChildren ? fields[13]! + fields[14]! : 0)) / USER_HZ;
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds used so far by every process whose command name is `command` (`postgres`: the
 * server and its backends). A backend that ends during a run takes its time out of the live
 * processes' sum but adds it to the postmaster's reaped children, so the total never goes back.
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

/**
 * The machine's CPU ticks so far (/proc/stat): all of them, those busy, and those stolen by the
 * hypervisor for other guests ("steal": on a shared 2-core machine from 1 % to a third of all CPU
 * time between runs of one commit, so latency figures are printed beside it); undefined off Linux.
 */
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

/**
 * The CPU seconds used between start and stop by each named process (its own, not its children's)
 * and each named command (`postgres`: the server and its backends), and how busy the machine was
 * meanwhile (0 to 1).
 */
export function startCpuMeter(processes: Record<string, number | undefined>, commands: string[] = ['postgres']): { stop(): { seconds: Record<string, number>; busy: number | undefined } } {
  const read = () => ({
    ...Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, processCpuSeconds(pid, false) ?? 0])),
    ...Object.fromEntries(commands.map((command) => [command, commandCpuSeconds(command) ?? 0])),
  });
  const before = read();
  const machineBefore = machineCpuTicks();
  return {
    stop() {
      const after = read();
      const machineAfter = machineCpuTicks();
      return {
        seconds: Object.fromEntries(Object.entries(after).map(([name, seconds]) => [name, seconds - before[name]!])),
        busy: machineBefore && machineAfter ? (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total) : undefined,
      };
    },
  };
}
