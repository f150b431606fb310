import { setTimeout as sleep } from 'node:timers/promises';

/** The time a pacer keeps: the real one, or a test's. */
export interface PacerClock {
  now(): number;
  /** Waits `ms`, or less when `signal` aborts first. */
  pause(ms: number, signal: AbortSignal): Promise<void>;
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  // An abort ends the wait early; it is not an error here.
  return sleep(ms, undefined, { signal }).catch(() => undefined);
}

const realClock: PacerClock = { now: () => performance.now(), pause };

/**
 * A second and a tenth, shared among the rate's requests: a timer may fire a millisecond early, and the network
 * may bring two requests to the provider closer together than they left.
 */
const SECOND_WITH_MARGIN_MS = 1_100;

/**
 * Spaces every request of one transport object at least `1000 / requestsPerSecond` ms apart (plus a tenth): Resend
 * limits a team to so many requests a second and answers 429 beyond. Each request takes the next free slot, so two
 * mails sent in many requests share the rate instead of doubling it. A slot whose send gave up (its deadline) is not
 * given back: the rate is never exceeded, only left unused for a moment. Other processes sending with the team's
 * key are not counted: their 429s slow the lane down like any other.
 */
export class RequestPacer {
  private nextSlotAt = -Infinity;
  private readonly intervalMs: number;

  constructor(
    requestsPerSecond: number,
    private readonly clock: PacerClock = realClock,
  ) {
    this.intervalMs = Math.ceil(SECOND_WITH_MARGIN_MS / requestsPerSecond);
  }

  /** Waits for the request's slot: false when `signal` aborted first, and the request is not to be made. */
  async take(signal: AbortSignal): Promise<boolean> {
    const now = this.clock.now();
    const slotAt = Math.max(now, this.nextSlotAt);
    this.nextSlotAt = slotAt + this.intervalMs;
    await this.clock.pause(slotAt - now, signal);
    return !signal.aborted;
  }
}
