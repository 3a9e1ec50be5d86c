import pg from 'pg';

/**
 * Group commit for one kind of statement. A call that finds fewer than `concurrency` statements
 * of its kind running goes at once, alone: an idle system pays nothing for this. Calls that
 * arrive while all of them are busy wait and leave together, up to `maxGroup` at a time, as one
 * statement: under load a hundred calls then cost one round trip and one commit instead of a
 * hundred, which is what a busy wallet row and this machine's expensive socket writes need.
 *
 * A group statement is all-or-nothing. When PostgreSQL refuses one, its calls run again one by
 * one, so a failure stays with the call that caused it; a lost connection fails them all (the
 * group may or may not have committed, and running it again could repeat it).
 */
export class GroupCommit<Call, Result> {
  private readonly waiting: Array<{ call: Call; resolve: (result: Result) => void; reject: (error: unknown) => void }> = [];
  private running = 0;
  /** Statements run, calls that went in a group of several, and groups refused and run again one by one. */
  readonly stats = { statements: 0, groupedCalls: 0, refusedGroups: 0 };

  constructor(
    /** Runs a group of one or more calls as one statement; resolves with one result per call, in order. */
    private readonly runGroup: (calls: Call[]) => Promise<Result[]>,
    private readonly limits: { concurrency: number; maxGroup: number },
  ) {}

  submit(call: Call): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.waiting.push({ call, resolve, reject });
      this.start();
    });
  }

  private start(): void {
    while (this.running < this.limits.concurrency && this.waiting.length > 0) {
      const group = this.waiting.splice(0, this.limits.maxGroup);
      this.running += 1;
      void this.run(group).finally(() => {
        this.running -= 1;
        this.start();
      });
    }
  }

  private async run(group: GroupCommit<Call, Result>['waiting']): Promise<void> {
    if (group.length > 1) {
      let results: Result[] | undefined;
      this.stats.statements += 1;
      try {
        results = await this.runGroup(group.map((entry) => entry.call));
        this.stats.groupedCalls += group.length;
      } catch (error) {
        this.stats.refusedGroups += 1;
        if (!(error instanceof pg.DatabaseError)) {
          for (const entry of group) entry.reject(error);
          return;
        }
      }
      if (results) {
        const mismatch = results.length === group.length ? undefined : new Error(`a group of ${group.length} calls returned ${results.length} results`);
        group.forEach((entry, i) => (mismatch ? entry.reject(mismatch) : entry.resolve(results[i]!)));
        return;
      }
    }
    this.stats.statements += group.length;
    await Promise.all(
      group.map(async (entry) => {
        try {
          const [result] = await this.runGroup([entry.call]);
          entry.resolve(result!);
        } catch (error) {
          entry.reject(error);
        }
      }),
    );
  }
}
