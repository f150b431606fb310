import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import { reportedAsOutage } from '../database/database-availability.js';
import type { SqlClient } from '../database/sql-client.js';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { Settlement, StoredEvent } from '../outbox/queue.types.js';
import {
  type AppliedSettlements,
  type SettleInput,
  settleInputOf,
  settleRows,
  settlementKey,
} from '../outbox/sql/settle.js';
import { refusedForItsValues } from '../database/statement-refusal.js';
import { Batcher } from '../shared/batcher.js';
import { withReportedTextNoted } from './noted-settlement.js';
import { shownSafely } from './outcome-check.js';

const SETTLE_BATCH = 100;
const FIRST_RETRY_MS = 200;
const LONGEST_RETRY_MS = 5_000;

/** Whether a settle still owned its row, and the event it recorded for emission (none when nobody listens). */
export interface SettleOutcome {
  applied: boolean;
  event: StoredEvent | null;
}

/** What became of one settlement's statement: its outcome (null when its turn came after its lease), or the error. */
type Written = { outcome: SettleOutcome | null } | { error: unknown };

/** A settlement waiting for its statement, with the end of the time its lease leaves it. */
interface PendingSettle {
  input: SettleInput;
  /** On the `performance.now()` clock. */
  deadline: number;
  /** Called with what its statement came to, as soon as that is known. */
  done(written: Written | Promise<Written>): void;
}

/**
 * Writes what became of sent rows: the settlements of every lane that finish while one settle statement runs go
 * together into the next, each still guarded by its own lock token. An event is recorded with its settle only when
 * something in this process listens for it or a relay destination takes it. Each settlement is written as JSON before
 * it joins a batch, and a batch that PostgreSQL refuses for its values is written again one settlement at a time, so
 * that one value it cannot store holds back no other row.
 *
 * No statement outlives a lease it carries. Settlements with a statement's whole bound left in their lease share a
 * statement, bounded by the earliest of their deadlines (the wait for a connection included); one with less goes in
 * a statement of its own, bounded by its own deadline, so that it shortens no other's bound and its timeout fails no
 * other. A settlement whose deadline passed while it waited for its turn (behind a statement on a connection gone
 * silent) is not sent at all. A settle that still reaches the server after its lease changes nothing (see settle.ts).
 */
export class Settler {
  private readonly batcher: Batcher<PendingSettle, void>;

  constructor(
    private readonly database: SqlClient,
    private readonly publisher: MailEventPublisher,
    private readonly eventLeaseMs: number,
    /** The longest a statement can take (`statementBoundMs`): a settlement with less left in its lease goes alone. */
    private readonly statementBoundMs: number,
    private readonly logger: Logger,
  ) {
    this.batcher = new Batcher((pending) => this.write(pending), SETTLE_BATCH);
  }

  /**
   * Settles, retrying with backoff through a database restart or failover until `deadline` (on the
   * `performance.now()` clock: the end of the row's lease, less a margin). The statement is idempotent, and while the
   * lease holds nobody else can send the row: giving up earlier would turn an outcome this process knows into an
   * `unknown` attempt and a second copy. Null when it could not be written by then.
   *
   * A settlement JSON cannot write, or PostgreSQL refuses for its values, would fail on every retry: it is written at
   * once with what the server or provider reported replaced by a note (`withReportedTextNoted`), in the status it
   * decided.
   */
  async settle(settlement: Settlement, deadline: number): Promise<SettleOutcome | null> {
    const recording = this.publisher.recordingOf(settlement.eventName);
    const recorded = recording ? settlement : { ...settlement, eventName: null };
    const forListeners = recording === 'listeners';
    let input = this.inputOf(recorded, forListeners);
    for (let retries = 0; input;) {
      const written = await this.turn(input, deadline);
      if ('outcome' in written) {
        const { outcome } = written;
        if (outcome?.applied && recorded.eventName) this.publisher.committed(recorded.eventName);
        if (!outcome) this.gaveUp(settlement, retries, 'its turn came after the lease');
        else if (!outcome.applied) {
          this.logger.warn({
            msg: 'settle ignored: the lease was lost and another worker owns the row',
            id: settlement.id,
            outcome: settlement.outcome,
          });
        }
        return outcome;
      }
      const { error } = written;
      if (input.settlement === recorded && refusedForItsValues(error)) {
        this.logger.error({
          msg: 'PostgreSQL refused the values of a settle; written with what the server reported replaced by a note',
          id: settlement.id,
          outcome: settlement.outcome,
          status: settlement.status,
          error: String(error),
        });
        input = this.notedInputOf(recorded, forListeners);
        continue;
      }
      const wait = Math.min(LONGEST_RETRY_MS, FIRST_RETRY_MS * 2 ** retries);
      if (performance.now() + wait > deadline) {
        this.gaveUp(settlement, retries, String(error));
        return null;
      }
      // Through an outage every settle under way retries: the database logged the outage once.
      if (retries === 0 && !reportedAsOutage(error)) {
        this.logger.warn({
          msg: 'settle failed; retrying while the lease holds',
          id: settlement.id,
          error: String(error),
        });
      }
      retries += 1;
      await sleep(wait);
    }
    return null;
  }

