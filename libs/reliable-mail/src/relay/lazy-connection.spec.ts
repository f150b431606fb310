import { describe, expect, it, jest } from '@jest/globals';
import { LazyConnection } from './lazy-connection.js';

/** Connections numbered in the order they were made, each able to end as a broker restart ends it. */
function numbered() {
  const endings: Array<() => void> = [];
  const closed: number[] = [];
  let failNext = false;
  const lazy = new LazyConnection<number>(
    async (ended) => {
      if (failNext) {
        failNext = false;
        throw new Error('refused');
      }
      endings.push(ended);
      return endings.length;
    },
    async (connection) => {
      closed.push(connection);
    },
  );
  return { lazy, endings, closed, failNextConnect: () => (failNext = true) };
}

describe('LazyConnection', () => {
  it('connects at the first use, once for the uses meanwhile', async () => {
    const connect = jest.fn(async () => 1);
    const lazy = new LazyConnection(connect, async () => undefined);
    expect(connect).not.toHaveBeenCalled();
    expect(await Promise.all([lazy.get(), lazy.get()])).toEqual([1, 1]);
    expect(connect).toHaveBeenCalledTimes(1);
  });

  it('connects again after the connection ended, or failed to connect', async () => {
    const { lazy, endings, failNextConnect } = numbered();
    expect(await lazy.get()).toBe(1);
    endings[0]();
    expect(await lazy.get()).toBe(2);
    // A late end of the first changes nothing.
    endings[0]();
    expect(await lazy.get()).toBe(2);
    endings[1]();
    failNextConnect();
    await expect(lazy.get()).rejects.toThrow('refused');
    expect(await lazy.get()).toBe(3);
  });

  it('closes the connection it made, and none when it made none', async () => {
    const { lazy, closed } = numbered();
    await lazy.close();
    expect(closed).toEqual([]);
    await lazy.get();
    await lazy.close();
    expect(closed).toEqual([1]);
    expect(await lazy.get()).toBe(2);
  });
});
