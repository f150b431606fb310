import type { Logger } from '@nestjs/common';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { withoutAddresses } from '../shared/logged-reply.js';
import { startRowSpan } from '../shared/trace-context.js';
import { type Verp, verpAddress } from '../shared/verp.js';
import type { LaneUnsubscribe } from '../options/resolve-unsubscribe.js';
import type { ClaimedRow } from '../outbox/queue.types.js';
import { everyRecipientDeferred } from '../transport/deferred-outcome.js';
import type {
  MailTransport,
  OutboundMessage,
  RenderedMail,
  SendOutcome,
} from '../transport/mail-transport.interface.js';
import { attachmentBytes, releaseAttachmentStreams } from '../transport/outbound-content.js';
import { mergeSendParts, nextSendGoes, type SendPart, stopReasonOf } from '../transport/sequential-sends.js';
import { listUnsubscribeHeaders } from '../unsubscribe/list-unsubscribe.js';
import { MailRenderDeferral, MailRenderError, MailRenderer } from './mail-renderer.js';
import { readOutcome, shownSafely } from './outcome-check.js';
import { envelopeOf } from './envelope.js';
import { type AttemptResult, attemptOutcomeOf, leadingReply } from './settlement.js';
import { SETTLE_MARGIN_MS } from './lease.js';

/** Those of the recipients an earlier attempt may have reached that this attempt is for (its envelope). */
function possiblyTakenIn(possiblyTaken: string[], envelope: string[]): string[] {
  if (possiblyTaken.length === 0) return possiblyTaken;
  const sending = new Set(envelope);
  return possiblyTaken.filter((address) => sending.has(address));
}

/** What bounds the sends of one attempt: its deadline (`signal` aborts then), and the app's shutdown. */
interface SendWindow {
  signal: AbortSignal;
  stopping: AbortSignal;
  deadlineAt: number;
}

/** What one attempt came to, and how long it took (rendering and sending). */
export interface Attempt {
  result: AttemptResult;
  durationMs: number;
}

/** The mail with its attachment streams read into bytes, so that each copy can be composed of it again. */
async function withAttachmentBytes(mail: RenderedMail, signal: AbortSignal): Promise<RenderedMail> {
  if (mail.attachments.every(({ content }) => Buffer.isBuffer(content))) return mail;
  try {
    return { ...mail, attachments: await attachmentBytes(mail, signal) };
  } catch (error) {
    releaseAttachmentStreams(mail);
    throw error;
  }
}

/**
 * Makes one attempt at a claimed row: renders it and sends it to the recipients still waiting for it, under a hard
 * deadline (`dispatcher.sendTimeoutMs`, and never so long that the lease leaves its settle less than a statement's
 * bound). It decides nothing about the row and never touches the database: the lane loop paces, decides and settles
 * with what it returns. On a lane that is not transactional, each recipient gets a copy of its own, sent on its own,
 * with its own one-click unsubscribe link.
 */
export class Delivery {
  constructor(
    private readonly renderer: MailRenderer,
    private readonly transport: MailTransport,
    private readonly sendTimeoutMs: number,
    /** A statement's bound (`statementBoundMs`): what a send leaves of its row's lease for the settle. */
    private readonly statementBoundMs: number,
    private readonly logger: Logger,
    private readonly verp: Verp | null,
    /** The lane's one-click unsubscribe; null for a transactional lane. */
    private readonly unsubscribe: LaneUnsubscribe | null,
  ) {}

