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
    const batcher = new Batcher(run, 100, { lingerMs: 30 });
    const results = [batcher.add(1)];
    await turn();
    expect(calls).toHaveLength(0);
    results.push(batcher.add(2));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls).toEqual([[1, 2]]);
    settleNext();
    expect(await Promise.all(results)).toEqual([10, 20]);
  });

  describe('splitting a failed call', () => {
    /** A batch call refused whole when it holds a poisoned item (a value the database cannot store), as a statement is. */
    class Refused extends Error {}
    const refusedWith = (poisoned: number[]) => {
      const calls: number[][] = [];
      const run = async (items: number[]) => {
        calls.push(items);
        const bad = items.find((item) => poisoned.includes(item));
        if (bad !== undefined) throw new Refused(`cannot store ${bad}`);
        return items.map((item) => item * 10);
      };
      return { calls, run };
    };

    it('runs each item of a call that failed with an error to split on by itself: only the poisoned ones fail', async () => {
      const { calls, run } = refusedWith([2, 4]);
      const batcher = new Batcher(run, 10, { splitOn: (error) => error instanceof Refused });
      const results = await Promise.allSettled([1, 2, 3, 4, 5].map((item) => batcher.add(item)));
      expect(results.map((result) => (result.status === 'fulfilled' ? result.value : String(result.reason)))).toEqual([
        10,
        'Error: cannot store 2',
        30,
        'Error: cannot store 4',
        50,
      ]);
      expect(calls).toEqual([[1, 2, 3, 4, 5], [1], [2], [3], [4], [5]]);
      // The next call batches again.
      await expect(Promise.all([batcher.add(6), batcher.add(7)])).resolves.toEqual([60, 70]);
      expect(calls.at(-1)).toEqual([6, 7]);
    });

    it('does not split for any other error: the connection fails every item alike', async () => {
      const calls: number[][] = [];
      const batcher = new Batcher(
        async (items: number[]) => {
          calls.push(items);
          throw new Error('connection terminated');
        },
        10,
        { splitOn: (error) => error instanceof Refused },
      );
      const results = await Promise.allSettled([1, 2, 3].map((item) => batcher.add(item)));
      expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected', 'rejected']);
      expect(calls).toEqual([[1, 2, 3]]);
    });

    it('items added while the split runs wait for the next call, and are not held back by the poisoned one', async () => {
      const { calls, run } = refusedWith([1]);
      const batcher = new Batcher(run, 10, { splitOn: (error) => error instanceof Refused });
      const first = [batcher.add(1), batcher.add(2)].map((result) => result.catch(String));
      await turn();
      const later = batcher.add(3);
      expect(await Promise.all(first)).toEqual(['Error: cannot store 1', 20]);
      expect(await later).toBe(30);
      expect(calls).toEqual([[1, 2], [1], [2], [3]]);
    });
  });
});
