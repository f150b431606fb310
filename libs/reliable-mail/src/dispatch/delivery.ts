import type { Logger } from '@nestjs/common';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import type { RetryPolicy } from '../options/resolve-options.js';
import { MailRenderError, type MailRenderer } from './mail-renderer.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';
import { renderFailureVerdict, settlementFor, skipSettlement } from './settlement.js';
import { classifyDelivery, classifyFailure, type SmtpFailureDetails, type SmtpVerdict } from './smtp-reply.js';

/** What one claimed row came to: the settlement to write, and the verdict the lane paces itself by. */
export interface DeliveryResult {
  settlement: Settlement;
  /** Null when the row was closed without a send. */
  verdict: SmtpVerdict | null;
}

/** Leaves out the recipients on the suppression list; the claim only hands over rows that keep at least one. */
function withoutSuppressed(row: ClaimedRow): ClaimedRow['payload'] {
  if (row.suppressed.length === 0) return row.payload;
  const keep = (list: ClaimedRow['payload']['to']) =>
    list.filter((entry) => !row.suppressed.includes(entry.address.toLowerCase()));
  return { ...row.payload, to: keep(row.payload.to), cc: keep(row.payload.cc), bcc: keep(row.payload.bcc) };
}

/**
 * Delivers one claimed row: renders it, sends it through the lane's transport, classifies what the server said and
 * decides what becomes of the row. It never touches the database; the settler writes its result.
 */
export class Delivery {
  constructor(
    private readonly renderer: MailRenderer,
    private readonly transport: MailTransport,
    private readonly retry: RetryPolicy,
    private readonly metrics: MailMetrics,
    private readonly logger: Logger,
  ) {}

  async deliver(row: ClaimedRow): Promise<DeliveryResult> {
    if (row.skipReason) return { settlement: skipSettlement({ ...row, skipReason: row.skipReason }), verdict: null };
    const started = performance.now();
    const verdict = await this.send(row);
    const settlement = settlementFor(row, verdict, this.retry, new Date(), Math.round(performance.now() - started));
    this.metrics.recordAttempt(row.lane, settlement.outcome, settlement.durationMs);
    this.log(row, settlement, verdict);
    return { settlement, verdict };
  }

  private async send(row: ClaimedRow): Promise<SmtpVerdict> {
    try {
      const payload = await this.renderer.render(row.messageId, withoutSuppressed(row));
      const verdict = classifyDelivery(await this.transport.send({ messageId: row.messageId, payload }));
      if (verdict.kind !== 'sent' || row.suppressed.length === 0) return verdict;
      const suppressed = row.suppressed.map((address) => ({ address, reply: 'suppressed: not sent', replyCode: null }));
      return { ...verdict, rejected: [...verdict.rejected, ...suppressed] };
    } catch (error) {
      return error instanceof MailRenderError
        ? renderFailureVerdict(error.message)
        : classifyFailure(error as SmtpFailureDetails);
    }
  }

  private log(row: ClaimedRow, settlement: Settlement, verdict: SmtpVerdict): void {
    const entry = {
      msg: 'settled',
      id: row.id,
      messageId: row.messageId,
      lane: row.lane,
      attempt: row.attempts,
      status: settlement.status,
      outcome: settlement.outcome,
      replyCode: verdict.replyCode,
      enhancedStatus: verdict.enhancedStatus,
      nextAttemptAt: settlement.nextAttemptAt?.toISOString(),
      durationMs: settlement.durationMs,
    };
    if (settlement.status === 'dead') {
      this.logger.error({ ...entry, msg: 'dead-lettered', reason: settlement.lastError });
    } else if (verdict.kind === 'sender') {
      this.logger.error({
        ...entry,
        msg: 'the SMTP server refused the sender: check credentials and configuration',
        reply: verdict.reply,
      });
    } else if (settlement.status === 'sent') {
      this.logger.debug(entry);
    } else {
      this.logger.warn({ ...entry, reply: verdict.reply });
    }
  }
}
