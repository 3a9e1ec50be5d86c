/**
 * The one poll of the test suite: reads until `done` holds, and fails with the last value seen
 * (and `context`, say a worker's output) when the deadline passes. Tests assert outcomes, never
 * how long they took; the deadline only keeps a broken run from hanging.
 */
export interface PollOptions {
  timeoutMs?: number;
  everyMs?: number;
  /** More to say when the deadline passes. */
  context?: () => string;
}

export async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, options: PollOptions = {}): Promise<T> {
  const { timeoutMs = 120_000, everyMs = 100 } = options;
  const deadline = Date.now() + timeoutMs;
  let last: T = await read();
  while (!done(last)) {
    if (Date.now() > deadline) {
      throw new Error(`condition not met within ${timeoutMs} ms; last value: ${JSON.stringify(last)?.slice(0, 2_000)}${options.context ? `\n${options.context()}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
    last = await read();
  }
  return last;
}
