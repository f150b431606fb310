// Delivery feedback as a row's history shows it (`get(id).feedback`) and its events carry it.

/**
 * What a provider or a DSN reported about a recipient after the message left: `delivered` (the recipient's server
 * took it), `bounced` (it will not be delivered), `complained` (the recipient marked it as spam), `delayed` (still
 * being retried by the provider).
 */
export type FeedbackKind = 'delivered' | 'bounced' | 'complained' | 'delayed';

/** `hard`: the address is bad for good (it goes on the suppression list); `soft`: anything else. */
export type BounceType = 'hard' | 'soft';

/** Where feedback came from: a provider's webhook, or a DSN email read by the app. */
export type FeedbackSource = 'ses' | 'resend' | 'postmark' | 'dsn';

/** One recipient's feedback, as stored in `mail_outbox_feedback`. */
export interface OutboxFeedback {
  id: string;
  source: FeedbackSource;
  /** Lower case. */
  recipient: string;
  kind: FeedbackKind;
  /** Set for `bounced` only. */
  bounceType: BounceType | null;
  /** The provider's id of the event (the SNS message id, the svix-id, the DSN's Message-ID, …). */
  providerEventId: string;
  providerMessageId: string | null;
  /** The RFC 3463 status, where the report has one (`5.1.1`). */
  status: string | null;
  /** The diagnostic the provider gave: a remote server's reply, a bounce description. */
  diagnostic: string | null;
  /** When the provider says it happened. */
  reportedAt: Date;
  receivedAt: Date;
  /** The provider's payload as it came (for a DSN: its delivery-status fields and headers). */
  payload: Record<string, unknown>;
}
