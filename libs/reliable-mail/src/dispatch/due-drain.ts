import { randomUUID } from 'node:crypto';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { SqlClient } from '../database/sql-client.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import { claimRows } from '../outbox/sql/claim.js';
import { releaseRows } from '../outbox/sql/release.js';
import type { ResolvedLane, ResolvedReliableMailOptions } from '../options/resolve-options.js';
import type { Delivery } from './delivery.js';
import { SETTLE_MARGIN_MS } from './lease.js';
import type { SettleOutcome, Settler } from './settler.js';

/** What one drain did: the rows it settled, by the status each was left in. */
export interface DrainReport {
  sent: number;
  /** Refused, unrenderable, out of attempts or time, suppressed or cancelled: final without being sent. */
  failed: number;
  /** Deferred to a later retry (a transient failure or an outage): they stay pending. */
  pending: number;
}

export interface DueDrainDependencies {
  database: SqlClient;
  settler: Settler;
  publisher: MailEventPublisher;
  metrics: MailMetrics;
  options: ResolvedReliableMailOptions;
}

/**
 * After a settle: the final status is counted and its event emitted, apart from the lane, so that a slow listener
 * never holds a send slot.
 */
export function reportSettled(
  deps: Pick<DueDrainDependencies, 'metrics' | 'publisher'>,
  row: ClaimedRow,
  settlement: Settlement,
  outcome: SettleOutcome | null,
): void {
  if (!outcome?.applied) return;
  if (settlement.status !== 'pending')
    deps.metrics.recordFinal(row.lane, settlement.status, row.attempts - settlement.refundAttempt);
  if (outcome.event) deps.publisher.publish(outcome.event);
}

/**
 * Sends every row due now, lane after lane, until a claim finds none, then waits for the emissions of their events
 * (up to a listener timeout): the dispatcher's loop run to the end once, with no timer, for tests and scripts. It
 * claims as the loop does (`SKIP LOCKED`, a lease), so a dispatcher running beside it never sends a row twice. Each
 * row is tried once per drain: one deferred (a transient failure; an outage, which the loop would wait out) is
 * handed back if it comes round again, and counted pending. Rows scheduled for later are not due.
 */
export async function drainDue(
  lanes: ReadonlyArray<{ lane: ResolvedLane; delivery: Delivery }>,
  deps: DueDrainDependencies,
): Promise<DrainReport> {
  const report: DrainReport = { sent: 0, failed: 0, pending: 0 };
  const { workerId, leaseMs } = deps.options.dispatcher;
  const never = new AbortController().signal;
  const tried = new Set<string>();
  for (const { lane, delivery } of lanes) {
    for (;;) {
      const rows = await claimRows(deps.database, {
        lane: lane.name,
        limit: lane.concurrency,
        lockToken: randomUUID(),
        workerId,
        leaseMs,
        maxAgeMs: deps.options.retry.maxAgeMs,
      });
      const again = rows.filter((row) => tried.has(row.id));
      if (again.length > 0) await releaseRows(deps.database, again);
      const fresh = rows.filter((row) => !tried.has(row.id));
      if (fresh.length === 0) break;
      await Promise.all(
        fresh.map(async (row) => {
          tried.add(row.id);
          const settlement = await delivery.deliver(row, () => new Date(), never);
          reportSettled(
            deps,
            row,
            settlement,
            await deps.settler.settle(settlement, row.leaseEndsAt - SETTLE_MARGIN_MS),
          );
          if (settlement.status === 'sent') report.sent++;
          else if (settlement.status === 'pending') report.pending++;
          else report.failed++;
        }),
      );
    }
  }
  await deps.publisher.emissionsHeard(Date.now() + deps.options.events.listenerTimeoutMs);
  return report;
}
