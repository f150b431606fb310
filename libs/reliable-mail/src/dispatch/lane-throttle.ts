/** What one send tells the lane about the server's state. */
export type SendSignal = 'ok' | 'slow-down' | 'connection-failure';

const CONNECTION_FAILURES_BEFORE_PAUSE = 3;
const FIRST_PAUSE_MS = 1_000;
const LONGEST_PAUSE_MS = 60_000;

/**
 * A lane's pace: a token bucket for its rate limit, and back-pressure. A "slow down" reply (421, 454, 4.7.x) or a
 * run of connection failures pauses the whole lane, for twice as long at each repetition, so that the server's
 * trouble is paid for by one message rather than by the attempts of every message in the backlog.
 */
export class LaneThrottle {
  private tokens: number;
  private refilledAt: number;
  private pausedUntil = 0;
  private pauses = 0;
  private connectionFailures = 0;

  constructor(
    private readonly ratePerSecond: number | null,
    now: number,
  ) {
    this.tokens = ratePerSecond ?? 0;
    this.refilledAt = now;
  }

  /** Takes up to `wanted` sends that may start now. */
  take(wanted: number, now: number): number {
    if (now < this.pausedUntil) return 0;
    if (this.ratePerSecond === null) return wanted;
    this.refill(now);
    const granted = Math.min(wanted, Math.floor(this.tokens));
    this.tokens -= granted;
    return granted;
  }

  /** Returns sends taken but not used (the claim found fewer due rows). */
  giveBack(unused: number): void {
    if (this.ratePerSecond !== null) this.tokens += unused;
  }

  /** How long until `take` can grant a send. */
  waitMs(now: number): number {
    const paused = Math.max(0, this.pausedUntil - now);
    if (this.ratePerSecond === null) return paused;
    this.refill(now);
    const refill = this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.ratePerSecond) * 1000);
    return Math.max(paused, refill);
  }

  /** Whether the lane is paused by back-pressure. */
  isPaused(now: number): boolean {
    return now < this.pausedUntil;
  }

  record(signal: SendSignal, now: number): void {
    if (signal === 'ok') {
      this.pauses = 0;
      this.connectionFailures = 0;
      return;
    }
    if (signal === 'connection-failure' && ++this.connectionFailures < CONNECTION_FAILURES_BEFORE_PAUSE) return;
    this.connectionFailures = 0;
    const pause = Math.min(LONGEST_PAUSE_MS, FIRST_PAUSE_MS * 2 ** this.pauses++);
    this.pausedUntil = Math.max(this.pausedUntil, now + pause);
  }

  private refill(now: number): void {
    const rate = this.ratePerSecond!;
    // A bucket of one second's worth: a lane idle for a while may burst that much and no more.
    this.tokens = Math.min(Math.max(rate, 1), this.tokens + ((now - this.refilledAt) / 1000) * rate);
    this.refilledAt = now;
  }
}
