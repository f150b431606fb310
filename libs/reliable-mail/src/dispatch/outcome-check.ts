import { cutAtWord, isStorableDate, storableIdentifier } from '../database/storable.js';
import { isEnhancedStatus } from '../shared/enhanced-status.js';
import { keptReply } from '../shared/logged-reply.js';
import { TRANSPORT_NAME_PATTERN } from '../transport/failover/failover-transport.js';
import { LONGEST_RETRY_AFTER_MS } from '../transport/http/retry-after.js';
import type { RecipientOutcome, SendOutcome } from '../transport/mail-transport.interface.js';

// A transport is any object the app gives (`transport`), so what its send resolves to is read where it enters the
// dispatcher, once, into a copy of its own: a malformed outcome would otherwise throw while the settlement is decided,
// and anything else the transport's objects carry (a BigInt, a cycle, a getter or toJSON that throws) would reach
// the settle's JSON and fail it, with every row of its batch.

/** What a field must be, or null when it is right. */
type Check = (value: unknown) => string | null;
type Fields = Record<string, unknown>;

/**
 * How a field is read: `required`; `optional` (absent is fine, anything else must be right); or a `fact`, optional
 * too, that the provider reported about the request (its id, its time, its Retry-After): a wrong one is left out and
 * logged, and the recipients' verdict stands. Counting the whole outcome unknown for it would send the message again.
 */
interface Field {
  name: string;
  check: Check;
  kind: 'required' | 'optional' | 'fact';
  /** The value as the copy keeps it, before it is checked; the value itself when absent. */
  copy?: (value: unknown) => unknown;
}

const isObject = (value: unknown): value is Fields =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const check =
  (holds: (value: unknown) => boolean, expected: string): Check =>
  (value) =>
    holds(value) ? null : `must be ${expected}`;

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

/** A Retry-After pauses the lane that long: a custom transport's is bounded as a provider's header is. */
const retryAfterCopy = (value: unknown): unknown =>
  Number.isFinite(value) ? Math.min(value as number, LONGEST_RETRY_AFTER_MS) : value;

/** A transport's name as FailoverTransport gives them (`TRANSPORT_NAME_PATTERN`). */
const transportName = check(
  (value) => typeof value === 'string' && TRANSPORT_NAME_PATTERN.test(value),
  `a name such as FailoverTransport gives (${TRANSPORT_NAME_PATTERN.source})`,
);
/**
 * Text a transport gives as an enhanced status that is none (RFC 3463: `5.1.1`) is not kept, where it would go into
 * the attempt's record for each recipient: a megabyte did.
 */
const enhancedStatusCopy = (value: unknown): unknown =>
  typeof value === 'string' && !isEnhancedStatus(value) ? null : value;
/** A provider's id as the record and its events keep it: none when it is too long to look up (`storableIdentifier`). */
const providerIdCopy = (value: unknown): unknown => (typeof value === 'string' ? storableIdentifier(value) : value);

/** A reply as the attempt keeps it (`keptReply`). */
const replyCopy = (value: unknown): unknown => (typeof value === 'string' ? keptReply(value) : value);

/** A Date as its time alone: a subclass's own toJSON or toISOString stays behind. */
function dateCopy(value: unknown): unknown {
  if (!(value instanceof Date)) return value;
  try {
    return new Date(Date.prototype.getTime.call(value));
  } catch {
    // An object that only inherits from Date.prototype: not a Date at all.
    return new Date(Number.NaN);
  }
}

/** The fields of each kind of `SendOutcome`, and of a `RecipientOutcome`; no other field is copied. */
const ATTEMPTED: readonly Field[] = [
  { name: 'reply', check: textOrNull, kind: 'required', copy: replyCopy },
  { name: 'providerMessageId', check: textOrNull, kind: 'required', copy: providerIdCopy },
  { name: 'providerRequestId', check: textOrNull, kind: 'fact', copy: providerIdCopy },
  { name: 'acceptedAt', check: acceptedAt, kind: 'fact', copy: dateCopy },
  { name: 'deduplicatedByKey', check: flag, kind: 'optional' },
  { name: 'slowDown', check: flag, kind: 'required' },
  { name: 'stoppedAtShutdown', check: flag, kind: 'optional' },
  { name: 'heldBack', check: flag, kind: 'optional' },
  { name: 'retryAfterMs', check: retryAfterMs, kind: 'fact', copy: retryAfterCopy },
  { name: 'transport', check: transportName, kind: 'fact' },
];
const OUTAGE: readonly Field[] = [
  { name: 'replyCode', check: replyCode, kind: 'required' },
  { name: 'enhancedStatus', check: textOrNull, kind: 'required', copy: enhancedStatusCopy },
  { name: 'reply', check: text, kind: 'required', copy: replyCopy },
  { name: 'providerRequestId', check: textOrNull, kind: 'fact', copy: providerIdCopy },
  { name: 'retryAfterMs', check: retryAfterMs, kind: 'fact', copy: retryAfterCopy },
  { name: 'transport', check: transportName, kind: 'fact' },
];
const RECIPIENT: readonly Field[] = [
  { name: 'address', check: text, kind: 'required' },
  { name: 'status', check: status, kind: 'required' },
  { name: 'replyCode', check: replyCode, kind: 'required' },
  { name: 'enhancedStatus', check: textOrNull, kind: 'required', copy: enhancedStatusCopy },
  { name: 'reply', check: textOrNull, kind: 'required', copy: replyCopy },
  { name: 'perRecipient', check: flag, kind: 'required' },
  { name: 'providerMessageId', check: textOrNull, kind: 'fact', copy: providerIdCopy },
];