  /** The settlement written as JSON; when one of its values cannot be, the same decision with a note for them. */
  private inputOf(settlement: Settlement, forListeners: boolean): SettleInput | null {
    try {
      return settleInputOf(settlement, forListeners);
    } catch (error) {
      this.logger.error({
        msg: 'a value of a settle cannot be written as JSON; written with what the server reported replaced by a note',
        id: settlement.id,
        outcome: settlement.outcome,
        status: settlement.status,
        error: shownSafely(error),
      });
      return this.notedInputOf(settlement, forListeners);
    }
  }

  /** Null, the row left to its lease, only if even the noted settlement cannot be written (nothing known does that). */
  private notedInputOf(settlement: Settlement, forListeners: boolean): SettleInput | null {
    try {
      return settleInputOf(withReportedTextNoted(settlement), forListeners);
    } catch (error) {
      this.logger.error({
        msg: 'a settle cannot be written even with a note; the row is claimed again after its lease',
        id: settlement.id,
        error: shownSafely(error),
      });
      return null;
    }
  }

  /** One settlement's turn: in the next shared statement when its lease leaves a statement's bound, else alone. */
  private turn(input: SettleInput, deadline: number): Promise<Written> {
    if (deadline - performance.now() < this.statementBoundMs) return this.alone(input, deadline);
    return new Promise((done) => {
      this.batcher.add({ input, deadline, done }).catch((error: unknown) => done({ error }));
    });
  }

  /**
   * One batch: those of its settlements that still have a statement's bound left share one statement; each of the
   * others, whose lease came near its end while they waited, gets one of its own at once, its answer passed on as
   * soon as it comes.
   */
  private async write(pending: PendingSettle[]): Promise<void[]> {
    const now = performance.now();
    const shared: PendingSettle[] = [];
    for (const item of pending) {
      if (item.deadline - now >= this.statementBoundMs) shared.push(item);
      else item.done(this.alone(item.input, item.deadline));
    }
    await this.together(shared);
    return pending.map(() => undefined);
  }

  /** One statement for `items`; refused for the values of one of them, one statement each, one after the other. */
  private async together(items: PendingSettle[]): Promise<void> {
    if (items.length === 0) return;
    try {
      const timeoutMs = Math.min(...items.map(({ deadline }) => deadline)) - performance.now();
      const applied = await settleRows(
        this.database,
        items.map(({ input }) => input),
        this.eventLeaseMs,
        { timeoutMs },
      );
      for (const item of items) item.done({ outcome: outcomeOf(applied, item.input) });
    } catch (error) {
      const split = items.length > 1 && refusedForItsValues(error);
      for (const item of items) item.done(split ? await this.alone(item.input, item.deadline) : { error });
    }
  }

  /** A statement of its own, bounded by its own deadline; none once that passed. */
  private async alone(input: SettleInput, deadline: number): Promise<Written> {
    const timeoutMs = deadline - performance.now();
    if (timeoutMs <= 0) return { outcome: null };
    try {
      return { outcome: outcomeOf(await settleRows(this.database, [input], this.eventLeaseMs, { timeoutMs }), input) };
    } catch (error) {
      return { error };
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

function outcomeOf(applied: AppliedSettlements, { settlement }: SettleInput): SettleOutcome {
  const key = settlementKey(settlement);
  return { applied: applied.has(key), event: applied.get(key) ?? null };
}
