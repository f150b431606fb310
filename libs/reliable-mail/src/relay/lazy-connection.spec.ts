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
    1_000,
  );
  return { lazy, endings, closed, failNextConnect: () => (failNext = true) };
}

describe('LazyConnection', () => {
  it('connects at the first use, once for the uses meanwhile', async () => {
    const connect = jest.fn(async () => 1);
    const lazy = new LazyConnection(connect, async () => undefined, 1_000);
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

  it('gives up on a connect that does not settle in time, and closes its connection should it come late', async () => {
    let connected: (connection: number) => void = () => undefined;
    const closed: number[] = [];
    const lazy = new LazyConnection<number>(
      (_ended) => new Promise((resolve) => (connected = resolve)),
      async (connection) => {
        closed.push(connection);
      },
      20,
    );
    await expect(lazy.get()).rejects.toThrow('not connected within 20 ms');
    const hung = connected;
    // The next use connects again, not waiting for the hung one.
    const next = lazy.get();
    connected(2);
    expect(await next).toBe(2);
    hung(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toEqual([1]);
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
