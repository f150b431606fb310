import { cutText, storableDateOrNull } from '../../database/storable.js';
import { FeedbackPayloadError } from '../../errors.js';
import { isHardBounceStatus } from '../../shared/enhanced-status.js';
import { MAX_REPLY_LENGTH } from '../../shared/logged-reply.js';
import { addressIn, type FeedbackItem, statusIn } from '../feedback-report.js';

// RFC 3464 delivery status notifications: the `message/delivery-status` part, a group of per-message fields, then
// a group per recipient, each in header syntax.

/** Header fields by lower-case name (the first of a repeated one), folded lines joined. */
export type HeaderFields = Map<string, string>;

/** The fields of a block in header syntax (RFC 5322 §2.2: a line starting with white space continues the last). */
export function headerFields(block: string): HeaderFields {
  const fields: HeaderFields = new Map();
  let last: string | null = null;
  for (const line of block.split(/\r?\n/)) {
    if (/^[ \t]/.test(line) && last !== null) {
      fields.set(last, `${fields.get(last)} ${line.trim()}`);
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    last = line.slice(0, colon).trim().toLowerCase();
    if (fields.has(last)) last = null;
    else fields.set(last, line.slice(colon + 1).trim());
  }
  return fields;
}

/** The header block of a message: everything before its first empty line. */
export function headerBlockOf(message: string): string {
  return message.split(/\r?\n\r?\n/, 1)[0];
}

/**
 * Bounds of a delivery-status part, since anyone can mail a DSN and each recipient group becomes a feedback row
 * that repeats the per-message facts. A genuine one reports the recipients of one SMTP transaction (at most
 * `maxRecipientsPerTransaction`, 100 by default) in a few hundred bytes each; with VERP, one. A part past either
 * bound is refused: 12,799 groups in 1 MB were 12,799 rows of 1 MB each, which ran 42 s and then failed.
 */
export const MAX_DELIVERY_STATUS_BYTES = 1_048_576;
export const MAX_RECIPIENT_GROUPS = 1_000;
/**
 * What each row repeats of the per-message group is cut to this many characters: a genuine one is a few lines
 * (Reporting-MTA, Arrival-Date, a queue id), and 1,000 rows repeat it.
 */
export const MAX_REPEATED_LENGTH = 1_000;
/**
 * A recipient's own group is kept in its row's payload cut to this many characters: a genuine one is a few fields and
 * a diagnostic (stored cut as a reply is, to `MAX_REPLY_LENGTH`).
 */
const MAX_GROUP_LENGTH = MAX_REPEATED_LENGTH + MAX_REPLY_LENGTH;

/** A group of fields, and its text as the report gave it. */
export interface FieldGroup {
  fields: HeaderFields;
  text: string;
}

/** A recipient's group, and the address it names (lower case). */
export interface RecipientGroup extends FieldGroup {
  recipient: string;
}

export interface DeliveryStatus {
  message: FieldGroup;
  recipients: RecipientGroup[];
}

/**
 * The groups of a delivery-status part. A recipient group that names no address is left out, so that it costs the
 * others nothing; a part in which none does is refused, as is one past the bounds above.
 */
export function parseDeliveryStatus(text: string): DeliveryStatus {
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_DELIVERY_STATUS_BYTES) {
    throw new FeedbackPayloadError(
      `the delivery-status part has ${bytes} bytes, more than the ${MAX_DELIVERY_STATUS_BYTES} a DSN may have`,
    );
  }
  const [message, ...groups] = text
    .trim()
    .split(/\r?\n[ \t]*\r?\n/)
    .map((block) => ({ fields: headerFields(block), text: block }))
    .filter((group) => group.fields.size > 0);
  if (groups.length > MAX_RECIPIENT_GROUPS) {
    throw new FeedbackPayloadError(
      `the delivery-status part has ${groups.length} recipient groups, more than the ${MAX_RECIPIENT_GROUPS} a DSN may have`,
    );
  }
  const recipients = groups.flatMap((group): RecipientGroup[] => {
    const recipient = recipientOf(group.fields);
    return recipient === null ? [] : [{ ...group, recipient }];
  });
  if (!message || recipients.length === 0) {
    throw new FeedbackPayloadError('the delivery-status part names no recipient address (Final-Recipient)');
  }
  return { message, recipients };
}

