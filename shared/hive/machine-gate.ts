import type { Db } from '../db/pool.js';
import { listenTo, type Listener } from '../db/listener.js';
import type { Logger } from '../logger.js';
import { machineByCertificate, touchMachine } from './machine-repository.js';

/**
 * What the relay asks of every request: may the machine holding this certificate (already checked
 * to be signed by the hive's CA and in its validity dates by TLS) pass? Answers come from
 * PostgreSQL and are kept in a bounded cache (at most `maxEntries`, each for `ttlMs`) so a busy
 * machine costs no query a request. Revocations are pushed: migration 028 announces each one on
 * channel hive_machine_revoked at commit, and the entries of that machine go at once. A missed
 * announcement (the listening connection was down) is covered twice: the cache is emptied each
 * time listening stops or restarts, and no entry outlives its TTL (under a minute, the spec's bound).
 */
export const MACHINE_REVOKED_CHANNEL = 'hive_machine_revoked';

export type GateAnswer = { pass: true; machineId: string } | { pass: false; machineId: string | null; reason: string };

interface Entry {
  answer: GateAnswer;
  cachedAt: number;
}

export interface MachineGateOptions {
  ttlMs: number;
  maxEntries: number;
}

export class MachineGate {
  private readonly entries = new Map<string, Entry>();
  private readonly listener: Listener;
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly db: Db,
    databaseUrl: string,
    private readonly logger: Logger,
    private readonly options: MachineGateOptions,
  ) {
    this.listener = listenTo(databaseUrl, MACHINE_REVOKED_CHANNEL, logger, {
      notification: (machineId) => this.forgetMachine(machineId),
      connected: () => this.entries.clear(),
      lost: () => this.entries.clear(),
    });
  }

  /** The answer for a client certificate's serial (lowercase hex). */
  async admit(serial: string, now = Date.now()): Promise<GateAnswer> {
    const cached = this.entries.get(serial);
    if (cached && now - cached.cachedAt < this.options.ttlMs) return this.noteSeen(cached.answer, now);
    this.entries.delete(serial);
    const row = await machineByCertificate(this.db, serial);
    const answer: GateAnswer = !row
      ? { pass: false, machineId: null, reason: 'This certificate belongs to no machine of the hive.' }
      : row.revoked_at
        ? { pass: false, machineId: row.machine_id, reason: `Machine ${row.name} is revoked.` }
        : !row.active
          ? { pass: false, machineId: row.machine_id, reason: `Machine ${row.name} has expired.` }
          : { pass: true, machineId: row.machine_id };
    // Map order is insertion order: when full, the oldest entry goes.
    if (this.entries.size >= this.options.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(serial, { answer, cachedAt: now });
    return this.noteSeen(answer, now);
  }

  async close(): Promise<void> {
    await this.listener.close();
  }

  private forgetMachine(machineId: string | undefined): void {
    for (const [serial, entry] of this.entries) if (entry.answer.machineId === machineId) this.entries.delete(serial);
  }

  /** Records last_seen_at at most once a minute a machine, off the request's path. */
  private noteSeen(answer: GateAnswer, now: number): GateAnswer {
    if (answer.pass && now - (this.seen.get(answer.machineId) ?? 0) > 60_000) {
      if (this.seen.size >= this.options.maxEntries) this.seen.delete(this.seen.keys().next().value!);
      this.seen.set(answer.machineId, now);
      touchMachine(this.db, answer.machineId).catch((error: unknown) => this.logger.warn({ err: error }, 'could not record when a machine was last seen'));
    }
    return answer;
  }
}
