import { Inject, Injectable, Logger } from '@nestjs/common';
import { context, isSpanContextValid, type Link, SpanKind, trace } from '@opentelemetry/api';
import { OutboxDatabase } from '../database/outbox-database.js';
import { cutAtWord, indexableKey } from '../database/storable.js';
import { UnknownFeedbackSourceError } from '../errors.js';
import { MailEventPublisher } from '../events/mail-event.publisher.js';
import { MailMetrics } from '../metrics/mail-metrics.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import type { FeedbackKind, FeedbackSource } from '../outbox/feedback.types.js';
import { uuidv7 } from '../outbox/uuid-v7.js';
import {
  EMAIL_BOUNCED_EVENT,
  EMAIL_COMPLAINED_EVENT,
  EMAIL_DELIVERED_EVENT,
  RELIABLE_MAIL_OPTIONS,
} from '../reliable-mail.constants.js';
import { keptReply } from '../shared/logged-reply.js';
import { startRowSpan } from '../shared/trace-context.js';
import type { FeedbackItem, FeedbackReport } from './feedback-report.js';
import { type FeedbackInput, recordFeedback, type StoredFeedback } from './sql/record-feedback.js';
import { dsnReport } from './sources/dsn-report.js';
import type { WebhookHeaders, WebhookSource } from './sources/webhook-source.js';

/** What one webhook request or DSN came to. */
export interface FeedbackIngestResult {
  /** Feedback rows written (one per recipient); a provider's repeat of a report writes none. */
  stored: number;
  /** Items of the report that an earlier delivery of it had already stored. */
  duplicates: number;
  /** Of the rows written, those that named no known row (stored and counted all the same). */
  unlinked: number;
  /** Why nothing was taken when the report carries no delivery feedback (an open event, an auto-reply, …). */
  ignored: string | null;
}

const EVENT_NAMES: Record<FeedbackKind, string | null> = {
  delivered: EMAIL_DELIVERED_EVENT,
  bounced: EMAIL_BOUNCED_EVENT,
  complained: EMAIL_COMPLAINED_EVENT,
  delayed: null,
};
const MAX_SUPPRESSION_REASON = 500;

/**
 * Delivery feedback, from providers' webhooks (`ingest`, which `ReliableMailWebhooksModule` calls for its routes)
 * and from DSN emails the app reads (`ingestDsn`): stored per recipient and linked to its row, hard bounces and
 * complaints put on the suppression list, and `EmailBouncedEvent`, `EmailComplainedEvent` and
 * `EmailDeliveredEvent` recorded in the same statement and emitted after it commits.
 */
@Injectable()
export class MailFeedbackService {
  private readonly logger = new Logger('ReliableMail');
  private readonly sources = new Map<string, WebhookSource>();

  constructor(
    private readonly database: OutboxDatabase,
    private readonly publisher: MailEventPublisher,
    private readonly metrics: MailMetrics,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
  ) {}

  /** Makes a webhook source available to `ingest` (`ReliableMailWebhooksModule` adds those of its options). */
  addSource(source: WebhookSource): void {
    this.sources.set(source.name, source);
  }

  /**
   * Verifies a webhook request of a configured source and stores its feedback. Resolves once everything committed;
   * throws `FeedbackSignatureError` (nothing stored) when it does not verify, `FeedbackPayloadError` when the
   * verified body cannot be read. `payload` is the raw body, as signed.
   */
  async ingest(source: string, payload: string | Buffer, headers: WebhookHeaders): Promise<FeedbackIngestResult> {
    const webhookSource = this.sources.get(source);
    if (!webhookSource) throw new UnknownFeedbackSourceError(source);
    const lowerCase = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
    const report = await webhookSource.receive(Buffer.from(payload), lowerCase);
    return this.record(webhookSource.name, report);
  }

  /**
   * Stores the feedback of a DSN email (the raw RFC 5322 message, as a mailbox gives it). A message that is not a
   * DSN resolves with `ignored`; a DSN that cannot be read throws `FeedbackPayloadError`. Anyone can send a DSN: one
   * suppresses a recipient only when it came to the VERP address made for that recipient of its row (`verp`).
   */
  async ingestDsn(rawMessage: string | Buffer): Promise<FeedbackIngestResult> {
    return this.record('dsn', await dsnReport(rawMessage, this.options.verp));
  }

