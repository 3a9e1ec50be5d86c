import type { Config } from '../config.js';
import type { CustomerRow } from '../customers/repository.js';
import type { Db } from '../db/pool.js';
import { listenTo, type Listener } from '../db/listener.js';
import { newId } from '../ids.js';
import type { Logger } from '../logger.js';
import { usdToMicros } from '../money.js';
import { guardLedger } from './ledger-guard.js';
import { HOLD_TTL_SECONDS, release, type Settlement, type SettleResult } from './meter.js';
import * as repo from './repository.js';

/**
 * Quota grants: a busy payer's calls reserved and settled in this process's memory.
 *
 * Reserving and settling each call in PostgreSQL costs two round trips and about half a
 * millisecond of database CPU a call; at a thousand calls a second that is most of the machine.
 * So once a payer calls often (METERING_GRANT_MIN_RATE calls a second), this process takes one
 * hold worth a couple of seconds of its calls (a grant, migration 016), reserves each call's
 * maximum cost against it in memory, settles there, and charges the settled calls to PostgreSQL
 * in bulk every FLUSH_MS, each with its own usage record and ledger row.
 *
 * What stays as it was:
 * - No wallet is overdrawn: a call only runs on money its grant already reserved in PostgreSQL.
 * - Refusals stay exact: a grant takes at most 1/GRANT_SHARE of its wallet's available balance,
 *   so a payer near the end of its money, a customer with a monthly budget, a batch line (it
 *   settles under an idempotency key) and any call no grant can cover reserve call by call.
 * - A revocation takes effect on the next request: every auth generation change is announced at
 *   commit (migration 016), and this process stops using the developer's grants when it hears it;
 *   it uses none while it is not listening. Each charge also checks the generation again.
 *
 * What changes: the wallet's balance in PostgreSQL trails a grant's calls by up to FLUSH_MS (the
 * X-Svc-Wallet-Balance of each call is this process's count-down from the last charge), and if
 * the process dies, the calls it settled in the last FLUSH_MS are never charged. Its grants are
 * then released whole by the hold sweep, as any hold of a dead process is.
 */

/**
 * How often settled calls are charged to PostgreSQL. Each charge keeps PostgreSQL busy for a few
 * milliseconds; on a machine it shares with the API, every 100 ms that stalled the call arriving
 * with it by about 2 ms, enough to set the gateway's p99 at 500/s (README, "The grant's charge
 * and the 500/s tail").
 */
const FLUSH_MS = 250;
/** How long a grant serves new calls; the next one is opened before it ends. */
const GRANT_MS = 2_000;
/** A grant takes at most this fraction's inverse of its wallet's available balance. */
const GRANT_SHARE = 20;
/** A grant smaller than this many calls' worth is not worth opening. */
const MIN_GRANT_CALLS = 16;
/** Once PostgreSQL declined a grant for a payer (too little money, stale credentials), ask again after this. */
const DECLINED_BACKOFF_MS = 1_000;
/** Charges a retiring grant tries before giving up on its last calls (about 25 s in all). */
const FINISH_ATTEMPTS = 8;
/** How long close() waits for calls still running on a grant to settle. */
const CLOSE_WAIT_MS = 10_000;
/** How often a closing process looks whether its grants' last calls have finished. */
const CLOSE_POLL_MS = 10;
const AUTH_GENERATION_CHANNEL = 'svc_auth_generation';

/** Who pays a call, as far as a grant is concerned. */
export interface GrantPayer {
  developerId: string;
  payerAccountId: string;
  customer: Pick<CustomerRow, 'id' | 'monthly_budget_micros'> | null;
}

/** A call's reservation against a grant. */
export interface GrantHold {
  grant: Grant;
  amountMicros: number;
  customerId: string | null;
}

interface Grant {
  key: string;
  holdId: string;
  developerId: string;
  generation: number;
  amountMicros: number;
  /** What new calls may still reserve. */
  remainingMicros: number;
  expiresAt: number;
  /** Calls reserved and not yet settled or released. */
  inFlight: number;
  payer: PayerState;
  pending: repo.GrantEntry[];
  nextSeq: number;
  flushing: Promise<void> | undefined;
  retired: boolean;
  finished: Promise<void> | undefined;
}

