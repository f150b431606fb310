import type { Logger } from '@nestjs/common';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { startRowSpan } from '../shared/trace-context.js';
import { type Verp, verpAddress } from '../shared/verp.js';
import type { ClaimedRow } from '../outbox/queue.types.js';
import { everyRecipientDeferred } from '../transport/deferred-outcome.js';
import type { MailTransport, RenderedMail } from '../transport/mail-transport.interface.js';
import { releaseAttachmentStreams } from '../transport/outbound-content.js';
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

/** What one attempt came to, and how long it took (rendering and sending). */
export interface Attempt {
  result: AttemptResult;
  durationMs: number;
}

/**
 * Makes one attempt at a claimed row: renders it and sends it to the recipients still waiting for it, under a hard
 * deadline (`dispatcher.sendTimeoutMs`, and never so long that the lease leaves its settle less than a statement's
 * bound). It decides nothing about the row and never touches the database: the lane loop paces, decides and settles
 * with what it returns.
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
    } catch (error) {
      if (error instanceof MailRenderError) return { kind: 'unrenderable', reason: error.message };
      const reason = signal.aborted
        ? `rendering did not finish within the send deadline (${timeoutMs} ms)`
        : error instanceof MailRenderDeferral
          ? error.message
          : `rendering failed: ${String(error)}`;
      return { ...everyRecipientDeferred(recipients, reason), renderDeferred: true };
    }
    let outcome: unknown;
    try {
      outcome = await this.transport.send(
        {
          messageId: row.messageId,
          idempotencyKey: row.idempotencyKey ?? row.id,
          lane: row.lane,
          mail,
          recipients,
          possiblyTakenBefore: possiblyTakenIn(row.possiblyTakenBefore, recipients),
          envelopeSenders: this.verp
            ? Object.fromEntries(recipients.map((address) => [address, verpAddress(this.verp!, row.id, address)]))
            : undefined,
          stopping,
          deadlineAt,
        },
        signal,
      );
    } catch (error) {
      // A transport reports what the server did; a throw is its own fault, and the message may be tried again.
      const shown = shownSafely(error);
      this.logger.error({ msg: 'the transport threw instead of reporting an outcome', id: row.id, error: shown });
      return everyRecipientDeferred(recipients, `the transport failed: ${shown}`);
    }
    const { outcome: read, flaw, dropped } = readOutcome(outcome, recipients);
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
