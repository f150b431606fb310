import { createHash } from 'node:crypto';
import type { HeaderValue, ParsedMail } from 'mailparser';
import { cutText, storableDateOrNull } from '../../database/storable.js';
import { FeedbackPayloadError } from '../../errors.js';
import { readVerpAddress, type Verp, verpCovers } from '../../shared/verp.js';
import { addressIn, feedbackReport, type FeedbackReport, ignoredReport, rowOfMessageId } from '../feedback-report.js';
import { loadSdk } from '../../shared/optional-package.js';
import {
  dsnFeedbackOf,
  headerBlockOf,
  headerFields,
  MAX_REPEATED_LENGTH,
  parseDeliveryStatus,
} from './delivery-status.js';

const DELIVERY_STATUS_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const RETURNED_MESSAGE_TYPES = new Set([
  'text/rfc822-headers',
  'message/rfc822',
  'message/global',
  'message/global-headers',
]);
/**
 * The largest message read as a DSN. The delivery-status part has bounds of its own (`MAX_DELIVERY_STATUS_BYTES`);
 * the rest is only parsed, never stored, but a DSN may return the whole original message (Exchange does), which
 * may be `content.maxMessageBytes` (5 MiB by default, a third more in base64).
 */
export const MAX_DSN_BYTES = 16 * 1_048_576;
/** Headers in which a DSN may carry the address it was sent to: its To, or what the receiving server added. */
const ADDRESSED_TO = ['to', 'delivered-to', 'x-original-to', 'envelope-to', 'x-envelope-to'];

/**
 * Reads a DSN email (RFC 3464: `multipart/report; report-type=delivery-status`) with mailparser. Its row is the
 * one its VERP address names, else the one whose Message-ID the returned headers quote. Anyone can send one: it
 * speaks for a recipient (authenticated) only when it came to the VERP address made for that recipient of that row.
 * Anything else that reaches the bounce mailbox (an out-of-office reply quotes the Message-ID too) is not a DSN and
 * is ignored.
 */
export async function dsnReport(raw: string | Buffer, verp: Verp | null): Promise<FeedbackReport> {
  const bytes = typeof raw === 'string' ? Buffer.byteLength(raw) : raw.length;
  if (bytes > MAX_DSN_BYTES) {
    throw new FeedbackPayloadError(`the message has ${bytes} bytes, more than the ${MAX_DSN_BYTES} a DSN may have`);
  }
  const { simpleParser } = await loadSdk('mailparser', 'MailFeedbackService.ingestDsn', () => import('mailparser'));
  let parsed: ParsedMail;
  try {
    parsed = await simpleParser(raw, {
      keepDeliveryStatus: true,
      skipHtmlToText: true,
      skipTextToHtml: true,
      skipTextLinks: true,
      skipImageLinks: true,
    });
  } catch (error) {
    // What mailparser cannot read (a header past its size limit, …) is no DSN it could give: the message's fault.
    throw new FeedbackPayloadError(`the message cannot be read as MIME (${(error as Error).message})`);
  }
  const contentType = parsed.headers.get('content-type') as { value?: string; params?: Record<string, string> };
  if (contentType?.value !== 'multipart/report' || contentType.params?.['report-type'] !== 'delivery-status') {
    return ignoredReport('not a DSN (multipart/report; report-type=delivery-status)');
  }
  const statusPart = parsed.attachments.find((part) => DELIVERY_STATUS_TYPES.has(part.contentType));
  if (!statusPart) throw new FeedbackPayloadError('the report has no message/delivery-status part');
  const deliveryStatus = statusPart.content.toString('utf8');
  const returned = parsed.attachments.find((part) => RETURNED_MESSAGE_TYPES.has(part.contentType));
  const originalMessageId = returned
    ? (headerFields(headerBlockOf(returned.content.toString('utf8'))).get('message-id') ?? null)
    : null;
  const verpAddressed = verp ? (addressesOf(parsed).find((address) => readVerpAddress(verp, address)) ?? null) : null;
  const returnPath = verpAddressed === null ? null : readVerpAddress(verp!, verpAddressed);
  const date = storableDateOrNull(parsed.date);
  // A DSN sent again keeps its Message-ID; one without any is known by its report.
  const dsnId = parsed.messageId ?? `sha256:${createHash('sha256').update(deliveryStatus).digest('hex')}`;
  const items = dsnFeedbackOf(parseDeliveryStatus(deliveryStatus), {
    ...(returnPath ? { rowId: returnPath.rowId, messageId: null } : rowOfMessageId(originalMessageId)),
    // Linked by its Message-ID, by a VERP address of before tokens, or for a recipient another's token names: no.
    authenticates: (recipient) => returnPath !== null && verpCovers(verp!, returnPath, recipient),
    // The sender chooses the Message-ID: alone, a forged DSN that took a genuine one's first would make the genuine
    // one a repeat, stored as nothing. With the VERP address it came to, which only its recipient's side knows, a
    // forged one is a report of its own.
    providerEventId: verpAddressed === null ? dsnId : `${dsnId} to ${verpAddressed.toLowerCase()}`,
    // Each item repeats these: cut, so that a DSN of 1,000 recipients does not write its Subject 1,000 times whole.
    payload: {
      from: repeated(parsed.from?.text),
      subject: repeated(parsed.subject),
      date: date?.toISOString() ?? null,
      messageId: repeated(parsed.messageId),
      originalMessageId: repeated(originalMessageId),
    },
    date,
  });
  return items.length > 0
    ? feedbackReport(items)
    : ignoredReport('the DSN reports only relayed or expanded recipients');
}

const repeated = (text: string | null | undefined): string | null =>
  text === null || text === undefined ? null : cutText(text, MAX_REPEATED_LENGTH);

function addressesOf(parsed: ParsedMail): string[] {
  return ADDRESSED_TO.flatMap((name) => addressesIn(parsed.headers.get(name)));
}

function addressesIn(value: HeaderValue | undefined): string[] {
  if (typeof value === 'string') return value.split(',').flatMap((part) => addressIn(part) ?? []);
  if (value && typeof value === 'object' && 'value' in value && Array.isArray(value.value)) {
    return value.value.flatMap((entry: { address?: string }) => (entry.address ? [entry.address] : []));
  }
  return [];
}
