import { type BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import { reportedAsOutage } from '../database/database-availability.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import type { CallerTransaction, TransactionEnds } from '../transactions/caller-transaction.js';
import { notifyLanes } from './sql/notify.js';

/** How the dispatchers learn of one enqueue's rows. */
export interface WakeUpPlan {
  /** The insert itself NOTIFYs; PostgreSQL delivers it when the transaction commits. */
  readonly inStatement: boolean;
  /** Called once the insert succeeded: schedules the NOTIFY that follows the commit, where the statement sent none. */
  inserted(lanes: Iterable<string>): void;
  /** Called when the insert failed. */
  abandoned(): void;
}

/**
 * Wakes the dispatchers (of every instance) after an enqueue commits.
 *
 * A NOTIFY inside the enqueuing transaction is the fastest wake-up, but PostgreSQL serialises the commits of
 * notifying transactions (they queue on one lock, each waiting for its own WAL flush), which halves the rate at
 * which concurrent transactions can enqueue. So only a transaction that enqueues while no other enqueue of this
 * process is open notifies in its own statement; the others ask for a NOTIFY after their commit, and those are
 * coalesced into one small statement at a time. Either way the notification arrives after the rows are visible.
 * A process that dies between a commit and its NOTIFY leaves the rows to the dispatchers' polling. A transaction
 * whose stack does not report its commit (Prisma, Drizzle, Kysely, pg: no hook) always notifies in its statement.
 */
@Injectable()
export class WakeUpNotifier implements TransactionEnds, BeforeApplicationShutdown {
  private readonly logger = new Logger('ReliableMail');
  /** Enqueue statements running outside a transaction (each commits on its own). */
  private ownStatements = 0;
  /** Open top-level transactions with an enqueue, and the lanes to notify after their commit (null: notified in statement). */
  private readonly transactions = new Map<object, Set<string> | null>();
  private readonly due = new Set<string>();
  /** The NOTIFY statements under way, until every lane queued is notified; never rejects. */
  private sending: Promise<void> | null = null;
  /** NOTIFY statements sent since the start; at shutdown, the last one to send (none past it). */
  private sent = 0;
  private lastToSend = Infinity;

  constructor(private readonly database: OutboxDatabase) {}

  /** Decides how a write in `transaction` (null: a statement of its own) wakes the dispatchers. */
  plan(transaction: CallerTransaction | null): WakeUpPlan {
    if (transaction?.endReported) return this.planInTransaction(transaction.endReported);
    if (transaction) {
      // Nothing tells when it commits (or it is a savepoint, whose release is not the commit): the NOTIFY goes in
      // the statement, and PostgreSQL delivers it at the commit.
      return { inStatement: true, inserted: () => undefined, abandoned: () => undefined };
    }
    const inStatement = !this.anyOpen();
    this.ownStatements++;
    return {
      inStatement,
      inserted: (lanes) => {
        this.ownStatements--;
        if (!inStatement) this.notifyLater(lanes);
      },
      abandoned: () => {
        this.ownStatements--;
      },
    };
  }

  /** Whether an enqueue of this process is open: its statement running, or its transaction not ended. */
  private anyOpen(): boolean {
    return this.ownStatements > 0 || this.transactions.size > 0;
  }

  private planInTransaction(transaction: object): WakeUpPlan {
    const known = this.transactions.get(transaction);
    if (known !== undefined) {
      return {
        inStatement: known === null,
        inserted: (lanes) => known && addAll(known, lanes),
        abandoned: () => undefined,
      };
    }
    const lanes = this.anyOpen() ? new Set<string>() : null;
    this.transactions.set(transaction, lanes);
    return {
      inStatement: lanes === null,
      inserted: (inserted) => lanes && addAll(lanes, inserted),
      abandoned: () => undefined,
    };
  }

  /** Told by the stack's commit and rollback events; never throws (TypeORM awaits it inside the caller's commit). */
  ended(transaction: object, committed: boolean): void {
    const lanes = this.transactions.get(transaction);
    this.transactions.delete(transaction);
    if (committed && lanes) this.notifyLater(lanes);
  }

  /** Queues the lanes for the next NOTIFY statement; one runs at a time and takes every lane queued meanwhile. */
  private notifyLater(lanes: Iterable<string>): void {
    addAll(this.due, lanes);
    if (this.due.size > 0 && !this.sending) this.sending = this.send();
  }

  /**
   * Lets the NOTIFY of the last commits go before reliable-mail's connections close: a script that enqueues and
   * closes the app at once would otherwise leave its mail to the next poll, with a warning that it could not notify.
   * The statement under way and one more, for every lane due by now: an app still enqueueing while it shuts down
   * keeps shutdown waiting no longer than that, and its later mail is found at the dispatchers' next poll.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.lastToSend = this.sent + 1;
    await this.sending;
  }

  private async send(): Promise<void> {
    try {
      while (this.due.size > 0 && this.sent < this.lastToSend) {
        const lanes = [...this.due];
        this.due.clear();
        this.sent++;
        await notifyLanes(this.database, lanes);
      }
    } catch (error) {
      this.due.clear();
      if (!reportedAsOutage(error)) {
        this.logger.warn({
          msg: 'could not notify the dispatchers; they find the mail at their next poll',
          error: String(error),
        });
      }
    } finally {
      this.sending = null;
    }
  }
}

function addAll(target: Set<string>, items: Iterable<string>): void {
  for (const item of items) target.add(item);
}
