import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import type { SqlClient } from '../database/sql-client.js';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { Settlement, StoredEvent } from '../outbox/queue.types.js';
import { settleRows, settlementKey } from '../outbox/sql/settle.js';
import { refusedForItsValues } from '../database/statement-refusal.js';
import { Batcher } from '../shared/batcher.js';
import { withReportedTextNoted } from './noted-settlement.js';

const SETTLE_BATCH = 100;
const FIRST_RETRY_MS = 200;
const LONGEST_RETRY_MS = 5_000;

/** Whether a settle still owned its row, and the event it recorded for emission (none when nobody listens). */
export interface SettleOutcome {
  applied: boolean;
  event: StoredEvent | null;
}

/** A settlement waiting for its statement, with the end of the time its lease leaves it. */
interface PendingSettle {
  settlement: Settlement;
  /** On the `performance.now()` clock. */
  deadline: number;
}

/**
 * Writes what became of sent rows: the settlements of every lane that finish while one settle statement runs go
 * together into the next, each still guarded by its own lock token. An event is recorded with its settle only
 * when something in this process listens for it. A batch that PostgreSQL refuses for its values is written again
 * one settlement at a time, so that one value it cannot store holds back no other row.
 *
 * No statement outlives a lease it carries: each is bounded by the earliest deadline of its settlements, the wait
 * for a connection included, and a settlement whose deadline passed while it waited for its turn (behind a
 * statement on a connection gone silent) is not sent at all. A settle that still reaches the server after its lease
 * changes nothing (see settle.ts).
 */
export class Settler {
  private readonly batcher: Batcher<PendingSettle, SettleOutcome | null>;

  constructor(
    database: SqlClient,
    publisher: MailEventPublisher,
    eventLeaseMs: number,
    private readonly logger: Logger,
  ) {
    this.batcher = new Batcher(
      async (pending) => {
        const now = performance.now();
        const inTime = pending.filter(({ deadline }) => deadline > now);
        const recorded = inTime.map(({ settlement }) =>
          settlement.eventName && publisher.isListenedTo(settlement.eventName)
            ? settlement
            : { ...settlement, eventName: null },
        );
        const timeoutMs = Math.min(...inTime.map(({ deadline }) => deadline)) - now;
        const applied = await settleRows(database, recorded, eventLeaseMs, { timeoutMs });
        return pending.map(({ settlement, deadline }) =>
          deadline > now
            ? { applied: applied.has(settlementKey(settlement)), event: applied.get(settlementKey(settlement)) ?? null }
            : null,
        );
      },
      SETTLE_BATCH,
      { splitOn: refusedForItsValues },
    );
  }

  /**
   * Settles, retrying with backoff through a database restart or failover until `deadline` (on the
   * `performance.now()` clock: the end of the row's lease, less a margin). The statement is idempotent, and while the
   * lease holds nobody else can send the row: giving up earlier would turn an outcome this process knows into an
   * `unknown` attempt and a second copy. Null when it could not be written by then.
   *
   * A settlement PostgreSQL refuses for its values would be refused on every retry: it is written at once with what
   * the server or provider reported replaced by a note (`withReportedTextNoted`), in the status it decided.
   */
  async settle(settlement: Settlement, deadline: number): Promise<SettleOutcome | null> {
    let writing = settlement;
    for (let retries = 0; ;) {
      try {
        const outcome = await this.batcher.add({ settlement: writing, deadline });
        if (!outcome) {
          this.gaveUp(settlement, retries, 'its turn came after the lease');
          return null;
        }
        if (!outcome.applied) {
          this.logger.warn({
            msg: 'settle ignored: the lease was lost and another worker owns the row',
            id: settlement.id,
            outcome: settlement.outcome,
          });
        }
        return outcome;
      } catch (error) {
        if (writing === settlement && refusedForItsValues(error)) {
          this.logger.error({
            msg: 'PostgreSQL refused the values of a settle; written with what the server reported replaced by a note',
            id: settlement.id,
            outcome: settlement.outcome,
            status: settlement.status,
            error: String(error),
          });
          writing = withReportedTextNoted(settlement);
          continue;
        }
        const wait = Math.min(LONGEST_RETRY_MS, FIRST_RETRY_MS * 2 ** retries);
        if (performance.now() + wait > deadline) {
          this.gaveUp(settlement, retries, String(error));
          return null;
        }
        if (retries === 0) {
          this.logger.warn({
            msg: 'settle failed; retrying while the lease holds',
            id: settlement.id,
            error: String(error),
          });
        }
        retries += 1;
        await sleep(wait);
      }
    }
  }

  private gaveUp(settlement: Settlement, retries: number, error: string): void {
    this.logger.error({
      msg: 'settle failed until the lease ran out: the row is claimed again and sent again (same Message-ID)',
      id: settlement.id,
      outcome: settlement.outcome,
      retries,
      error,
    });
  }
}
