import type { ChildProcess } from 'node:child_process';
import { stopChild } from './local-services.js';

/**
 * Keeps one child of `npm start` running: a child that exits unless asked to is started again
 * after a backoff (0.5 s doubling to 30 s, back to 0.5 s once a run has lasted a minute), with one
 * line naming how it ended. Five exits within a minute is a crash loop: said loudly, with what to
 * check, and still retried at the cap, while the other children keep serving. A start that fails
 * (the process would not come up) counts as an exit. Small enough to read whole; a supervision
 * framework (pm2, systemd units) would own the processes this command must also stop in order.
 */
export interface RestartPolicy {
  firstDelayMs: number;
  maxDelayMs: number;
  /** A run this long resets the backoff. */
  healthyAfterMs: number;
  crashLoop: { exits: number; withinMs: number };
}

export const RESTART_POLICY: RestartPolicy = { firstDelayMs: 500, maxDelayMs: 30_000, healthyAfterMs: 60_000, crashLoop: { exits: 5, withinMs: 60_000 } };

/** The wait before the restart that follows `consecutive` earlier quick exits (0 for the first). */
export function restartDelay(consecutive: number, policy: RestartPolicy = RESTART_POLICY): number {
  return Math.min(policy.maxDelayMs, policy.firstDelayMs * 2 ** Math.min(consecutive, 30));
}

export interface SupervisedOptions {
  /** What to check when the child crash-loops, beside its own output. */
  hint?: string;
  policy?: RestartPolicy;
  /** Called with each process the child runs as (the first and every restart). */
  onStart?: (child: ChildProcess) => void;
}

export class Supervised {
  restarts = 0;
  private child: ChildProcess | undefined;
  private consecutive = 0;
  private recentExits: number[] = [];
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private readonly policy: RestartPolicy;

  constructor(
    readonly name: string,
    private readonly start: () => Promise<ChildProcess>,
    private readonly say: (line: string) => void,
    private readonly options: SupervisedOptions = {},
  ) {
    this.policy = options.policy ?? RESTART_POLICY;
  }

  /** The running process, if any. */
  get current(): ChildProcess | undefined {
    return this.child;
  }

  /** Starts the child; false when this first start failed (a restart is then scheduled, and the cause said). */
  async run(): Promise<boolean> {
    if (this.stopping) return false;
    let child: ChildProcess;
    try {
      child = await this.start();
    } catch (error) {
      this.ended(`could not start: ${error instanceof Error ? error.message : String(error)}`);
      return false;
    }
    if (this.stopping) {
      await stopChild(child);
      return false;
    }
    this.child = child;
    this.options.onStart?.(child);
    const startedAt = Date.now();
    child.once('exit', (code, signal) => {
      this.child = undefined;
      if (this.stopping) return;
      if (Date.now() - startedAt >= this.policy.healthyAfterMs) this.consecutive = 0;
      this.ended(`exited (${signal ?? `code ${code}`})`);
    });
    return true;
  }

  /** Stops the child and every restart to come. */
  async stop(graceMs?: number): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    if (this.child) await stopChild(this.child, graceMs);
  }

  private ended(how: string): void {
    const now = Date.now();
    this.recentExits = [...this.recentExits.filter((at) => now - at < this.policy.crashLoop.withinMs), now];
    const delay = restartDelay(this.consecutive, this.policy);
    this.consecutive += 1;
    this.restarts += 1;
    const looping = this.recentExits.length >= this.policy.crashLoop.exits;
    const loud = looping ? ` CRASH LOOP: ${this.recentExits.length} exits within ${this.policy.crashLoop.withinMs / 1000} s; the rest keeps serving.${this.options.hint ? ` ${this.options.hint}` : ''}` : '';
    this.say(`${this.name} ${how}; restarting in ${delay / 1000} s (restart ${this.restarts}).${loud}`);
    this.timer = setTimeout(() => void this.run(), delay);
  }
}
