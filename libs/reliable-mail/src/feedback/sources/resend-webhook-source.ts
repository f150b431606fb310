import { FeedbackSignatureError } from '../../errors.js';
import type { FeedbackKind } from '../../outbox/feedback.types.js';
import {
  arrayAt,
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
import { loadSdk } from '../../shared/optional-package.js';
import { headerOf, type WebhookSource } from './webhook-source.js';

/** Resend's webhooks, signed by Svix. */
export interface ResendWebhookOptions {
  /** The webhook's signing secret (`whsec_…`), or several while one replaces another. */
  secret: string | string[];
}

const KINDS: Record<string, FeedbackKind> = {
  'email.delivered': 'delivered',
  'email.bounced': 'bounced',
  'email.complained': 'complained',
  'email.delivery_delayed': 'delayed',
};

/**
 * Verifies the Svix signature with the `svix` package (HMAC of the id, the timestamp and the raw body; a timestamp
 * more than 5 minutes away is refused, so a captured request cannot be replayed later) and reads the event.
 */
export async function resendWebhookSource(options: ResendWebhookOptions): Promise<WebhookSource> {
  const { Webhook } = await loadSdk('svix', 'The resend webhook source', () => import('svix'));
  const webhooks = [options.secret].flat().map((secret) => new Webhook(secret));
  return {
    name: 'resend',
    async receive(body, headers) {
      const signed = {
        'svix-id': headerOf(headers, 'svix-id') ?? '',
        'svix-timestamp': headerOf(headers, 'svix-timestamp') ?? '',
        'svix-signature': headerOf(headers, 'svix-signature') ?? '',
      };
      const verified = webhooks.some((webhook) => {
        try {
          webhook.verify(body, signed);
          return true;
        } catch {
          return false;
        }
      });
      if (!verified) throw new FeedbackSignatureError('the Svix signature does not verify, or its timestamp is stale');
      // The svix-id stays the same when Svix delivers the message again.
      return resendFeedbackOf(parseJson(body.toString('utf8')), signed['svix-id']);
    },
  };
}

/**
 * One Resend event as feedback. Resend's bounce and complaint events name the email's recipients, not which of
 * them bounced or complained: an email to several recipients stores the feedback for each, and suppresses none.
 */
export function resendFeedbackOf(event: unknown, eventId: string): FeedbackReport {
  const body = objectAt(event, 'the Resend event');
  const type = stringAt(body.type, 'type');
  const kind = KINDS[type];
  if (!kind) return ignoredReport(`Resend ${type} events carry no delivery feedback`);
  const data = objectAt(body.data, 'data');
  const recipients = (typeof data.to === 'string' ? [data.to] : arrayAt(data.to, 'data.to')).map((address, index) =>
    recipientAt(address, `data.to[${index}]`),
  );
  const bounce = kind === 'bounced' ? objectAt(data.bounce, 'data.bounce') : null;
  const bounceType = bounce ? (stringAt(bounce.type, 'data.bounce.type') === 'Permanent' ? 'hard' : 'soft') : null;
  const diagnostic = bounce ? optionalStringAt(bounce.message, 'data.bounce.message') : null;
  const reportedAt = dateAt(body.created_at, 'created_at');
  const providerMessageId = stringAt(data.email_id, 'data.email_id');
  const suppress = (bounceType === 'hard' || kind === 'complained') && recipients.length === 1;
  return feedbackReport(
    recipients.map((recipient) => ({
      recipient,
      kind,
      bounceType,
      providerEventId: eventId,
      providerMessageId,
      rowId: null,
      messageId: null,
      status: statusIn(diagnostic),
      diagnostic,
      reportedAt,
      payload: body,
      suppress,
      // Read only from a request whose Svix signature verified.
      authenticated: true,
    })),
  );
}
