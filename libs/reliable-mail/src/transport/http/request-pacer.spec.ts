import { describe, expect, it } from '@jest/globals';
import { RequestPacer } from './request-pacer.js';

/** A clock of the test's: `pause` records what it is asked and moves the time on by it. */
function testClock() {
  const clock = {
    time: 0,
    pauses: [] as number[],
    now: () => clock.time,
    pause: async (ms: number) => {
      clock.pauses.push(ms);
      clock.time += Math.max(ms, 0);
    },
  };
  return clock;
}

describe('RequestPacer', () => {
  it('spaces requests a tenth more than 1000 / rate ms apart, the first at once', async () => {
    const clock = testClock();
    const pacer = new RequestPacer(5, clock);
    const signal = new AbortController().signal;
    for (let request = 0; request < 3; request++) await pacer.take(signal);
    expect(clock.pauses).toEqual([0, 220, 220]);
  });

  it('shares its slots between sends waiting at once, in the order they asked', async () => {
    const clock = testClock();
    const pacer = new RequestPacer(5, { now: clock.now, pause: async (ms) => void clock.pauses.push(ms) });
    const signal = new AbortController().signal;
    await Promise.all([pacer.take(signal), pacer.take(signal), pacer.take(signal)]);
    expect(clock.pauses).toEqual([0, 220, 440]);
  });

  it('a request that waited long enough goes at once', async () => {
    const clock = testClock();
    const pacer = new RequestPacer(5, clock);
    const signal = new AbortController().signal;
    await pacer.take(signal);
    clock.time += 1_000;
    await pacer.take(signal);
    expect(clock.pauses).toEqual([0, 0]);
  });

  it('with the real clock, waits for its slot, and stops waiting when the signal aborts', async () => {
    const pacer = new RequestPacer(2);
    const waiting = new AbortController();
    expect(await pacer.take(waiting.signal)).toBe(true);
    let settled = false;
    const second = pacer.take(waiting.signal).finally(() => (settled = true));
    // Its slot is 550 ms away: a few turns of the event loop later it still waits.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    waiting.abort();
    expect(await second).toBe(false);
  });
});
