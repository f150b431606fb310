import { describe, expect, it } from '@jest/globals';
import { Batcher } from './batcher.js';

/** A batch function that records each call and answers when the test says so. */
function recording() {
  const calls: number[][] = [];
  const pending: Array<() => void> = [];
  const run = (items: number[]) =>
    new Promise<number[]>((resolve) => {
      calls.push(items);
      pending.push(() => resolve(items.map((item) => item * 10)));
    });
  const settleNext = () => pending.shift()!();
  return { calls, run, settleNext };
}

/** Lets pending callbacks and the batcher's next call (scheduled with setImmediate) run. */
const turn = () => new Promise((resolve) => setTimeout(resolve, 5));

describe('Batcher', () => {
  it('runs an idle item on the next turn, and coalesces what arrives during a call into the next one', async () => {
    const { calls, run, settleNext } = recording();
    const batcher = new Batcher(run, 100);
    const first = batcher.add(1);
    await turn();
    expect(calls).toEqual([[1]]);
    const waiting = [batcher.add(2), batcher.add(3), batcher.add(4)];
    await turn();
    expect(calls).toHaveLength(1);
    settleNext();
    expect(await first).toBe(10);
    await turn();
    expect(calls).toEqual([[1], [2, 3, 4]]);
    settleNext();
    expect(await Promise.all(waiting)).toEqual([20, 30, 40]);
  });

  it('never puts more than maxBatch items in one call', async () => {
    const { calls, run, settleNext } = recording();
    const batcher = new Batcher(run, 2);
    const results = [1, 2, 3, 4, 5].map((item) => batcher.add(item));
    for (let call = 0; call < 3; call++) {
      await turn();
      settleNext();
    }
    expect(await Promise.all(results)).toEqual([10, 20, 30, 40, 50]);
    expect(calls).toEqual([[1, 2], [3, 4], [5]]);
  });

  it('rejects every item of a failed call, and goes on with the next ones', async () => {
    let fail = true;
    const batcher = new Batcher(async (items: number[]) => {
      if (fail) throw new Error('database away');
      return items;
    }, 10);
    const failed = [batcher.add(1), batcher.add(2)];
    await expect(Promise.all(failed)).rejects.toThrow('database away');
    await expect(failed[1]).rejects.toThrow('database away');
    fail = false;
    await expect(batcher.add(3)).resolves.toBe(3);
  });

  it('with a linger, an idle item waits for company before the call', async () => {
    const { calls, run, settleNext } = recording();
    const batcher = new Batcher(run, 100, 30);
    const results = [batcher.add(1)];
    await turn();
    expect(calls).toHaveLength(0);
    results.push(batcher.add(2));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls).toEqual([[1, 2]]);
    settleNext();
    expect(await Promise.all(results)).toEqual([10, 20]);
  });
});
