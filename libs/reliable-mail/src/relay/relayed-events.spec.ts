import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { RELAYED_NAMES_MAX_AGE_MS, RelayedEvents } from './relayed-events.js';

describe('RelayedEvents', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  const settled = () =>
    new Promise((resolve) => jest.requireActual<typeof import('node:timers')>('node:timers').setImmediate(resolve));

  it('reads the names at start, and again in the background by the first question once they are old', async () => {
    const answers = [['a'], ['a', 'b']];
    const read = jest.fn(async () => answers.shift()!);
    const relayed = new RelayedEvents();
    await relayed.readWith(read);
    expect(relayed.has('a')).toBe(true);
    expect(relayed.has('b')).toBe(false);

    jest.setSystemTime(RELAYED_NAMES_MAX_AGE_MS);
    expect(relayed.has('b')).toBe(false);
    expect(read).toHaveBeenCalledTimes(1);

    jest.setSystemTime(RELAYED_NAMES_MAX_AGE_MS + 1);
    // The question that finds them old is answered from what was known; the read goes on behind it, once.
    expect(relayed.has('b')).toBe(false);
    expect(relayed.has('b')).toBe(false);
    await settled();
    expect(read).toHaveBeenCalledTimes(2);
    expect(relayed.has('b')).toBe(true);
  });

  it('keeps what it knew when a read fails, and tries again once that is old', async () => {
    const read = jest
      .fn<() => Promise<string[]>>()
      .mockResolvedValueOnce(['a'])
      .mockRejectedValueOnce(new Error('down'));
    const relayed = new RelayedEvents();
    await relayed.readWith(read);
    jest.setSystemTime(RELAYED_NAMES_MAX_AGE_MS + 1);
    relayed.has('a');
    await settled();
    expect(relayed.has('a')).toBe(true);
    expect(read).toHaveBeenCalledTimes(2);
    read.mockResolvedValueOnce([]);
    jest.setSystemTime(2 * RELAYED_NAMES_MAX_AGE_MS + 2);
    relayed.has('a');
    await settled();
    expect(relayed.has('a')).toBe(false);
  });

  it('tells its listeners of each recording until they stop listening', () => {
    const relayed = new RelayedEvents();
    const heard = jest.fn();
    const stop = relayed.whenRecorded(heard);
    relayed.recorded();
    stop();
    relayed.recorded();
    expect(heard).toHaveBeenCalledTimes(1);
  });
});