/**
 * The address of a recipient group (RFC 3464 requires its Final-Recipient): as it was given to the first server
 * (what the row was sent to) where the group says it and it reads as one, else the final one.
 */
function recipientOf(fields: HeaderFields): string | null {
  const final = fields.get('final-recipient');
  if (final === undefined) return null;
  const original = fields.get('original-recipient');
  return (original === undefined ? null : addressIn(original)) ?? addressIn(final);
}

/** The DSN's own facts, beside its delivery-status part. */
export interface DsnContext extends Pick<FeedbackItem, 'rowId' | 'messageId' | 'providerEventId' | 'payload'> {
  /** Whether the DSN proves it speaks for this recipient (lower case): its VERP token was made for it. */
  authenticates(recipient: string): boolean;
  /** The DSN's Date header, when it is a date PostgreSQL stores. */
  date: Date | null;
}

/**
 * Each recipient of a delivery status as feedback. `failed` is a bounce, hard when its status says the address is
 * bad for good (X.1.1, X.1.2, X.1.3, X.1.6, as an SMTP refusal at send time); `delayed` and `delivered` are what
 * they say; `relayed` and `expanded` (passed on to where no DSN comes back) say nothing final and are left out.
 * Each item's payload carries the context's, and as `deliveryStatus` the per-message group (cut) and its own group:
 * not the others', which would make the rows of a DSN grow with the square of its recipients.
 */
export function dsnFeedbackOf(status: DeliveryStatus, context: DsnContext): FeedbackItem[] {
  const arrival = dateOrNull(status.message.fields.get('arrival-date'));
  const perMessage = cutText(status.message.text, MAX_REPEATED_LENGTH);
  return status.recipients.flatMap(({ fields, text, recipient }): FeedbackItem[] => {
    const action = fields.get('action')?.toLowerCase().split(/[\s(]/)[0];
    const kind = action === 'failed' ? 'bounced' : action === 'delayed' || action === 'delivered' ? action : null;
    if (kind === null) return [];
    const diagnostic = fields.get('diagnostic-code')?.replace(/^[\w-]+\s*;\s*/, '') ?? null;
    const code = statusIn(fields.get('status')) ?? statusIn(diagnostic);
    const hard = kind === 'bounced' && isHardBounceStatus(code);
    return [
      {
        rowId: context.rowId,
        messageId: context.messageId,
        providerEventId: context.providerEventId,
        providerMessageId: null,
        payload: { ...context.payload, deliveryStatus: `${perMessage}\n\n${cutText(text, MAX_GROUP_LENGTH)}` },
        recipient,
        kind,
        bounceType: kind === 'bounced' ? (hard ? 'hard' : 'soft') : null,
        status: code,
        diagnostic,
        reportedAt: dateOrNull(fields.get('last-attempt-date')) ?? arrival ?? context.date ?? new Date(),
        suppress: hard,
        authenticated: context.authenticates(recipient),
      },
    ];
  });
}

/**
 * The longest date field read: an RFC 5322 date with a zone comment is some 40 characters. The comment's pattern
 * tries every position of what it is given, in quadratic time: a forged report's 64,000 `(` took 2 s.
 */
const MAX_DATE_LENGTH = 256;

/** A date field, null when it is missing or no date PostgreSQL stores (`+200000-…` is one to JavaScript). */
function dateOrNull(text: string | undefined): Date | null {
  if (text === undefined || text.length > MAX_DATE_LENGTH) return null;
  return storableDateOrNull(new Date(text.replace(/\s*\([^)]*\)\s*$/, '')));
}