/**
 * Copies into `into` the fields of `source` that `fields` names, each read once; returns the flaw of the first
 * required or optional one that is wrong, or null. A wrong fact is left out and named in `dropped`.
 */
function copyFields(source: Fields, fields: readonly Field[], path: string, into: Fields, dropped: string[]) {
  for (const { name, check: fieldCheck, kind, copy } of fields) {
    const read = source[name];
    if (read === undefined && kind !== 'required') continue;
    const value = copy ? copy(read) : read;
    const flaw = fieldCheck(value);
    if (flaw === null) into[name] = value;
    else if (kind === 'fact') dropped.push(`${path}${name} ${flaw}`);
    else return `${path}${name} ${flaw}`;
  }
  return null;
}

/** A copy of each recipient's outcome, every address of the attempt's envelope once and no other; or the flaw. */
function recipientsOf(reported: unknown, envelope: readonly string[], dropped: string[]): RecipientOutcome[] | string {
  if (!Array.isArray(reported)) return 'recipients must be an array';
  const length = reported.length;
  if (length > envelope.length)
    return `recipients report ${length} entries for the attempt's ${envelope.length} recipients`;
  const waiting = new Set(envelope);
  const recipients: RecipientOutcome[] = [];
  for (let index = 0; index < length; index++) {
    const entry: unknown = reported[index];
    const path = `recipients[${index}]`;
    if (!isObject(entry)) return `${path} must be an object`;
    const recipient: Fields = {};
    const flaw = copyFields(entry, RECIPIENT, `${path}.`, recipient, dropped);
    if (flaw) return flaw;
    const address = recipient.address as string;
    if (!waiting.delete(address))
      return envelope.includes(address)
        ? `${path}.address is reported twice`
        : `${path}.address is not a recipient of this attempt`;
    recipients.push(recipient as unknown as RecipientOutcome);
  }
  return waiting.size === 0
    ? recipients
    : `recipients leave out ${waiting.size} of the attempt's ${envelope.length} recipients`;
}

function read(outcome: unknown, envelope: readonly string[], dropped: string[]): SendOutcome | string {
  if (!isObject(outcome)) return 'the outcome must be an object';
  const kind = outcome.kind;
  const copy: Fields = { kind };
  if (kind === 'outage') return copyFields(outcome, OUTAGE, '', copy, dropped) ?? (copy as SendOutcome);
  if (kind !== 'attempted') return "kind must be 'attempted' or 'outage'";
  const flaw = copyFields(outcome, ATTEMPTED, '', copy, dropped);
  if (flaw) return flaw;
  const recipients = recipientsOf(outcome.recipients, envelope, dropped);
  if (typeof recipients === 'string') return recipients;
  copy.recipients = recipients;
  return copy as SendOutcome;
}

/** `value` as text for a log or a reason, whatever it is: even its conversion to a string may throw. */
export function shownSafely(value: unknown): string {
  try {
    return cutAtWord(String(value), 1_000);
  } catch {
    return 'a value that cannot be shown as text';
  }
}

/** What the dispatcher makes of a transport's outcome. */
export interface ReadOutcome {
  /** A copy holding only the fields of a `SendOutcome`; when the outcome was malformed, `malformedOutcome`'s. */
  outcome: SendOutcome;
  /**
   * What is wrong with the outcome, naming the field (`recipients[1].replyCode must be a three-digit reply code or
   * null`); null when it is a `SendOutcome` for the envelope.
   */
  flaw: string | null;
  /** The facts left out as wrong (`acceptedAt must be a valid Date …`), the outcome kept without them. */
  dropped: string[];
}

/**
 * Reads what a transport's send resolved to, for `envelope` (`OutboundMessage.recipients`), into a copy that holds
 * only the fields the dispatcher knows: nothing else the transport put there is stored. Never throws: an outcome
 * that throws when it is read (a getter, a Proxy) is malformed.
 */
export function readOutcome(outcome: unknown, envelope: readonly string[]): ReadOutcome {
  const dropped: string[] = [];
  let result: SendOutcome | string;
  try {
    result = read(outcome, envelope, dropped);
  } catch (error) {
    result = `reading the outcome threw: ${shownSafely(error)}`;
  }
  return typeof result === 'string'
    ? { outcome: malformedOutcome(envelope, result), flaw: result, dropped: [] }
    : { outcome: result, flaw: null, dropped };
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
