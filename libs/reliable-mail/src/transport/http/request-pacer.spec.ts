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
    expect(await pacer.take(waiting.signal)).toEqual({ taken: true });
    let settled = false;
    const second = pacer.take(waiting.signal).finally(() => (settled = true));
    // Its slot is 550 ms away: a few turns of the event loop later it still waits.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    waiting.abort();
    expect(await second).toEqual({ taken: false, heldForMs: null });
  });

  it('a slot after the send’s deadline is not taken: answered at once, with the time until it, and left to others', async () => {
    const clock = testClock();
    const pacer = new RequestPacer(5, clock);
    const signal = new AbortController().signal;
    const slots = [];
    // Slots at 0, 220, 440, 660 and 880 ms; the one at 1,100 comes after a deadline 1 s away.
    for (let request = 0; request < 6; request++) slots.push(await pacer.take(signal, 1_000 - clock.now()));
    expect(slots.slice(0, 5)).toEqual(Array.from({ length: 5 }, () => ({ taken: true })));
    expect(slots[5]).toEqual({ taken: false, heldForMs: 220 });
    expect(clock.pauses).toEqual([0, 220, 220, 220, 220]);
    // The slot not taken is the next request's.
    await pacer.take(signal);
    expect(clock.pauses.at(-1)).toBe(220);
    expect(clock.now()).toBe(1_100);
  });
});

describe('RequestPacer: a hold (a provider’s Retry-After)', () => {
  /** A clock of the test's whose pauses each end when the test moves the time past them, in order. */
  function steppedClock() {
    const waiting: Array<{ at: number; wake: () => void }> = [];
    const clock = {
      time: 0,
      now: () => clock.time,
      pause: (ms: number) =>
        ms <= 0
          ? Promise.resolve()
          : new Promise<void>((resolve) => waiting.push({ at: clock.time + ms, wake: resolve })),
      /** Moves the time to `to`, waking each pause due by then at its own time. */
      async advance(to: number) {
        for (;;) {
          waiting.sort((a, b) => a.at - b.at);
          const next = waiting[0];
          if (!next || next.at > to) break;
          waiting.shift();
          clock.time = next.at;
          next.wake();
          for (let turn = 0; turn < 5; turn++) await Promise.resolve();
        }
        clock.time = to;
      },
    };
    return clock;
  }

  /** Requests that take slots at once, and when each went (the time its `take` resolved true). */
  function requests(pacer: RequestPacer, clock: { now(): number }, count: number) {
    const wentAt: number[] = [];
    const signal = new AbortController().signal;
    const done = Promise.all(
      Array.from({ length: count }, () => pacer.take(signal).then((slot) => slot.taken && wentAt.push(clock.now()))),
    );
    return { wentAt, done };
  }

  it.each([
    {
      name: '5 a second, a hold of 3 s at 100 ms: the requests waiting go after it, still 220 ms apart',
      rate: 5,
      holdAt: 100,
      holdMs: 3_000,
      wentAt: [3_100, 3_320, 3_540],
    },
    {
      name: '5 a second, a hold shorter than the queue: a slot after it keeps its time, one within it moves',
      rate: 5,
      holdAt: 0,
      holdMs: 300,
      wentAt: [440, 660, 880],
    },
    {
      name: 'a hold of 0 changes nothing',
      rate: 5,
      holdAt: 0,
      holdMs: 0,
      wentAt: [220, 440, 660],
    },
  ])('$name', async ({ rate, holdAt, holdMs, wentAt }) => {
    const clock = steppedClock();
    const pacer = new RequestPacer(rate, clock);
    // The request that was answered with the Retry-After took the first slot.
    expect(await pacer.take(new AbortController().signal)).toEqual({ taken: true });
    const queued = requests(pacer, clock, 3);
    await clock.advance(holdAt);
    pacer.holdFor(holdMs);
    await clock.advance(10_000);
    await queued.done;
    expect(queued.wentAt).toEqual(wentAt);
  });

  it('with no rate, a request during a hold waits for its end; a longer hold after a shorter one wins, a shorter one does not shorten it', async () => {
    const clock = steppedClock();
    const pacer = new RequestPacer(null, clock);
    pacer.holdFor(1_000);
    pacer.holdFor(3_000);
    pacer.holdFor(500);
    const queued = requests(pacer, clock, 1);
    await clock.advance(10_000);
    await queued.done;
    expect(queued.wentAt).toEqual([3_000]);
  });

  it('a request waiting out a hold stops when its signal aborts', async () => {
    const pacer = new RequestPacer(null);
    pacer.holdFor(60_000);
    const waiting = new AbortController();
    let settled = false;
    const taken = pacer.take(waiting.signal).finally(() => (settled = true));
    // Held for a minute: a few turns of the event loop later it still waits (without the hold it went at once).
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    waiting.abort();
    expect(await taken).toEqual({ taken: false, heldForMs: null });
  });

  it('a hold that outlasts the send’s deadline: no slot taken, answered at once with the hold’s time left', async () => {
    const clock = steppedClock();
    const pacer = new RequestPacer(5, clock);
    const signal = new AbortController().signal;
    expect(await pacer.take(signal)).toEqual({ taken: true });
    pacer.holdFor(8_000);
    expect(await pacer.take(signal, 5_000)).toEqual({ taken: false, heldForMs: 8_000 });
    expect(clock.now()).toBe(0);
    // A request with time enough goes when the hold ends: the one turned away took no slot.
    const queued = requests(pacer, clock, 1);
    await clock.advance(10_000);
    await queued.done;
    expect(queued.wentAt).toEqual([8_000]);
  });

  it('a request already waiting for its slot when a hold past its deadline comes: told at its slot, with the time left', async () => {
    const clock = steppedClock();
    const pacer = new RequestPacer(5, clock);
    const signal = new AbortController().signal;
    await pacer.take(signal);
    // Its slot is at 220 ms; at 100 ms the provider asks for 8 s, and its deadline is at 5 s.
    const waiting = pacer.take(signal, 5_000);
    await clock.advance(100);
    pacer.holdFor(8_000);
    await clock.advance(220);
    expect(await waiting).toEqual({ taken: false, heldForMs: 7_880 });
  });
});
