import { describe, expect, it } from '@jest/globals';
import { LaneThrottle, type SendSignal } from './lane-throttle.js';

const t0 = 1_000_000;

describe('LaneThrottle: a rate limit', () => {
  it.each([
    { name: 'no limit grants all', rate: null, wanted: 50, expected: 50 },
    { name: 'a full bucket grants one second worth', rate: 10, wanted: 50, expected: 10 },
    { name: 'fewer wanted than the bucket holds', rate: 10, wanted: 3, expected: 3 },
    { name: 'a rate below one still grants one after a second', rate: 0.5, wanted: 5, expected: 0 },
  ])('$name', ({ rate, wanted, expected }) => {
    expect(new LaneThrottle(rate, t0).take(wanted, t0)).toBe(expected);
  });

  it('a rate below one grants one once a second has passed, never zero for good', () => {
    const throttle = new LaneThrottle(0.5, t0);
    expect(throttle.take(5, t0)).toBe(0);
    expect(throttle.take(5, t0 + 1_000)).toBe(1);
  });

  it('refills at the rate, never past one second worth, and takes back what a claim did not use', () => {
    const throttle = new LaneThrottle(10, t0);
    expect(throttle.take(10, t0)).toBe(10);
    expect(throttle.take(1, t0)).toBe(0);
    expect(throttle.waitMs(t0)).toBe(100);
    expect(throttle.take(10, t0 + 500)).toBe(5);
    throttle.giveBack(2);
    expect(throttle.take(10, t0 + 500)).toBe(2);
    expect(throttle.take(50, t0 + 60_000)).toBe(10);
  });
});

describe('LaneThrottle: back-pressure', () => {
  it('a slow-down pauses the lane for 1 s, then it probes with one send at a time until one goes through', () => {
    const throttle = new LaneThrottle(null, t0);
    throttle.record('slow-down', t0);
    expect(throttle.isPaused(t0 + 999)).toBe(true);
    expect(throttle.take(8, t0 + 999)).toBe(0);
    expect(throttle.waitMs(t0 + 400)).toBe(600);
    expect(throttle.pausedFor).toEqual({ until: new Date(t0 + 1_000), reason: 'slow-down', repeats: 1 });
    expect(throttle.take(8, t0 + 1_000)).toBe(1);
    throttle.record('ok', t0 + 1_100);
    expect(throttle.pausedFor).toBeNull();
    expect(throttle.take(8, t0 + 1_100)).toBe(8);
  });

  it('each pause without a send in between doubles, up to a minute', () => {
    const throttle = new LaneThrottle(null, t0);
    const lengths: number[] = [];
    let now = t0;
    for (let pause = 0; pause < 9; pause++) {
      throttle.record('outage', now);
      const { until } = throttle.pausedFor!;
      lengths.push(until.getTime() - now);
      now = until.getTime();
    }
    expect(lengths).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
  });

  it('sends already under way when the lane paused do not lengthen the pause', () => {
    const throttle = new LaneThrottle(null, t0);
    throttle.record('outage', t0);
    throttle.record('outage', t0 + 10);
    throttle.record('slow-down', t0 + 20);
    expect(throttle.pausedFor).toEqual({ until: new Date(t0 + 1_000), reason: 'outage', repeats: 1 });
  });

  it('connection failures pause the lane only the third time in a row, and a send that goes through resets them', () => {
    const throttle = new LaneThrottle(null, t0);
    throttle.record('connection-failure', t0);
    throttle.record('connection-failure', t0);
    throttle.record('ok', t0);
    throttle.record('connection-failure', t0);
    throttle.record('connection-failure', t0);
    expect(throttle.isPaused(t0)).toBe(false);
    throttle.record('connection-failure', t0);
    expect(throttle.pausedFor).toMatchObject({ reason: 'connection-failure', repeats: 1 });
  });

  it.each([
    { name: 'a Retry-After longer than the pause: the pause lasts it', retryAfterMs: 3_000, repeats: 0, length: 3_000 },
    { name: 'a Retry-After shorter than the pause: the pause as it is', retryAfterMs: 500, repeats: 0, length: 1_000 },
    {
      name: 'a third pause in a row (4 s) and a Retry-After of 3 s: 4 s',
      retryAfterMs: 3_000,
      repeats: 2,
      length: 4_000,
    },
    { name: 'no Retry-After (0): the pause as it is', retryAfterMs: 0, repeats: 0, length: 1_000 },
  ])('$name', ({ retryAfterMs, repeats, length }) => {
    const throttle = new LaneThrottle(null, t0);
    let now = t0;
    for (let pause = 0; pause < repeats; pause++) {
      throttle.record('slow-down', now);
      now = throttle.pausedFor!.until.getTime();
    }
    throttle.record('slow-down', now, retryAfterMs);
    expect(throttle.pausedFor).toEqual({ until: new Date(now + length), reason: 'slow-down', repeats: repeats + 1 });
    expect(throttle.take(8, now + length - 1)).toBe(0);
    expect(throttle.take(8, now + length)).toBe(1);
  });

  it('a send under way when the lane paused, asked to wait longer, makes the pause that long; a shorter ask does not shorten it', () => {
    const throttle = new LaneThrottle(null, t0);
    throttle.record('slow-down', t0);
    throttle.record('slow-down', t0 + 100, 3_000);
    expect(throttle.pausedFor).toEqual({ until: new Date(t0 + 3_100), reason: 'slow-down', repeats: 1 });
    throttle.record('outage', t0 + 200, 500);
    expect(throttle.pausedFor).toEqual({ until: new Date(t0 + 3_100), reason: 'slow-down', repeats: 1 });
  });
});

