import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import type { SqlClient } from '../database/sql-client.js';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { Settlement, StoredEvent } from '../outbox/queue.types.js';
import { settleRows, settlementKey } from '../outbox/sql/settle.js';
import { Batcher } from '../shared/batcher.js';

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
 * when something in this process listens for it.
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
    this.batcher = new Batcher(async (pending) => {
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
    }, SETTLE_BATCH);
  }

  /**
   * Settles, retrying with backoff through a database restart or failover until `deadline` (on the
   * `performance.now()` clock: the end of the row's lease, less a margin). The statement is idempotent, and while the
   * lease holds nobody else can send the row: giving up earlier would turn an outcome this process knows into an
   * `unknown` attempt and a second copy. Null when it could not be written by then.
   */
  async settle(settlement: Settlement, deadline: number): Promise<SettleOutcome | null> {
    for (let retry = 0; ; retry++) {
      try {
        const outcome = await this.batcher.add({ settlement, deadline });
        if (!outcome) {
          this.gaveUp(settlement, retry, 'its turn came after the lease');
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
        const wait = Math.min(LONGEST_RETRY_MS, FIRST_RETRY_MS * 2 ** retry);
        if (performance.now() + wait > deadline) {
          this.gaveUp(settlement, retry, String(error));
          return null;
        }
        if (retry === 0) {
          this.logger.warn({
            msg: 'settle failed; retrying while the lease holds',
            id: settlement.id,
            error: String(error),
          });
        }
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
