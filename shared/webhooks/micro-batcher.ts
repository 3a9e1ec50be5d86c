/**
 * Group commit for the delivery hot path: calls made while earlier batches are still running are
 * collected and sent as one batch, so a hundred concurrent deliveries cost a few round trips to
 * PostgreSQL instead of a hundred. At light load a call goes out alone, on the next turn of the
 * event loop; under load batches grow by themselves.
 */
export class MicroBatcher<In, Out> {
  private waiting: { input: In; resolve: (value: Out) => void; reject: (error: unknown) => void }[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly run: (inputs: In[]) => Promise<Out[]>,
    private readonly options: { maxBatch: number; maxInFlight: number },
  ) {}

  submit(input: In): Promise<Out> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ input, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.options.maxInFlight || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.options.maxBatch);
      this.inFlight++;
      this.run(batch.map((entry) => entry.input)).then(
        (outputs) => batch.forEach((entry, i) => entry.resolve(outputs[i]!)),
        (error: unknown) => batch.forEach((entry) => entry.reject(error)),
      ).finally(() => {
        this.inFlight--;
        this.schedule();
      });
    }
  }
}