  private async record(source: FeedbackSource, report: FeedbackReport): Promise<FeedbackIngestResult> {
    if (report.items.length === 0) return { stored: 0, duplicates: 0, unlinked: 0, ignored: report.ignored };
    const inputs = report.items.map((item) => this.inputOf(source, item));
    const received = new Date();
    const { stored, events } = await recordFeedback(this.database, inputs, this.options.dispatcher.eventLeaseMs);
    for (const event of events) this.publisher.publish(event);
    for (const name of new Set(inputs.map((input) => input.event_name))) if (name) this.publisher.committed(name);
    const cameIn = arrivalLinks();
    for (const row of stored) {
      this.metrics.recordFeedback(source, row.kind, row.bounceType, row.outboxId !== null);
      if (row.outboxId !== null) traceReport(source, row, received, cameIn);
    }
    const unlinked = stored.filter((row) => row.outboxId === null).length;
    if (unlinked > 0) {
      this.logger.warn({ msg: 'feedback for no known row, stored unlinked', source, count: unlinked });
    }
    return { stored: stored.length, duplicates: inputs.length - stored.length, unlinked, ignored: null };
  }

  private inputOf(source: FeedbackSource, item: FeedbackItem): FeedbackInput {
    const id = uuidv7();
    const eventName = EVENT_NAMES[item.kind];
    const recording = this.publisher.recordingOf(eventName);
    const reportedAt = item.reportedAt.toISOString();
    const providerEventId = indexableKey(item.providerEventId);
    // A diagnostic is a server's reply, kept as an attempt keeps one: anyone can mail a DSN, and one whose diagnostic
    // filled its 1 MiB went whole into every listener's event and every broker's message.
    const diagnostic = item.diagnostic === null ? null : keptReply(item.diagnostic);
    return {
      id,
      source,
      recipient: item.recipient,
      kind: item.kind,
      bounce_type: item.bounceType,
      provider_event_id: providerEventId,
      provider_message_id: item.providerMessageId,
      row_id: item.rowId,
      message_id: item.messageId,
      status: item.status,
      diagnostic,
      reported_at: reportedAt,
      payload: item.payload,
      suppression_reason: item.suppress && item.authenticated ? suppressionReason(source, item, diagnostic) : null,
      authenticated: item.authenticated,
      event_name: recording ? eventName : null,
      event_for_listeners: recording === 'listeners',
      event_payload: {
        feedbackId: id,
        source,
        recipient: item.recipient,
        status: item.status,
        diagnostic,
        providerEventId,
        providerMessageId: item.providerMessageId,
        reportedAt,
        ...(item.kind === 'bounced' ? { bounceType: item.bounceType } : {}),
      },
    };
  }
}

/** The span a report arrived in (a webhook's request, if the app traces it): of another trace than its row's. */
function arrivalLinks(): Link[] {
  const arrival = trace.getSpanContext(context.active());
  return arrival && isSpanContextValid(arrival) ? [{ context: arrival }] : [];
}

/**
 * A report on a row is a span of the trace the row was enqueued in, from the report's arrival to its commit: the
 * trace runs from the request that placed the order to the provider's bounce.
 */
function traceReport(source: FeedbackSource, row: StoredFeedback, received: Date, cameIn: Link[]): void {
  startRowSpan('reliable-mail feedback', row, {
    kind: SpanKind.CONSUMER,
    startTime: received,
    links: cameIn,
    attributes: {
      'reliable_mail.feedback.kind': row.kind,
      'reliable_mail.feedback.source': source,
      'reliable_mail.outbox_id': row.outboxId!,
    },
  }).end();
}

/** Why the address is on the suppression list: the report's, with its diagnostic as kept (`keptReply`). */
function suppressionReason(source: FeedbackSource, item: FeedbackItem, diagnostic: string | null): string {
  const what = item.kind === 'complained' ? 'complaint' : 'hard bounce';
  const detail = [item.status, diagnostic].filter(Boolean).join(' ');
  return cutAtWord(`${source} ${what}${detail ? `: ${detail}` : ''}`, MAX_SUPPRESSION_REASON);
}
