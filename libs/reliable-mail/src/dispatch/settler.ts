import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { SqlClient } from '../database/sql-client.js';
import { settleRows } from '../outbox/sql/settle.js';
import type { Settlement, StoredEvent } from '../outbox/queue.types.js';
import { Batcher } from '../shared/batcher.js';

const SETTLE_BATCH = 100;
const SETTLE_RETRIES = 5;

/** Whether a settle still owned its row, and the event it recorded for emission (none when nobody listens). */
export interface SettleOutcome {
  applied: boolean;
  event: StoredEvent | null;
}

/**
 * Writes what became of sent rows: the settlements of every lane that finish while one settle statement runs go
 * together into the next, each still guarded by its own lock token. An event is recorded with its settle only
 * when something in this process listens for it.
 */
export class Settler {
  private readonly batcher: Batcher<Settlement, SettleOutcome>;

  constructor(
    database: SqlClient,
    publisher: MailEventPublisher,
    eventLeaseMs: number,
    private readonly logger: Logger,
  ) {
    this.batcher = new Batcher(async (settlements) => {
      const recorded = settlements.map((settlement) =>
        settlement.eventName && publisher.isListenedTo(settlement.eventName)
          ? settlement
          : { ...settlement, eventName: null },
      );
      const applied = await settleRows(database, recorded, eventLeaseMs);
      return settlements.map((settlement) => ({
        applied: applied.has(settlement.id),
        event: applied.get(settlement.id) ?? null,
      }));
    }, SETTLE_BATCH);
  }

  /** Settles with a few retries, since the statement is idempotent; null when it could not be written at all. */
  async settle(settlement: Settlement): Promise<SettleOutcome | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        const outcome = await this.batcher.add(settlement);
        if (!outcome.applied) {
          this.logger.warn({
            msg: 'settle ignored: the lease was lost and another worker owns the row',
            id: settlement.id,
            outcome: settlement.outcome,
          });
        }
        return outcome;
      } catch (error) {
        if (attempt >= SETTLE_RETRIES) {
          this.logger.error({
            msg: 'settle failed; the row is claimed again after its lease',
            id: settlement.id,
            outcome: settlement.outcome,
            error: String(error),
          });
          return null;
        }
        await sleep(100 * 2 ** attempt);
      }
    }
  }
}
