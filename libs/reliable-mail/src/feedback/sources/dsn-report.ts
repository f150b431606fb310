import { createHash } from 'node:crypto';
import type { HeaderValue, ParsedMail } from 'mailparser';
import { storableDateOrNull } from '../../database/storable.js';
import { FeedbackPayloadError } from '../../errors.js';
import { readVerpAddress, type Verp, verpCovers } from '../../shared/verp.js';
import { addressIn, feedbackReport, type FeedbackReport, ignoredReport, rowOfMessageId } from '../feedback-report.js';
import { loadSdk } from '../../transport/http/load-sdk.js';
import { dsnFeedbackOf, headerBlockOf, headerFields, parseDeliveryStatus } from './delivery-status.js';

const DELIVERY_STATUS_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const RETURNED_MESSAGE_TYPES = new Set([
  'text/rfc822-headers',
  'message/rfc822',
  'message/global',
  'message/global-headers',
]);
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
  const returnPath = verp
    ? (addressesOf(parsed)
        .map((address) => readVerpAddress(verp, address))
        .find(Boolean) ?? null)
    : null;
  const date = storableDateOrNull(parsed.date);
  const items = dsnFeedbackOf(parseDeliveryStatus(deliveryStatus), {
    ...(returnPath ? { rowId: returnPath.rowId, messageId: null } : rowOfMessageId(originalMessageId)),
    // Linked by its Message-ID, by a VERP address of before tokens, or for a recipient another's token names: no.
    authenticates: (recipient) => returnPath !== null && verpCovers(verp!, returnPath, recipient),
    // A DSN sent again keeps its Message-ID; one without any is known by its report.
    providerEventId: parsed.messageId ?? `sha256:${createHash('sha256').update(deliveryStatus).digest('hex')}`,
    payload: {
      from: parsed.from?.text ?? null,
      subject: parsed.subject ?? null,
      date: date?.toISOString() ?? null,
      messageId: parsed.messageId ?? null,
      originalMessageId,
      deliveryStatus,
    },
    date,
  });
  return items.length > 0
    ? feedbackReport(items)
    : ignoredReport('the DSN reports only relayed or expanded recipients');
}

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
