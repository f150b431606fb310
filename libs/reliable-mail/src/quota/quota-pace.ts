import type { SendQuotaPace } from '../outbox/sql/take-send-quota.js';

/** The share of a second's sends one take may grant after a quiet spell: a twentieth, at least 2. */
const BURST_SHARE = 1 / 20;
const LEAST_BURST = 2;
/**
 * How much later one send may reach the provider than another after their grants, and every second still hold no
 * more than the limit where the provider counts: the window puts the 21st grant at least 1,075 ms after the first,
 * so their sends are a second apart even when the first reaches the provider 75 ms later than the 21st does. Sends
 * start a fixed time after their grant (`GRANT_TO_SEND_MS`); what is left is how late a process gets to a timer and
 * its request to the provider: 2 ms at the median, 14 at the 90th percentile and 64 at the 99th in one run of
 * `npm run bench:quota` timestamped by hand (2026-12-03, the 2-core machine's load at 5-7; the bench prints only the
 * busiest second). With 50 ms allowed, the busiest second at SES held 21-23 requests for a limit of 20.
 */
export const JITTER_ALLOWANCE_MS = 75;

/**
 * How long after its grant, on the database's clock, a send of a rate-limited lane starts. The grants keep their
 * spacing at the provider only if each reaches its send after the same delay; what lies between varies: the take's
 * answer, then the claim, whose commit waits for its WAL flush (6 ms on average, 52-70 ms at worst: the claim's
 * `avgMs` and `maxMs` that `npm run bench` prints for the drain). Started as soon as its row was in hand, the sends of
 * one instance's grants could land in one second with those another instance was granted 100 ms earlier: rows were
 * in hand 1 to 176 ms after their grant, 99 % of them within 150 ms, in the same hand-timestamped run. Each starts at
 * grant + 150 ms instead, so that what spreads the sends is how late a process gets to its timer and its request,
 * which the window allows 75 ms for (`JITTER_ALLOWANCE_MS`): on a busy machine a second at the provider can still
 * hold one more than the limit. A row in hand later starts at once. A rate-limited lane's mail waits up to 150 ms
 * more than its row needs (less the take's and the claim's time), and the held row takes no send slot.
 */
export const GRANT_TO_SEND_MS = 150;

/** How many takes the clock mapping of `GrantClock` remembers. */
const CLOCK_SAMPLES = 32;

/**
 * When a grant's sends start on this instance's clock, from its time on the database's. Each take's answer comes
 * after its grant, so the answer's local time less the grant's database time is the clocks' difference plus the
 * answer's travel: the least of the last 32 is the difference plus the shortest travel, which a clock that is
 * stepped or drifts leaves within 32 takes.
 */
export class GrantClock {
  private readonly differences: number[] = [];

  /** Notes a take granted at `grantedAtMs` (the database's clock) whose answer came at `answeredAtMs` (this one's). */
  note(grantedAtMs: number, answeredAtMs: number): void {
    this.differences.push(answeredAtMs - grantedAtMs);
    if (this.differences.length > CLOCK_SAMPLES) this.differences.shift();
  }

  /** When the sends of a grant made at `grantedAtMs` start, on this instance's clock; after at least one `note`. */
  sendsStartAt(grantedAtMs: number): number {
    return grantedAtMs + Math.min(...this.differences) + GRANT_TO_SEND_MS;
  }
}

/**
 * The pace that keeps any second (from any moment, not only the clock's seconds) within `perSecond` sends, as the
 * take's window does (see take-send-quota.ts): at most ⌊perSecond⌋ sends in 1 s + 75 ms, which is 18.6 a second
 * for 20 and 465 for 500. Below one a second, one send in 1/perSecond s + 75 ms: one every 2.075 s for 0.5. The bucket
 * spreads them: it refills at the rate itself, and holds a twentieth of a second's sends (at least 2, so that a take
 * that comes a little late does not lose the token it could not hold), which is what a take grants after a quiet
 * spell: 25 at 500 a second, 2 at 20, rather than a whole second's worth at once.
 */
export function paceFor(perSecond: number): SendQuotaPace {
  return {
    burst: Math.max(LEAST_BURST, Math.ceil(perSecond * BURST_SHARE)),
    refillPerSecond: perSecond,
    windowLimit: Math.max(1, Math.floor(perSecond)),
    windowMs: 1_000 * Math.max(1, 1 / perSecond) + JITTER_ALLOWANCE_MS,
  };
}
