interface Waiting<I, O> {
  item: I;
  resolve(result: O): void;
  reject(error: unknown): void;
}

/**
 * Coalesces concurrent requests into one call: items added while a call is in flight go together into the next.
 * An idle batcher runs an item after `lingerMs` (by default on the next turn of the event loop), so batching costs
 * no latency unless a caller chooses to trade some for fewer calls.
 */
export class Batcher<I, O> {
  private readonly queue: Waiting<I, O>[] = [];
  private busy = false;

  constructor(
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
    private readonly lingerMs = 0,
  ) {}

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
    const batch = this.queue.splice(0, this.maxBatch);
    try {
      const results = await this.run(batch.map((waiting) => waiting.item));
      batch.forEach((waiting, index) => waiting.resolve(results[index]));
    } catch (error) {
      for (const waiting of batch) waiting.reject(error);
    } finally {
      this.busy = false;
      this.kick();
    }
  }
}
