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
 *
 * A provider's Retry-After (`holdFor`) holds back every request of the transport object not made yet, those already
 * waiting for a slot included: one whose slot falls within the hold takes a new one after it. A request whose slot
 * would come after its send's deadline takes none and is told at once, rather than wait for the deadline and make
 * no request all the same. With no rate (`null`), the pacer only holds.
 */
export class RequestPacer {
  private nextSlotAt = -Infinity;
  /** Until when no request may be made (a provider's Retry-After), on the clock's time. */
  private heldUntil = -Infinity;
  private readonly intervalMs: number;

  constructor(
    requestsPerSecond: number | null,
    private readonly clock: PacerClock = realClock,
  ) {
    this.intervalMs = requestsPerSecond === null ? 0 : Math.ceil(SECOND_WITH_MARGIN_MS / requestsPerSecond);
  }

  /**
   * Waits for the request's slot. `msLeft` is the time left before the send's deadline: a slot after it (a hold
   * that outlasts it) is not taken, and the answer says at once how long until the next one could be.
   */
  async take(signal: AbortSignal, msLeft = Infinity): Promise<PacedSlot> {
    const deadline = this.clock.now() + msLeft;
    for (;;) {
      const now = this.clock.now();
      const slotAt = Math.max(now, this.nextSlotAt);
      if (slotAt >= deadline) return { taken: false, heldForMs: Math.ceil(slotAt - now) };
      this.nextSlotAt = slotAt + this.intervalMs;
      await this.clock.pause(slotAt - now, signal);
      if (signal.aborted) return { taken: false, heldForMs: null };
      // A hold that came while this request waited for its slot: it takes a slot after the hold.
      if (slotAt >= this.heldUntil) return { taken: true };
    }
  }

  /** Makes no request for `ms` from now: a provider's Retry-After, which `retryAfterMs` read and bounded. */
  holdFor(ms: number): void {
    this.heldUntil = Math.max(this.heldUntil, this.clock.now() + ms);
    this.nextSlotAt = Math.max(this.nextSlotAt, this.heldUntil);
  }
}

/**
 * What a request's wait came to: its slot, or none; then `heldForMs`, how long until a slot after the send's
 * deadline, or null when the signal aborted the wait (the deadline, or the app's shutdown).
 */
export type PacedSlot = { taken: true } | { taken: false; heldForMs: number | null };
