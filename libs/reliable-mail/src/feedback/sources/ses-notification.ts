import { FeedbackPayloadError } from '../../errors.js';
import type { BounceType } from '../../outbox/feedback.types.js';
import {
  arrayAt,
  dateAt,
  type FeedbackReport,
  feedbackReport,
  ignoredReport,
  objectAt,
  optionalStringAt,
  recipientAt,
  rowOfMessageId,
  statusIn,
  stringAt,
} from '../feedback-report.js';

// Amazon SES notifications, as SNS delivers them: identity notifications (`notificationType`) and configuration-set
// events (`eventType`) have the same bodies for the kinds read here.

/**
 * SES's bounce types: `Permanent` (General, NoEmail, Suppressed, OnAccountSuppressionList) is an address that will
 * not take mail; `Transient` and `Undetermined` may change.
 */
const BOUNCE_TYPES: Record<string, BounceType> = { Permanent: 'hard', Transient: 'soft', Undetermined: 'soft' };

/** One SES notification (the SNS message's `Message`, parsed) as feedback; `eventId` is the SNS message id. */
export function sesFeedbackOf(notification: unknown, eventId: string): FeedbackReport {
  const body = objectAt(notification, 'the SES notification');
  const type = body.notificationType ?? body.eventType;
  if (typeof type !== 'string') throw new FeedbackPayloadError('notificationType or eventType must be a string');
  const mail = objectAt(body.mail, 'mail');
  const common = {
    providerEventId: eventId,
    providerMessageId: stringAt(mail.messageId, 'mail.messageId'),
    ...rowOfMessageId(messageIdOf(mail)),
    payload: body,
    // Read only from an SNS message whose signature verified.
    authenticated: true,
  };
  switch (type) {
    case 'Bounce': {
      const bounce = objectAt(body.bounce, 'bounce');
      const bounceType = BOUNCE_TYPES[stringAt(bounce.bounceType, 'bounce.bounceType')] ?? 'soft';
      const reportedAt = dateAt(bounce.timestamp, 'bounce.timestamp');
      return feedbackReport(
        arrayAt(bounce.bouncedRecipients, 'bounce.bouncedRecipients').map((entry, index) => {
          const recipient = objectAt(entry, `bounce.bouncedRecipients[${index}]`);
          const diagnostic = optionalStringAt(recipient.diagnosticCode, 'diagnosticCode');
          return {
            ...common,
            recipient: recipientAt(recipient.emailAddress, `bounce.bouncedRecipients[${index}].emailAddress`),
            kind: 'bounced',
            bounceType,
            status: optionalStringAt(recipient.status, 'status') ?? statusIn(diagnostic),
            diagnostic: diagnostic ?? `${String(bounce.bounceType)}/${String(bounce.bounceSubType)}`,
            reportedAt,
            suppress: bounceType === 'hard',
          };
        }),
      );
    }
    case 'Complaint': {
      const complaint = objectAt(body.complaint, 'complaint');
      const reportedAt = dateAt(complaint.timestamp, 'complaint.timestamp');
      return feedbackReport(
        arrayAt(complaint.complainedRecipients, 'complaint.complainedRecipients').map((entry, index) => ({
          ...common,
          recipient: recipientAt(
            objectAt(entry, `complaint.complainedRecipients[${index}]`).emailAddress,
            `complaint.complainedRecipients[${index}].emailAddress`,
          ),
          kind: 'complained',
          bounceType: null,
          status: null,
          diagnostic: optionalStringAt(complaint.complaintFeedbackType, 'complaint.complaintFeedbackType'),
          reportedAt,
          suppress: true,
        })),
      );
    }
    case 'Delivery': {
      const delivery = objectAt(body.delivery, 'delivery');
      const diagnostic = optionalStringAt(delivery.smtpResponse, 'delivery.smtpResponse');
      const reportedAt = dateAt(delivery.timestamp, 'delivery.timestamp');
      return feedbackReport(
        arrayAt(delivery.recipients, 'delivery.recipients').map((address, index) => ({
          ...common,
          recipient: recipientAt(address, `delivery.recipients[${index}]`),
          kind: 'delivered',
          bounceType: null,
          status: statusIn(diagnostic),
          diagnostic,
          reportedAt,
          suppress: false,
        })),
      );
    }
    case 'DeliveryDelay': {
      const delay = objectAt(body.deliveryDelay, 'deliveryDelay');
      const reportedAt = dateAt(delay.timestamp, 'deliveryDelay.timestamp');
      return feedbackReport(
        arrayAt(delay.delayedRecipients, 'deliveryDelay.delayedRecipients').map((entry, index) => {
          const recipient = objectAt(entry, `deliveryDelay.delayedRecipients[${index}]`);
          const diagnostic = optionalStringAt(recipient.diagnosticCode, 'diagnosticCode');
          return {
            ...common,
            recipient: recipientAt(recipient.emailAddress, `deliveryDelay.delayedRecipients[${index}].emailAddress`),
            kind: 'delayed',
            bounceType: null,
            status: optionalStringAt(recipient.status, 'status') ?? statusIn(diagnostic),
            diagnostic: diagnostic ?? optionalStringAt(delay.delayType, 'deliveryDelay.delayType'),
            reportedAt,
            suppress: false,
          };
        }),
      );
    }
    default:
      return ignoredReport(`SES ${type} notifications carry no delivery feedback`);
  }
}

/** The original Message-ID: SES gives it in the common headers, and in the headers unless they were truncated. */
function messageIdOf(mail: Record<string, unknown>): string | null {
  const common = mail.commonHeaders as { messageId?: unknown } | undefined;
  if (typeof common?.messageId === 'string') return common.messageId;
  const headers = Array.isArray(mail.headers) ? (mail.headers as Array<{ name?: unknown; value?: unknown }>) : [];
  const header = headers.find((entry) => String(entry.name).toLowerCase() === 'message-id');
  return typeof header?.value === 'string' ? header.value : null;
}
