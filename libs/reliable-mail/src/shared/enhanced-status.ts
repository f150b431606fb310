/** RFC 3463 X.1.1 bad mailbox, X.1.2 bad domain, X.1.3 bad syntax, X.1.6 moved: the address is wrong for good. */
const HARD_BOUNCE_STATUSES = new Set(['5.1.1', '5.1.2', '5.1.3', '5.1.6']);

/**
 * Whether an RFC 3463 status (`5.1.1`) says the address does not exist: from an SMTP reply or a DSN alike, so that a
 * refusal at send time and a bounce reported later suppress the same addresses.
 */
export function isHardBounceStatus(status: string | null): boolean {
  return status !== null && HARD_BOUNCE_STATUSES.has(status);
}

/**
 * An enhanced status (RFC 3463): class 2, 4 or 5, a subject and a detail of 1 to 3 digits each, `5.1.1`. As a
 * pattern's source, for the patterns that find one in a server's reply or a DSN's text.
 */
export const ENHANCED_STATUS_SOURCE = String.raw`[245]\.\d{1,3}\.\d{1,3}`;

const ENHANCED_STATUS = new RegExp(`^${ENHANCED_STATUS_SOURCE}$`);

/** Whether `value` is an enhanced status and nothing else. */
export const isEnhancedStatus = (value: string): boolean => ENHANCED_STATUS.test(value);
