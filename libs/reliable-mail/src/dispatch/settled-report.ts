import type { Logger } from '@nestjs/common';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import type { SettleOutcome } from './settler.js';

export interface SettledReportDependencies {
  metrics: MailMetrics;
  publisher: MailEventPublisher;
  logger: Logger;
  /** `logging.perMail`: a line for each attempt's outcome; without it only a dead letter has one. */
  perMail: boolean;
}

/**
 * The last step of a row's way from claim to settle, once its settle has come back: the attempt is counted (it
 * happened, whatever became of the settle), and a settle that applied is logged, its final status counted and its
 * event emitted, apart from the lane, so that a slow listener never holds a send slot. A settle that did not apply
 * (its lease lost, or not written before it ended) reports nothing of the row: the row's next owner will.
 */
export function reportSettled(
  deps: SettledReportDependencies,
  row: ClaimedRow,
  settlement: Settlement,
  written: SettleOutcome | null,
): void {
  // A row closed at its claim (`skipReason`) made no attempt.
  if (row.attemptId !== null)
    deps.metrics.recordAttempt(row.lane, settlement.outcome, settlement.durationMs, settlement);
  if (!written?.applied) return;
  logSettled(deps, row, settlement);
  if (settlement.status !== 'pending')
    deps.metrics.recordFinal(row.lane, settlement.status, row.attempts - settlement.refundAttempt);
  if (written.event) deps.publisher.publish(written.event);
}

/**
 * A dead letter is said at once: it waits for an operator. Every other outcome is the mail's own news, in its row,
 * its events and the dispatcher's summary; a lane's trouble is its loop's to say, once.
 */
function logSettled({ logger, perMail }: SettledReportDependencies, row: ClaimedRow, settlement: Settlement): void {
  // A row closed at its claim made no attempt: only a dead letter (its workers kept stopping) is said.
  if (settlement.status !== 'dead' && (!perMail || row.attemptId === null)) return;
  const entry = {
    msg: 'settled',
    id: row.id,
    messageId: row.messageId,
    lane: row.lane,
    attempt: row.attempts,
    status: settlement.status,
    outcome: settlement.outcome,
    replyCode: settlement.replyCode,
    enhancedStatus: settlement.enhancedStatus,
    nextAttemptAt: settlement.nextAttemptAt?.toISOString(),
    durationMs: settlement.durationMs,
  };
  if (settlement.status === 'dead') {
    logger.error({ ...entry, msg: 'dead-lettered', reason: settlement.lastError });
  } else if (settlement.outcome === 'outage') {
    logger.warn({
      ...entry,
      msg: 'the lane cannot send: its server refuses the session',
      reason: settlement.lastError,
    });
  } else if (settlement.status === 'sent') {
    logger.debug(entry);
  } else {
    logger.warn({ ...entry, reason: settlement.lastError });
  }
}
