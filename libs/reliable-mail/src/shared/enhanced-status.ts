/** RFC 3463 X.1.1 bad mailbox, X.1.2 bad domain, X.1.3 bad syntax, X.1.6 moved: the address is wrong for good. */
const HARD_BOUNCE_STATUSES = new Set(['5.1.1', '5.1.2', '5.1.3', '5.1.6']);

/**
 * Whether an RFC 3463 status (`5.1.1`) says the address does not exist: from an SMTP reply or a DSN alike, so that a
 * refusal at send time and a bounce reported later suppress the same addresses.
 */
export function isHardBounceStatus(status: string | null): boolean {
  return status !== null && HARD_BOUNCE_STATUSES.has(status);
}
