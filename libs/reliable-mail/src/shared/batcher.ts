interface Waiting<I, O> {
  item: I;
  resolve(result: O): void;
  reject(error: unknown): void;
}

export interface BatcherOptions {
  /**
   * How long an idle batcher waits for company before a call, in ms.
   * @default 0 (the next turn of the event loop)
   */
  lingerMs?: number;
  /**
   * Whether a failed call is to be run again one item at a time: an error that one item's value causes would
   * otherwise fail every item of its batch. Each item then gets its own result or error.
   * @default never
   */
  splitOn?: (error: unknown) => boolean;
}

/**
 * Coalesces concurrent requests into one call: items added while a call is in flight go together into the next.
 * An idle batcher runs an item after `lingerMs` (by default on the next turn of the event loop), so batching costs
 * no latency unless a caller chooses to trade some for fewer calls.
 */
export class Batcher<I, O> {
  private readonly queue: Waiting<I, O>[] = [];
  private busy = false;
  private readonly lingerMs: number;
  private readonly splitOn: (error: unknown) => boolean;

  constructor(
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
    { lingerMs = 0, splitOn = () => false }: BatcherOptions = {},
  ) {
    this.lingerMs = lingerMs;
    this.splitOn = splitOn;
  }

  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.busy || this.queue.length === 0) return;
    this.busy = true;
    if (this.lingerMs > 0 && this.queue.length < this.maxBatch) setTimeout(() => void this.flush(), this.lingerMs);
    else setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    try {
      await this.call(this.queue.splice(0, this.maxBatch));
    } finally {
      this.busy = false;
      this.kick();
    }
  }

  /** One call for `batch`; when it fails with an error to split on, one call per item, one after the other. */
  private async call(batch: Waiting<I, O>[]): Promise<void> {
    try {
      const results = await this.run(batch.map((waiting) => waiting.item));
      batch.forEach((waiting, index) => waiting.resolve(results[index]));
    } catch (error) {
      if (batch.length > 1 && this.splitOn(error)) {
        for (const waiting of batch) await this.call([waiting]);
        return;
      }
      for (const waiting of batch) waiting.reject(error);
    }
  }
}
