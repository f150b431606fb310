import { isStorableDate } from '../database/storable.js';
import type { SendOutcome } from '../transport/mail-transport.interface.js';

// A transport is any object the app gives (`transport`), so what its send resolves to is checked where it enters
// the dispatcher: a malformed outcome would otherwise throw while the settlement is decided, or fail the settle
// statement of every row in its batch, and leave its row `sending` until its lease ends.

/** What a field must be, or null when it is right. */
type Check = (value: unknown) => string | null;
type Fields = Record<string, unknown>;

const isObject = (value: unknown): value is Fields =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const check =
  (holds: (value: unknown) => boolean, expected: string): Check =>
  (value) =>
    holds(value) ? null : `must be ${expected}`;
const optional =
  (inner: Check): Check =>
  (value) =>
    value === undefined ? null : inner(value);

const text = check((value) => typeof value === 'string', 'a string');
const textOrNull = check((value) => value === null || typeof value === 'string', 'a string or null');
const flag = check((value) => typeof value === 'boolean', 'a boolean');
/** An SMTP reply code or an HTTP status: three digits. */
const replyCode = check(
  (value) => value === null || (Number.isInteger(value) && (value as number) >= 100 && (value as number) <= 999),
  'a three-digit reply code or null',
);
const acceptedAt = check(
  (value) => value === null || isStorableDate(value),
  'a valid Date within the years 1 to 9999, or null',
);
const retryAfterMs = check(
  (value) => typeof value === 'number' && Number.isFinite(value) && value >= 0,
  'a finite number of milliseconds >= 0',
);
const status = check(
  (value) => value === 'accepted' || value === 'deferred' || value === 'refused' || value === 'unknown',
  "one of 'accepted', 'deferred', 'refused', 'unknown'",
);

/** The fields of each kind of `SendOutcome`, and of a `RecipientOutcome`; other fields are left alone. */
const ATTEMPTED: Record<string, Check> = {
  reply: textOrNull,
  providerMessageId: textOrNull,
  providerRequestId: optional(textOrNull),
  acceptedAt: optional(acceptedAt),
  deduplicatedByKey: optional(flag),
  slowDown: flag,
  stoppedAtShutdown: optional(flag),
  retryAfterMs: optional(retryAfterMs),
};
const OUTAGE: Record<string, Check> = {
  replyCode,
  enhancedStatus: textOrNull,
  reply: text,
  providerRequestId: optional(textOrNull),
  retryAfterMs: optional(retryAfterMs),
};
const RECIPIENT: Record<string, Check> = {
  address: text,
  status,
  replyCode,
  enhancedStatus: textOrNull,
  reply: textOrNull,
  perRecipient: flag,
  providerMessageId: optional(textOrNull),
};

function flawIn(value: Fields, fields: Record<string, Check>, path: string): string | null {
  for (const [field, fieldCheck] of Object.entries(fields)) {
    const flaw = fieldCheck(value[field]);
    if (flaw) return `${path}${field} ${flaw}`;
  }
  return null;
}

/** Every address of the attempt's envelope reported once, and no other. */
function recipientsFlaw(reported: unknown, envelope: readonly string[]): string | null {
  if (!Array.isArray(reported)) return 'recipients must be an array';
  const expected = new Set(envelope);
  const seen = new Set<string>();
  for (const [index, entry] of reported.entries()) {
    const path = `recipients[${index}]`;
    if (!isObject(entry)) return `${path} must be an object`;
    const flaw = flawIn(entry, RECIPIENT, `${path}.`);
    if (flaw) return flaw;
    const address = entry.address as string;
    if (!expected.has(address)) return `${path}.address is not a recipient of this attempt`;
    if (seen.has(address)) return `${path}.address is reported twice`;
    seen.add(address);
  }
  const missing = envelope.length - seen.size;
  return missing === 0 ? null : `recipients leave out ${missing} of the attempt's ${envelope.length} recipients`;
}

/**
 * What is wrong with what a transport's send resolved to, naming the field (`recipients[1].replyCode must be a
 * three-digit reply code or null`); null when it is a `SendOutcome` for `envelope` (`OutboundMessage.recipients`).
 */
export function outcomeFlaw(outcome: unknown, envelope: readonly string[]): string | null {
  if (!isObject(outcome)) return 'the outcome must be an object';
  if (outcome.kind === 'outage') return flawIn(outcome, OUTAGE, '');
  if (outcome.kind !== 'attempted') return "kind must be 'attempted' or 'outage'";
  return flawIn(outcome, ATTEMPTED, '') ?? recipientsFlaw(outcome.recipients, envelope);
}

/**
 * What a malformed outcome counts as: `unknown` for every recipient, since the transport may have sent the message.
 * The row is retried (with the same Message-ID) until its attempts or age run out, and the attempt is recorded so.
 */
export function malformedOutcome(envelope: readonly string[], flaw: string): SendOutcome {
  const reason = `the transport reported a malformed outcome: ${flaw}`;
  return {
    kind: 'attempted',
    recipients: envelope.map((address) => ({
      address,
      status: 'unknown',
      replyCode: null,
      enhancedStatus: null,
      reply: reason,
      perRecipient: false,
    })),
    reply: null,
    providerMessageId: null,
    slowDown: false,
  };
}
