/**
 * A steady trickle of chat calls, as a production caller sends them, each recorded with what it
 * got: the status (0 when the connection was refused or reset, -1 when no answer came within
 * ANSWER_LIMIT_MS), the error code and Retry-After of a refusal, and how long it took.
 */
export interface CallRecord {
  /** When the call was sent (ms since the epoch). */
  at: number;
  ms: number;
  status: number;
  code?: string;
  retryAfter?: string | null;
  requestId?: string | null;
}

/** A call still unanswered after this long counts as hung (the bound the suite asserts is far below it). */
const ANSWER_LIMIT_MS = 20_000;

export class ChatTrickle {
  readonly calls: CallRecord[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly gatewayUrl: string,
    private readonly key: string,
    private readonly everyMs = 100,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      const call = this.send().finally(() => this.inFlight.delete(call));
      this.inFlight.add(call);
    }, this.everyMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(this.inFlight);
  }

  /** The calls sent between two instants. */
  between(from: number, to = Date.now()): CallRecord[] {
    return this.calls.filter((call) => call.at >= from && call.at < to);
  }

  private async send(): Promise<void> {
    const at = Date.now();
    const record: CallRecord = { at, ms: 0, status: 0 };
    try {
      const response = await fetch(`${this.gatewayUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: `ping ${at}` }] }),
        signal: AbortSignal.timeout(ANSWER_LIMIT_MS),
      });
      const body = (await response.json().catch(() => undefined)) as { error?: { code?: string; message?: string } } | undefined;
      record.status = response.status;
      record.requestId = response.headers.get('x-request-id');
      if (response.status !== 200) {
        record.code = body?.error?.code ?? `no envelope: ${JSON.stringify(body)?.slice(0, 200)}`;
        record.retryAfter = response.headers.get('retry-after');
      }
    } catch (error) {
      record.status = (error as Error).name === 'TimeoutError' ? -1 : 0;
      record.code = (error as Error).message;
    }
    record.ms = Date.now() - at;
    this.calls.push(record);
  }
}
