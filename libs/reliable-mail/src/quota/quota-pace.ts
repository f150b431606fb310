import type { SendQuotaPace } from '../outbox/sql/take-send-quota.js';

/** The share of a second's sends one take may grant after a quiet spell: a twentieth, at least 2. */
const BURST_SHARE = 1 / 20;
const LEAST_BURST = 2;
/**
 * How much later one send may reach the provider than another after their grants, and every second still hold no
 * more than the limit where the provider counts: 21 grants 50 ms apart fit in a second with a millisecond to spare
 * for the first. A grant reaches its lane after the take's answer (which came 0-52 ms after the grant with two
 * pools taking for 20 a second on a busy 2-core machine), and its send after a claim, whose commit waits for its
 * WAL flush, and a request.
 */
export const JITTER_ALLOWANCE_MS = 50;

/**
 * The pace that keeps any second (from any moment, not only the clock's seconds) within `perSecond` sends, as the
 * take's window does (see take-send-quota.ts): at most ⌊perSecond⌋ sends in 1 s + 50 ms, which is 19.05 a second
 * for 20 and 476 for 500. Below one a second, one send in 1/perSecond s + 50 ms: one every 2.05 s for 0.5. The bucket
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