/** What this process knows of one payer: how often it calls, and its balance for the headers. */
interface PayerState {
  since: number;
  calls: number;
  /** Calls in the last full second. */
  lastRate: number;
  declinedUntil: number;
  /**
   * The wallet's balance as PostgreSQL last reported it, and the calls this process settled under
   * the payer's grants since (not yet charged). A call's X-Svc-Wallet-Balance is the difference.
   */
  reportedBalanceMicros: number;
  unreportedMicros: number;
  /** Auth changes of the payer's developer heard so far. */
  authChanges: number;
  /** Charges begun, and those on their way: a balance read while one was may or may not include it. */
  chargesBegun: number;
  charging: number;
}

export class QuotaGrants {
  private readonly current = new Map<string, Grant>();
  private readonly live = new Set<Grant>();
  private readonly payers = new Map<string, PayerState>();
  /** Grants being opened, by payer key. */
  private readonly opening = new Map<string, Promise<void>>();
  private listener: Listener | undefined;
  private listening = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Db,
    private readonly config: Pick<Config, 'DATABASE_URL' | 'METERING_GRANT_MIN_RATE' | 'METERING_COMMIT' | 'WALLET_LOW_THRESHOLD_USD'>,
    private readonly logger: Logger,
  ) {}

  /** Starts listening for auth changes and charging settled calls (API processes only; until then no call uses a grant). */
  start(): void {
    if (this.listener || this.config.METERING_GRANT_MIN_RATE === 0) return;
    this.listener = listenTo(this.config.DATABASE_URL, AUTH_GENERATION_CHANNEL, this.logger, {
      notification: (developerId) => this.retireDeveloper(developerId),
      connected: () => (this.listening = true),
      // Changes announced while no one listened are unknown: no grant may serve another call.
      lost: () => {
        this.listening = false;
        for (const grant of this.current.values()) this.retire(grant);
      },
    });
    this.timer = setInterval(() => this.tick(), FLUSH_MS);
    this.timer.unref();
  }

  /**
   * Reserves `maxCostMicros` for a call against its payer's grant, or returns undefined when the
   * call must reserve in PostgreSQL. Also counts the payer's demand, which opens grants.
   * `generation` is the auth generation the call's credentials were verified under (cached calls only).
   */
  take(payer: GrantPayer, generation: number, maxCostMicros: number, now = Date.now()): GrantHold | undefined {
    if (!this.listening || payer.customer?.monthly_budget_micros != null) return undefined;
    const key = `${payer.developerId}\u0000${payer.payerAccountId}\u0000${payer.customer?.id ?? ''}`;
    const grant = this.current.get(key);
    this.noteDemand(key, grant, payer, generation, maxCostMicros, now);
    if (!grant || grant.retired || now >= grant.expiresAt || grant.generation !== generation || grant.remainingMicros < maxCostMicros) return undefined;
    grant.remainingMicros -= maxCostMicros;
    grant.inFlight += 1;
    return { grant, amountMicros: maxCostMicros, customerId: payer.customer?.id ?? null };
  }

  /** Settles a call in memory; it is charged with the grant's next flush. */
  settle(hold: GrantHold, settlement: Settlement): SettleResult {
    const { grant } = hold;
    const cost = Math.min(Math.max(Math.round(settlement.costMicros), 0), hold.amountMicros);
    grant.remainingMicros += hold.amountMicros - cost;
    grant.payer.unreportedMicros += cost;
    grant.pending.push({
      seq: grant.nextSeq++,
      customer: hold.customerId,
      cost,
      billable: Math.max(Math.round(settlement.billableMicros), 0),
      model: settlement.model,
      tokens_in: settlement.tokensIn,
      tokens_out: settlement.tokensOut,
      request_id: settlement.requestId ?? null,
      events: (settlement.events ?? []).map((event) => ({ id: newId('evt_'), ...event })),
    });
    this.done(grant);
    return { charged: true, deductedMicros: cost, balanceAfterMicros: grant.payer.reportedBalanceMicros - grant.payer.unreportedMicros };
  }

  /** Gives a call's reservation back to its grant (the call failed or never ran). */
  release(hold: GrantHold): void {
    hold.grant.remainingMicros += hold.amountMicros;
    this.done(hold.grant);
  }

  /** How many grants of this developer serve calls now. */
  servingFor(developerId: string): number {
    return [...this.current.values()].filter((grant) => grant.developerId === developerId && !grant.retired).length;
  }

  /** Charges every settled call now (tests, and readers that must see them in PostgreSQL). */
  async flush(): Promise<void> {
    await Promise.all([...this.live].map((grant) => this.charge(grant)));
  }

  /** Stops taking calls, charges what was settled and releases every grant's unused rest. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.listener?.close();
    this.listening = false;
    // A grant whose opening was under way is retired as it opens (no one listens now), and joins `live`.
    await Promise.all(this.opening.values());
    for (const grant of this.live) this.retire(grant);
    // A call still running finishes its grant when it settles: a stream the server cut at shutdown
    // settles as it unwinds. Its charge needs the pool this process closes next, so wait (bounded).
    const deadline = Date.now() + CLOSE_WAIT_MS;
    while ([...this.live].some((grant) => grant.finished === undefined) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, CLOSE_POLL_MS));
    }
    await Promise.all([...this.live].map((grant) => grant.finished));
  }

  private done(grant: Grant): void {
    grant.inFlight -= 1;
    if (grant.retired && grant.inFlight === 0) this.finish(grant);
  }

  private noteDemand(key: string, grant: Grant | undefined, payer: GrantPayer, generation: number, maxCostMicros: number, now: number): void {
    let state = this.payers.get(key);
    if (!state) this.payers.set(key, (state = { since: now, calls: 0, lastRate: 0, declinedUntil: 0, reportedBalanceMicros: 0, unreportedMicros: 0, authChanges: 0, chargesBegun: 0, charging: 0 }));
    if (now - state.since >= 1_000) {
      state.lastRate = now - state.since < 2_000 ? state.calls : 0;
      state.since = now;
      state.calls = 0;
    }
    state.calls += 1;
    const rate = Math.max(state.calls, state.lastRate);
    if (rate < this.config.METERING_GRANT_MIN_RATE || now < state.declinedUntil || this.opening.has(key)) return;
    // Open the next grant while this one still has a quarter of its time or money left.
    const renewing = grant && !grant.retired && grant.generation === generation;
    if (renewing && grant.expiresAt - now > GRANT_MS / 4 && grant.remainingMicros > grant.amountMicros / 4) return;
    const minimumMicros = maxCostMicros * MIN_GRANT_CALLS;
    const opened = this.open(key, payer, generation, Math.max(maxCostMicros * rate * (GRANT_MS / 1_000), minimumMicros), minimumMicros, state);
    this.opening.set(key, opened.finally(() => this.opening.delete(key)));
  }

  private async open(key: string, payer: GrantPayer, generation: number, desiredMicros: number, minimumMicros: number, state: PayerState): Promise<void> {
    // The balance read with the grant is exact only if no charge of this payer ran meanwhile.
    const quiet = state.charging === 0 ? state.chargesBegun : -1;
    const authChanges = state.authChanges;
    try {
      const row = await guardLedger(() =>
        repo.openGrant(this.db, {
          generation,
          developerId: payer.developerId,
          payerAccountId: payer.payerAccountId,
          customerId: payer.customer?.id ?? null,
          desiredMicros: Math.ceil(desiredMicros),
          minimumMicros: Math.ceil(minimumMicros),
          share: GRANT_SHARE,
          // As any hold: a streamed call may keep its grant's hold open for minutes.
          ttlSeconds: HOLD_TTL_SECONDS,
          eventId: newId('evt_'),
        }),
      );
      if (row.outcome !== 'ok') {
        state.declinedUntil = Date.now() + DECLINED_BACKOFF_MS;
        return;
      }
      const amountMicros = Number(row.amount_micros);
      const grant: Grant = {
        key,
        holdId: row.hold_id!,
        developerId: payer.developerId,
        generation,
        amountMicros,
        remainingMicros: amountMicros,
        expiresAt: Date.now() + GRANT_MS,
        inFlight: 0,
        payer: state,
        pending: [],
        nextSeq: 0,
        flushing: undefined,
        retired: false,
        finished: undefined,
      };
      if (state.chargesBegun === quiet) state.reportedBalanceMicros = Number(row.balance_micros);
      this.live.add(grant);
      const previous = this.current.get(key);
      this.current.set(key, grant);
      if (previous) this.retire(previous);
      // Lost the connection, or heard of an auth change, while opening: the grant may be stale.
      if (!this.listening || state.authChanges !== authChanges) this.retire(grant);
    } catch (error) {
      state.declinedUntil = Date.now() + DECLINED_BACKOFF_MS;
      this.logger.warn({ err: error }, 'could not open a quota grant; calls reserve one by one');
    }
  }

  private retireDeveloper(developerId: string | undefined): void {
    for (const grant of this.current.values()) {
      if (grant.developerId === developerId) this.retire(grant);
    }
    for (const [key, state] of this.payers) {
      if (key.startsWith(`${developerId}\u0000`)) state.authChanges += 1;
    }
  }

  private retire(grant: Grant): void {
    if (grant.retired) return;
    grant.retired = true;
    if (this.current.get(grant.key) === grant) this.current.delete(grant.key);
    if (grant.inFlight === 0) this.finish(grant);
  }

  /** Charges a retired grant's last calls, then gives back what none of them used. */
  private finish(grant: Grant): void {
    grant.finished ??= (async () => {
      // Charge at least once even with nothing pending: that waits for a charge already on its way,
      // whose calls would otherwise meet a released hold and go uncharged while their money went back.
      for (let attempt = 0; attempt === 0 || (grant.pending.length > 0 && attempt < FINISH_ATTEMPTS); attempt++) {
        if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, FLUSH_MS * 2 ** attempt));
        await this.charge(grant);
      }
      if (grant.pending.length > 0) this.logger.error({ hold: grant.holdId, calls: grant.pending.length }, 'gave up charging settled calls of a quota grant');
      await release(this.db, { id: grant.holdId, commit: this.config.METERING_COMMIT }).catch((error: unknown) => {
        this.logger.warn({ err: error, hold: grant.holdId }, 'could not release a quota grant; the hold sweep will');
      });
      this.live.delete(grant);
    })();
  }

  private tick(): void {
    const now = Date.now();
    for (const grant of this.live) {
      if (now >= grant.expiresAt) this.retire(grant);
      if (grant.pending.length > 0) void this.charge(grant);
    }
    for (const [key, payer] of this.payers) {
      if (now - payer.since > 2_000 && !this.current.has(key)) this.payers.delete(key);
    }
  }

  /** One bulk charge of a grant's settled calls at a time; a failed one is retried with the same keys. */
  private charge(grant: Grant): Promise<void> {
    if (grant.flushing) return grant.flushing.then(() => this.charge(grant));
    if (grant.pending.length === 0) return Promise.resolve();
    const entries = grant.pending;
    grant.pending = [];
    grant.payer.chargesBegun += 1;
    grant.payer.charging += 1;
    grant.flushing = (async () => {
      try {
        const row = await guardLedger(() =>
          repo.chargeGrant(this.db, {
            commit: this.config.METERING_COMMIT,
            holdId: grant.holdId,
            generation: grant.generation,
            entries,
            lowThresholdMicros: usdToMicros(this.config.WALLET_LOW_THRESHOLD_USD),
            lowEventId: newId('evt_'),
          }),
        );
        grant.payer.unreportedMicros -= entries.reduce((sum, entry) => sum + entry.cost, 0);
        if (row.balance_after_micros !== null) grant.payer.reportedBalanceMicros = Number(row.balance_after_micros);
        // Only after this process stalled past the hold's TTL, when the sweep already gave the money back.
        else this.logger.error({ hold: grant.holdId, calls: entries.length }, 'settled calls of a released quota grant were not charged');
        if (!row.current) this.retire(grant);
      } catch (error) {
        grant.pending = entries.concat(grant.pending);
        this.logger.warn({ err: error, hold: grant.holdId }, 'could not charge a quota grant; retrying');
      } finally {
        grant.payer.charging -= 1;
        grant.flushing = undefined;
      }
    })();
    return grant.flushing;
  }
}
