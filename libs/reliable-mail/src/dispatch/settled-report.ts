import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import type { SettleOutcome } from './settler.js';

/**
 * After a settle: the final status is counted and its event emitted, apart from the lane, so that a slow listener
 * never holds a send slot.
 */
export function reportSettled(
  deps: { metrics: MailMetrics; publisher: MailEventPublisher },
  row: ClaimedRow,
  settlement: Settlement,
  outcome: SettleOutcome | null,
): void {
  if (!outcome?.applied) return;
  if (settlement.status !== 'pending')
    deps.metrics.recordFinal(row.lane, settlement.status, row.attempts - settlement.refundAttempt);
  if (outcome.event) deps.publisher.publish(outcome.event);
}
