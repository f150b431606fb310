import { storableDateOrNull } from '../../database/storable.js';
import { FeedbackPayloadError } from '../../errors.js';
import { isHardBounceStatus } from '../../transport/smtp/smtp-reply.js';
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

export interface DeliveryStatus {
  message: HeaderFields;
  recipients: HeaderFields[];
}

export function parseDeliveryStatus(text: string): DeliveryStatus {
  const [message, ...recipients] = text
    .trim()
    .split(/\r?\n[ \t]*\r?\n/)
    .map(headerFields)
    .filter((fields) => fields.size > 0);
  const named = recipients.filter((fields) => fields.has('final-recipient'));
  if (!message || named.length === 0) {
    throw new FeedbackPayloadError('the delivery-status part names no recipient (Final-Recipient)');
  }
  return { message, recipients: named };
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
 */
export function dsnFeedbackOf(status: DeliveryStatus, context: DsnContext): FeedbackItem[] {
  const arrival = dateOrNull(status.message.get('arrival-date'));
  return status.recipients.flatMap((fields): FeedbackItem[] => {
    const action = fields.get('action')?.toLowerCase().split(/[\s(]/)[0];
    const kind = action === 'failed' ? 'bounced' : action === 'delayed' || action === 'delivered' ? action : null;
    if (kind === null) return [];
    // The address as it was given to the first server (what the row was sent to), where the DSN says it.
    const named = fields.get('original-recipient') ?? fields.get('final-recipient')!;
    const recipient = addressIn(named);
    if (recipient === null) throw new FeedbackPayloadError(`no address in the recipient field "${named}"`);
    const diagnostic = fields.get('diagnostic-code')?.replace(/^[\w-]+\s*;\s*/, '') ?? null;
    const code = statusIn(fields.get('status')) ?? statusIn(diagnostic);
    const hard = kind === 'bounced' && code !== null && isHardBounceStatus(code);
    return [
      {
        rowId: context.rowId,
        messageId: context.messageId,
        providerEventId: context.providerEventId,
        providerMessageId: null,
        payload: context.payload,
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

/** A date field, null when it is missing or no date PostgreSQL stores (`+200000-…` is one to JavaScript). */
function dateOrNull(text: string | undefined): Date | null {
  return text === undefined ? null : storableDateOrNull(new Date(text.replace(/\s*\([^)]*\)\s*$/, '')));
}
