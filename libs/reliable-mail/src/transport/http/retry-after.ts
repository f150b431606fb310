/**
 * The longest wait a provider's Retry-After is honoured for: an hour, the retry policy's default longest delay. A
 * longer one (a daily quota's reset, or a broken header) would hold the lane past any retry; the lane's probe after an
 * hour asks again, and is told again.
 */
export const LONGEST_RETRY_AFTER_MS = 3_600_000;

/**
 * The wait an HTTP `Retry-After` header asks for (RFC 9110 §10.2.3), in ms from `now` (ms since the epoch, for the
 * HTTP-date form): delay-seconds or an HTTP-date, at most `LONGEST_RETRY_AFTER_MS`; undefined when there is no such
 * header or it says nothing that can be read.
 */
export function retryAfterMs(header: string | null | undefined, now: number): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  let waitMs: number;
  if (/^\d+(\.\d+)?$/.test(value)) waitMs = Number(value) * 1_000;
  else {
    const at = Date.parse(value);
    // Only the HTTP-date forms (a weekday name first), not whatever else Date.parse reads.
    if (!/^[A-Za-z]{3}/.test(value) || Number.isNaN(at)) return undefined;
    waitMs = at - now;
  }
  return Math.min(Math.max(0, Math.ceil(waitMs)), LONGEST_RETRY_AFTER_MS);
}
