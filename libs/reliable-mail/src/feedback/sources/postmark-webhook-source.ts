import { createHash, timingSafeEqual } from 'node:crypto';
import { FeedbackSignatureError } from '../../errors.js';
import type { BounceType } from '../../outbox/feedback.types.js';
import {
  dateAt,
  type FeedbackReport,
  feedbackReport,
  ignoredReport,
  objectAt,
  optionalStringAt,
  parseJson,
  recipientAt,
  statusIn,
  stringAt,
} from '../feedback-report.js';
import { headerOf, type WebhookHeaders, type WebhookSource } from './webhook-source.js';

/**
 * Postmark's webhooks, which carry no signature: Postmark documents protecting them with basic auth credentials in
 * the webhook's URL, or with a custom header of the webhook. Give one or both; a request must match each given.
 */
export interface PostmarkWebhookOptions {
  /** The credentials of the webhook's URL (`https://user:password@…`), sent as `Authorization: Basic`. */
  basicAuth?: { username: string; password: string };
  /** A header set in the webhook's "Custom headers", with its secret value. */
  header?: { name: string; value: string };
}

/** Postmark bounce types that say the address is bad for good (Postmark deactivates it too). */
const HARD_BOUNCE_TYPES = new Set(['HardBounce', 'BadEmailAddress', 'ManuallyDeactivated']);
/** Postmark "bounce" types that are not about delivery at all. */
const NOT_FEEDBACK_TYPES = new Set([
  'Subscribe',
  'Unsubscribe',
  'AutoResponder',
  'AddressChange',
  'OpenRelayTest',
  'ChallengeVerification',
  'InboundError',
]);

/** Bounce IDs exceed JavaScript's safe integers: they are kept as the digits that came. */
const ID_AS_TEXT = ((key: string, value: unknown, context?: { source?: string }) =>
  key === 'ID' && typeof value === 'number' ? (context?.source ?? String(value)) : value) as (
  key: string,
  value: unknown,
) => unknown;

export async function postmarkWebhookSource(options: PostmarkWebhookOptions): Promise<WebhookSource> {
  const expected: Array<[header: string, value: string]> = [];
  if (options.basicAuth) {
    const { username, password } = options.basicAuth;
    expected.push(['authorization', `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`]);
  }
  if (options.header) expected.push([options.header.name.toLowerCase(), options.header.value]);
  return {
    name: 'postmark',
    async receive(body, headers) {
      if (!expected.every(([name, value]) => matches(headers, name, value))) {
        throw new FeedbackSignatureError('the Postmark webhook credentials do not match');
      }
      return postmarkFeedbackOf(parseJson(body.toString('utf8'), ID_AS_TEXT));
    },
  };
}

/** Compares in constant time, by digests of equal length, so a mismatch's timing says nothing of the secret. */
function matches(headers: WebhookHeaders, name: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(headerOf(headers, name) ?? ''), digest(expected));
}

/** One Postmark webhook record as feedback. Delivery records have no id of their own: the message id stands in. */
export function postmarkFeedbackOf(record: unknown): FeedbackReport {
  const body = objectAt(record, 'the Postmark record');
  const recordType = stringAt(body.RecordType, 'RecordType');
  const providerMessageId = stringAt(body.MessageID, 'MessageID');
  // Read only from a request whose credentials matched.
  const common = { providerMessageId, rowId: null, messageId: null, payload: body, authenticated: true };
  if (recordType === 'Delivery') {
    const diagnostic = optionalStringAt(body.Details, 'Details');
    return feedbackReport([
      {
        ...common,
        recipient: recipientAt(body.Recipient, 'Recipient'),
        kind: 'delivered',
        bounceType: null,
        providerEventId: `Delivery:${providerMessageId}`,
        status: statusIn(diagnostic),
        diagnostic,
        reportedAt: dateAt(body.DeliveredAt, 'DeliveredAt'),
        suppress: false,
      },
    ]);
  }
  if (recordType !== 'Bounce' && recordType !== 'SpamComplaint') {
    return ignoredReport(`Postmark ${recordType} records carry no delivery feedback`);
  }
  const type = stringAt(body.Type, 'Type');
  if (NOT_FEEDBACK_TYPES.has(type)) return ignoredReport(`Postmark ${type} bounces are not delivery feedback`);
  const complained = recordType === 'SpamComplaint' || type === 'SpamComplaint';
  const bounceType: BounceType | null = complained ? null : HARD_BOUNCE_TYPES.has(type) ? 'hard' : 'soft';
  const details = optionalStringAt(body.Details, 'Details');
  return feedbackReport([
    {
      ...common,
      recipient: recipientAt(body.Email, 'Email'),
      kind: complained ? 'complained' : 'bounced',
      bounceType,
      providerEventId: stringAt(body.ID, 'ID'),
      status: statusIn(details),
      diagnostic: details ?? optionalStringAt(body.Description, 'Description'),
      reportedAt: dateAt(body.BouncedAt, 'BouncedAt'),
      suppress: complained || bounceType === 'hard',
    },
  ]);
}
