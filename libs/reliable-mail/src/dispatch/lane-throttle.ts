/**
 * What one send tells the lane about its server: it took mail (`ok`), it asked to slow down, the connection failed
 * mid-conversation, or it refused the session altogether (an outage: connection refused, a 5yz greeting, a
 * refused login or sender).
 */
export type SendSignal = 'ok' | 'slow-down' | 'connection-failure' | 'outage';

const CONNECTION_FAILURES_BEFORE_PAUSE = 3;
const FIRST_PAUSE_MS = 1_000;
const LONGEST_PAUSE_MS = 60_000;

/** Why a lane is paused, for its logs and the health indicator. */
export interface LanePause {
  until: Date;
  reason: Exclude<SendSignal, 'ok'>;
  /** Pauses in a row without a send that went through: the next one is twice as long, up to a minute. */
  repeats: number;
}

/**
 * A lane's trouble as its log tells it, one line per change: a pause begins while the lane ran freely, or a send
 * went through after one, whatever the pauses and failed probes between.
 */
export type LaneChange =
  | { kind: 'paused'; pause: LanePause }
  | { kind: 'resumed'; reason: LanePause['reason']; pausedForMs: number; failedProbes: number };

/**
 * A lane's pace: a token bucket for its rate limit, and back-pressure. A "slow down" reply, an outage or a run of
 * connection failures pauses the whole lane, for twice as long at each repetition (capped), so that the server's
 * trouble is paid for by one message rather than by the attempts of every message in the backlog, and at least as
 * long as the server asked (a Retry-After). After a pause the lane sends one message at a time until one goes through.
 */
export class LaneThrottle {
  private tokens: number;
  private refilledAt: number;
  private pause: LanePause | null = null;
  /** When the first pause of the trouble under way began (the pauses and probes since do not move it). */
  private pausedSince = 0;
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
    if (this.isPaused(now)) return 0;
    // Probing: after a pause, one message finds out whether the server is back.
    const allowed = this.pause ? Math.min(wanted, 1) : wanted;
    if (this.ratePerSecond === null) return allowed;
    this.refill(now);
    const granted = Math.min(allowed, Math.floor(this.tokens));
    this.tokens -= granted;
    return granted;
  }

  /** Returns sends taken but not used (the claim found fewer due rows). */
  giveBack(unused: number): void {
    if (this.ratePerSecond !== null) this.tokens += unused;
  }

  /** How long until `take` can grant a send. */
  waitMs(now: number): number {
    const paused = this.pause ? Math.max(0, this.pause.until.getTime() - now) : 0;
    if (this.ratePerSecond === null) return paused;
    this.refill(now);
    const refill = this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.ratePerSecond) * 1000);
    return Math.max(paused, refill);
  }

  /** Whether the lane is paused by back-pressure. */
  isPaused(now: number): boolean {
    return this.pause !== null && now < this.pause.until.getTime();
  }

  /** The current (or last, while probing) pause, or null when the lane runs freely. */
  get pausedFor(): LanePause | null {
    return this.pause && { ...this.pause };
  }

  /**
   * Records what a send said about the server; `retryAfterMs`, how long it asked the lane to wait (a Retry-After,
   * bounded to `LONGEST_RETRY_AFTER_MS` where it came in: `retryAfterMs` for a provider's header, the outcome check
   * for a transport's outcome), makes the pause at least that long. Returns the change to log, if any.
   */
  record(signal: SendSignal, now: number, retryAfterMs = 0): LaneChange | null {
    if (signal === 'ok') {
      const ended = this.pause;
      this.pause = null;
      this.connectionFailures = 0;
      return ended
        ? {
            kind: 'resumed',
            reason: ended.reason,
            pausedForMs: now - this.pausedSince,
            failedProbes: ended.repeats - 1,
          }
        : null;
    }
    if (signal === 'connection-failure' && ++this.connectionFailures < CONNECTION_FAILURES_BEFORE_PAUSE) return null;
    this.connectionFailures = 0;
    const askedUntil = now + retryAfterMs;
    // Sends that were already under way when the lane paused report in as well: they do not lengthen it, unless one
    // was asked to wait longer than the pause lasts.
    if (this.isPaused(now)) {
      if (askedUntil > this.pause!.until.getTime()) this.pause = { ...this.pause!, until: new Date(askedUntil) };
      return null;
    }
    const repeats = (this.pause?.repeats ?? 0) + 1;
    const length = Math.min(LONGEST_PAUSE_MS, FIRST_PAUSE_MS * 2 ** (repeats - 1));
    this.pause = { until: new Date(Math.max(now + length, askedUntil)), reason: signal, repeats };
    if (repeats > 1) return null;
    this.pausedSince = now;
    return { kind: 'paused', pause: { ...this.pause } };
  }

  private refill(now: number): void {
    const rate = this.ratePerSecond!;
    // A bucket of one second's worth: a lane idle for a while may burst that much and no more.
    this.tokens = Math.min(Math.max(rate, 1), this.tokens + ((now - this.refilledAt) / 1000) * rate);
    this.refilledAt = now;
  }
}