describe('LaneThrottle: what its log says', () => {
  type Step = { signal: SendSignal; at: number };
  const paused = (reason: string, at: number, length = 1_000) => ({
    kind: 'paused',
    pause: { reason, until: new Date(t0 + at + length), repeats: 1 },
  });

  it.each<{ name: string; steps: Step[]; changes: unknown[] }>([
    {
      name: 'sends that go through: nothing',
      steps: [
        { signal: 'ok', at: 0 },
        { signal: 'ok', at: 10 },
      ],
      changes: [null, null],
    },
    {
      name: 'an outage of 10 s, probed four times: one change as it begins, one as a send goes through',
      steps: [
        { signal: 'outage', at: 0 },
        // Sends under way as the lane paused.
        { signal: 'outage', at: 10 },
        { signal: 'outage', at: 1_000 },
        { signal: 'outage', at: 3_000 },
        { signal: 'outage', at: 7_000 },
        { signal: 'ok', at: 15_000 },
      ],
      changes: [
        paused('outage', 0),
        null,
        null,
        null,
        null,
        { kind: 'resumed', reason: 'outage', pausedForMs: 15_000, failedProbes: 3 },
      ],
    },
    {
      name: 'a slow-down ended by the next send',
      steps: [
        { signal: 'slow-down', at: 0 },
        { signal: 'ok', at: 1_000 },
      ],
      changes: [paused('slow-down', 0), { kind: 'resumed', reason: 'slow-down', pausedForMs: 1_000, failedProbes: 0 }],
    },
    {
      name: 'two connection failures are no change; the third pauses',
      steps: [
        { signal: 'connection-failure', at: 0 },
        { signal: 'connection-failure', at: 10 },
        { signal: 'connection-failure', at: 20 },
      ],
      changes: [null, null, paused('connection-failure', 20)],
    },
    {
      name: 'a second trouble after a send went through is told again',
      steps: [
        { signal: 'outage', at: 0 },
        { signal: 'ok', at: 1_000 },
        { signal: 'outage', at: 5_000 },
      ],
      changes: [
        paused('outage', 0),
        { kind: 'resumed', reason: 'outage', pausedForMs: 1_000, failedProbes: 0 },
        paused('outage', 5_000),
      ],
    },
  ])('$name', ({ steps, changes }) => {
    const throttle = new LaneThrottle(null, t0);
    expect(steps.map(({ signal, at }) => throttle.record(signal, t0 + at))).toEqual(changes);
  });
});
