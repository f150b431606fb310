import { randomUUID } from 'node:crypto';
import type { Logger } from '@nestjs/common';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { SqlClient } from '../database/sql-client.js';
import { claimRows } from '../outbox/sql/claim.js';
import { releaseRows } from '../outbox/sql/release.js';
import type { ResolvedLane, ResolvedReliableMailOptions } from '../options/resolve-options.js';
import type { Delivery } from './delivery.js';
import { SETTLE_MARGIN_MS } from './lease.js';
import { reportSettled } from './settled-report.js';
import { settlementFor } from './settlement.js';
import type { Settler } from './settler.js';

/** What one drain did: the rows it settled, by the status each was left in. */
export interface DrainReport {
  sent: number;
  /** Refused, unrenderable, out of attempts or time, suppressed or cancelled: final without being sent. */
  failed: number;
  /** Deferred to a later retry (a transient failure or an outage), or left open by a settle that failed. */
  pending: number;
}

export interface DueDrainDependencies {
  database: SqlClient;
  settler: Settler;
  publisher: MailEventPublisher;
  metrics: MailMetrics;
  options: ResolvedReliableMailOptions;
  logger: Logger;
}

/**
 * Sends every row due now, lane after lane, until a claim finds none, then waits for the emissions of their events
 * (up to a listener timeout): the dispatcher's loop run to the end once, with no timer, for tests. It
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
    // Rows handed back come first in the next claim (they are due now): a claim that held only those grows, so
    // that rows due behind them are still reached.
    let limit = lane.concurrency;
    for (;;) {
      const rows = await claimRows(deps.database, {
        lane: lane.name,
        limit,
        lockToken: randomUUID(),
        workerId,
        leaseMs,
        maxAgeMs: deps.options.retry.maxAgeMs,
        unsubscribeCategory: lane.unsubscribe?.category,
      });
      const again = rows.filter((row) => tried.has(row.id));
      if (again.length > 0) await releaseRows(deps.database, again);
      const fresh = rows.filter((row) => !tried.has(row.id));
      if (fresh.length === 0) {
        if (rows.length < limit) break;
        limit *= 2;
        continue;
      }
      await Promise.all(
        fresh.map(async (row) => {
          tried.add(row.id);
          const settlement = row.skipReason
            ? settlementFor(row, { kind: 'skipped', reason: row.skipReason }, deps.options.retry, new Date(), 0)
            : await delivery
                .attempt(row, never)
                .then(({ result, durationMs }) =>
                  settlementFor(row, result, deps.options.retry, new Date(), durationMs),
                );
          const written = await deps.settler.settle(settlement, row.leaseEndsAt - SETTLE_MARGIN_MS);
          reportSettled({ ...deps, perMail: deps.options.logging.perMail }, row, settlement, written);
          // A settle that did not apply leaves the row open (sending until its lease ends): not done.
          if (!written?.applied || settlement.status === 'pending') report.pending++;
          else if (settlement.status === 'sent') report.sent++;
          else report.failed++;
        }),
      );
    }
  }
  await deps.publisher.emissionsHeard(Date.now() + deps.options.events.listenerTimeoutMs);
  return report;
}
