import type { Db } from '../../shared/db/pool.js';

/**
 * Where a database's sessions spend their time, by sampling pg_stat_activity every `intervalMs`
 * while some work runs: each sample counts the statement each busy session of the database is
 * running (a brain's or a pack version's chunk partition named alike, so one statement reads as
 * one whatever the partition), or 'idle in transaction' for a transaction waiting on its client
 * (the Node side of the work). The bench's database is its own, so its sessions are the bench's.
 */
export function sampleStatements(db: Db, intervalMs = 50): { stop(): Promise<{ statement: string; share: number }[]> } {
  const counts = new Map<string, number>();
  let stopping = false;
  const sampling = (async () => {
    while (!stopping) {
      const { rows } = await db.query<{ state: string; query: string }>(
        `SELECT state, query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')`,
      );
      for (const row of rows) {
        const statement = row.state === 'active' ? foldStatement(row.query) : 'idle in transaction (waiting on Node)';
        counts.set(statement, (counts.get(statement) ?? 0) + 1);
      }
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    async stop() {
      stopping = true;
      await sampling;
      const total = [...counts.values()].reduce((sum, count) => sum + count, 0);
      return [...counts].sort((a, b) => b[1] - a[1]).map(([statement, count]) => ({ statement, share: count / total }));
    },
  };
}

const foldStatement = (query: string) =>
  query.replace(/\s+/g, ' ').trim().replace(/\b(brain_pack_chunks|brain_chunks)_[0-9a-z_]+/g, '$1_<partition>').slice(0, 48);

/** The first few statements of a sampling, with their shares, for a table cell. */
export function topStatements(sampled: { statement: string; share: number }[], count = 2): string {
  return sampled.slice(0, count).map(({ statement, share }) => `${(share * 100).toFixed(0)} % ${statement}…`).join('; ');
}