  /**
   * Sends the row; `stopping` aborts when the app begins to shut down. The send is a span of the trace the row was
   * enqueued in, and the active one while it runs, so that an instrumented transport's own spans (a provider's HTTP
   * request) are its children.
   */
  async attempt(row: ClaimedRow, stopping: AbortSignal): Promise<Attempt> {
    const span = startRowSpan('reliable-mail send', row, {
      kind: SpanKind.PRODUCER,
      attributes: {
        'reliable_mail.outbox_id': row.id,
        'reliable_mail.message_id': row.messageId,
        'reliable_mail.lane': row.lane,
        'reliable_mail.attempt': row.attempts,
      },
    });
    try {
      const attempt = await context.with(trace.setSpan(context.active(), span), () => this.timed(row, stopping));
      const outcome = attemptOutcomeOf(attempt.result);
      span.setAttribute('reliable_mail.outcome', outcome);
      // The outcome and the reply code, not the reply's text: that often names the recipient, and spans go to
      // whatever the app exports them to.
      if (outcome !== 'sent') {
        const replyCode = replyCodeOf(attempt.result);
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: `${outcome}${replyCode === null ? '' : ` ${replyCode}`}`,
        });
      }
      return attempt;
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
      throw error;
    } finally {
      span.end();
    }
  }

  private async timed(row: ClaimedRow, stopping: AbortSignal): Promise<Attempt> {
    const started = performance.now();
    // Never past what the lease leaves once the settle has had a statement's whole bound and its margin.
    const leftForSend = row.leaseEndsAt - started - this.statementBoundMs - SETTLE_MARGIN_MS;
    const timeoutMs = Math.max(0, Math.floor(Math.min(this.sendTimeoutMs, leftForSend)));
    // A timer cleared when the send ends: AbortSignal.timeout() would keep each send's signal alive for the whole
    // timeout, a send's worth of memory times the sends of three minutes.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), timeoutMs);
    try {
      const result = await this.send(row, deadline.signal, timeoutMs, stopping);
      return { result, durationMs: Math.round(performance.now() - started) };
    } finally {
      clearTimeout(timer);
    }
  }

  private async send(
    row: ClaimedRow,
    signal: AbortSignal,
    timeoutMs: number,
    stopping: AbortSignal,
  ): Promise<AttemptResult> {
    const deadlineAt = Date.now() + timeoutMs;
    const recipients = envelopeOf(row);
    // Every recipient left was suppressed since the last attempt: nothing to send.
    if (recipients.length === 0)
      return { kind: 'attempted', recipients: [], reply: null, providerMessageId: null, slowDown: false };
    let mail: RenderedMail;
    try {
      mail = await this.render(row, signal);
      if (this.unsubscribe !== null && recipients.length > 1) mail = await withAttachmentBytes(mail, signal);
    } catch (error) {
      if (error instanceof MailRenderError) return { kind: 'unrenderable', reason: error.message };
      const reason = signal.aborted
        ? `rendering did not finish within the send deadline (${timeoutMs} ms)`
        : error instanceof MailRenderDeferral
          ? error.message
          : `rendering failed: ${String(error)}`;
      return { ...everyRecipientDeferred(recipients, reason), renderDeferred: true };
    }
    const window: SendWindow = { signal, stopping, deadlineAt };
    if (this.unsubscribe === null) return this.sendMessage(row, this.messageOf(row, mail, recipients, window), signal);
    return this.sendCopies(row, mail, recipients, this.unsubscribe, window);
  }

  /**
   * Each recipient's copy, one after another, as SMTP's transactions and a provider's requests go: a copy that is
   * not taken or refused for good leaves the rest to the next attempt, and the deadline and a shutdown stop them
   * between two. Each has the row's Message-ID and its recipient's own unsubscribe link.
   */
  private async sendCopies(
    row: ClaimedRow,
    mail: RenderedMail,
    recipients: string[],
    unsubscribe: LaneUnsubscribe,
    window: SendWindow,
  ): Promise<SendOutcome> {
    const sent: SendPart[] = [];
    for (const [index, recipient] of recipients.entries()) {
      if (index > 0) {
        const untried = recipients.slice(index);
        const after = `copy ${index} of ${recipients.length}`;
        const previous = sent[index - 1].outcome;
        if (!nextSendGoes(previous)) {
          const why = `${after} was not taken (${stopReasonOf(previous)})`;
          return mergeSendParts(sent, untried, `not tried in this attempt: ${why}`);
        }
        if (window.signal.aborted)
          return mergeSendParts(sent, untried, `not tried in this attempt: the send deadline passed after ${after}`);
        if (window.stopping.aborted) {
          const merged = mergeSendParts(sent, untried, `not tried in this attempt: the app shut down after ${after}`);
          return merged.kind === 'attempted' ? { ...merged, stoppedAtShutdown: true } : merged;
        }
      }
      const copy = { ...mail, headers: listUnsubscribeHeaders(unsubscribe, row.id, recipient, mail.headers) };
      const message = this.messageOf(row, copy, [recipient], window);
      // A key of each copy's own: a provider that deduplicates by key would take the second copy for the first.
      const keyed = { ...message, idempotencyKey: `${message.idempotencyKey}:${recipient}` };
      sent.push({ recipients: [recipient], outcome: await this.sendMessage(row, keyed, window.signal) });
    }
    return mergeSendParts(sent, [], '');
  }

  private messageOf(
    row: ClaimedRow,
    mail: RenderedMail,
    recipients: string[],
    { stopping, deadlineAt }: SendWindow,
  ): OutboundMessage {
    return {
      messageId: row.messageId,
      idempotencyKey: row.idempotencyKey ?? row.id,
      lane: row.lane,
      mail,
      recipients,
      possiblyTakenBefore: possiblyTakenIn(row.possiblyTakenBefore, recipients),
      possiblyTakenThrough: row.possiblyTakenThrough ?? undefined,
      envelopeSenders: this.verp
        ? Object.fromEntries(recipients.map((address) => [address, verpAddress(this.verp!, row.id, address)]))
        : undefined,
      stopping,
      deadlineAt,
    };
  }

  /** One send through the transport, its outcome read for the message's recipients. */
  private async sendMessage(row: ClaimedRow, message: OutboundMessage, signal: AbortSignal): Promise<SendOutcome> {
    let outcome: unknown;
    try {
      outcome = await this.transport.send(message, signal);
    } catch (error) {
      // A transport reports what the server did; a throw is its own fault, and the message may be tried again.
      const shown = shownSafely(error);
      this.logger.error({
        msg: 'the transport threw instead of reporting an outcome',
        id: row.id,
        // As a reply is logged: an SMTP library's error may name the recipients it was refused for.
        error: withoutAddresses(shown),
      });
      return everyRecipientDeferred(message.recipients, `the transport failed: ${shown}`);
    }
    const { outcome: read, flaw, dropped } = readOutcome(outcome, message.recipients);
    if (dropped.length > 0)
      this.logger.warn({
        msg: 'the transport reported facts that cannot be kept; left out, the outcome kept without them',
        id: row.id,
        fields: dropped,
      });
    if (flaw !== null)
      this.logger.error({
        msg: 'the transport reported a malformed outcome; counted as unknown for every recipient',
        id: row.id,
        field: flaw,
      });
    return read;
  }

  /** Renders under the deadline; a template or resolver that never settles is left behind, its streams closed. */
  private render(row: ClaimedRow, signal: AbortSignal): Promise<RenderedMail> {
    const rendering = this.renderer.render(row.messageId, row.payload, signal);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        reject(new Error('the send deadline passed while the mail was being rendered'));
        void rendering.then(
          (late) => releaseAttachmentStreams(late),
          () => undefined,
        );
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      rendering.then(
        (mail) => {
          signal.removeEventListener('abort', onAbort);
          resolve(mail);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  }
}

/** The reply code a send's span reports for an attempt that did not simply go out: what went wrong's. */
function replyCodeOf(result: AttemptResult): number | null {
  if (result.kind === 'outage') return result.replyCode;
  if (result.kind === 'unrenderable') return null;
  return leadingReply(result.recipients)?.replyCode ?? null;
}
