import { describe, expect, it } from '@jest/globals';
import type { OutboxDatabase } from '../database/outbox-database.js';
import { WakeUpNotifier } from './wake-up.notifier.js';

describe('WakeUpNotifier', () => {
  it('lets the NOTIFY after a commit go before shutdown goes on to close the connections', async () => {
    const notified: unknown[][] = [];
    let answer = (): void => undefined;
    const database = {
      query: (_statement: unknown, values: unknown[]) =>
        new Promise((resolve) => {
          answer = () => {
            notified.push(values);
            resolve([]);
          };
        }),
    } as unknown as OutboxDatabase;
    const notifier = new WakeUpNotifier(database);
    // Two enqueues open at once: the second's NOTIFY follows its commit, in a statement of its own.
    const first = notifier.plan(null);
    const second = notifier.plan(null);
    expect([first.inStatement, second.inStatement]).toEqual([true, false]);
    second.inserted(['default']);
    first.inserted(['default']);

    let shutDown = false;
    const shutdown = notifier.beforeApplicationShutdown().then(() => (shutDown = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(shutDown).toBe(false);
    answer();
    await shutdown;
    expect(notified).toHaveLength(1);
  });

  it('waits at shutdown for the NOTIFY under way and one more, not for those of enqueues that go on meanwhile', async () => {
    const answers: Array<() => void> = [];
    /** The lanes of each NOTIFY statement sent. */
    const notified: unknown[] = [];
    const database = {
      query: (_statement: unknown, values: unknown[]) => {
        notified.push(values[1]);
        return new Promise((resolve) => answers.push(() => resolve([])));
      },
    } as unknown as OutboxDatabase;
    const notifier = new WakeUpNotifier(database);
    /** A commit whose NOTIFY follows it (another enqueue is open meanwhile). */
    const commitAfterAnother = (lane: string) => {
      const open = notifier.plan(null);
      notifier.plan(null).inserted([lane]);
      open.inserted([]);
    };
    const settled = () => new Promise((resolve) => setImmediate(resolve));
    commitAfterAnother('a');
    await settled();
    let shutDown = false;
    const shutdown = notifier.beforeApplicationShutdown().then(() => (shutDown = true));
    commitAfterAnother('b');
    answers.shift()!();
    await settled();
    // The lanes due when shutdown began go in one more statement; an enqueue that commits during it waits for a poll.
    commitAfterAnother('c');
    answers.shift()!();
    await settled();
    expect(shutDown).toBe(true);
    expect(notified).toEqual([['a'], ['b']]);
    await shutdown;
  });

  it('shuts down at once when no NOTIFY is under way', async () => {
    const notifier = new WakeUpNotifier({} as OutboxDatabase);
    await expect(notifier.beforeApplicationShutdown()).resolves.toBeUndefined();
  });
});
