/**
 * The client's one failure: a message for the person (or agent), the HTTP status when the server
 * refused, and whether it was a usage mistake (exit code 2) rather than a failure (exit code 1).
 */
export class ClientError extends Error {
  readonly status: number | null;
  readonly usage: boolean;

  constructor(message: string, options: { status?: number; usage?: boolean } = {}) {
    super(message);
    this.name = 'ClientError';
    this.status = options.status ?? null;
    this.usage = options.usage ?? false;
  }
}
