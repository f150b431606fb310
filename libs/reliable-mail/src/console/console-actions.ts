import { Injectable, Logger } from '@nestjs/common';
import { checkSearchFilter } from '../admin/outbox-filter.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import type { SqlClient } from '../database/sql-client.js';
import { MailValidationError } from '../errors.js';
import type { OutboxStatus } from '../outbox/mail.types.js';
import type { Unsubscribe } from '../outbox/operations.types.js';
import { CANCELLABLE_STATUSES, cancelRows } from '../outbox/sql/cancel.js';
import { countMatching, matchingIds } from '../outbox/sql/filter.js';
import { REQUEUABLE_STATUSES, requeueRows } from '../outbox/sql/requeue.js';
import { addSuppression, removeSuppression } from '../outbox/sql/suppression.js';
import { normalizeAddress } from '../outbox/validation/addresses.js';
import { checkStorable } from '../outbox/validation/json.js';
import { removeUnsubscribe } from '../unsubscribe/sql/unsubscribes.js';
import { checkCategory } from '../unsubscribe/unsubscribe-category.js';
import type { ConsoleFilter } from './console-data.types.js';
import type { ConsoleAccess } from './console-options.js';
import { recordAudit } from './sql/audit.js';
import { suppressedRecipients } from './sql/suppressed-recipients.js';

export type MailAction = 'requeue' | 'cancel';

/** The statuses each action changes; rows in others are left as they are. */
const ACTION_STATUSES: Record<MailAction, readonly OutboxStatus[]> = {
  requeue: REQUEUABLE_STATUSES,
  cancel: CANCELLABLE_STATUSES,
};

/** What an action would change, counted without changing it. */
export interface DryRun {
  count: number;
  /** Recipients of those mails on the suppression list (up to 50): requeued, they stay suppressed. */
  suppressed: string[];
}

const MAX_REASON_LENGTH = 500;

function checkReason(reason: unknown): string {
  if (typeof reason !== 'string' || reason.trim().length === 0) {
    throw new MailValidationError('reason', 'is required: say why, for the audit and the next operator');
  }
  checkStorable('reason', reason);
  if (reason.trim().length > MAX_REASON_LENGTH) {
    throw new MailValidationError('reason', `must be at most ${MAX_REASON_LENGTH} characters`);
  }
  return reason.trim();
}

/**
 * An unsubscribe as an operator names it, from a link or a form: the address as the rows keep it (lower case) and
 * the category, which is taken as it is, since it names what a row holds.
 */
export function unsubscribeOf(address: unknown, category: unknown): Pick<Unsubscribe, 'address' | 'category'> {
  return { address: normalizeAddress('address', address as string), category: checkCategory('category', category) };
}

/**
 * The console's actions. Each runs in one transaction with its audit entry (who, what, why, on which rows): an
 * action is recorded if and only if it happened, and the rows named are those it changed, not those it was shown.
 */
@Injectable()
export class ConsoleActions {
  private readonly logger = new Logger('ReliableMail');

  constructor(private readonly database: OutboxDatabase) {}

  async dryRun(action: MailAction, filter: ConsoleFilter): Promise<DryRun> {
    const checked = checkSearchFilter(filter, action);
    const statuses = ACTION_STATUSES[action];
    const [count, suppressed] = await Promise.all([
      countMatching(this.database, checked, statuses),
      action === 'requeue' ? suppressedRecipients(this.database, checked, statuses) : [],
    ]);
    return { count, suppressed };
  }

  async apply(access: ConsoleAccess, action: MailAction, filter: ConsoleFilter, reason: unknown): Promise<string[]> {
    const checked = checkSearchFilter(filter, action);
    const why = checkReason(reason);
    const ids = await this.database.transaction(async (db) => {
      const changed = action === 'requeue' ? await requeueRows(db, checked, why) : await this.cancel(db, checked);
      // An action that changed nothing (the rows moved on since its page was shown) did not happen.
      if (changed.length > 0) {
        await recordAudit(db, { actor: access.actor, action, reason: why, filter: checked, outboxIds: changed });
      }
      return changed;
    });
    this.logger.log({ msg: `console ${action}`, actor: access.actor, count: ids.length, reason: why });
    return ids;
  }

  /** Cancels the matching pending rows and asks the senders of those being sent to; returns the rows it changed. */
  private async cancel(db: SqlClient, filter: ConsoleFilter): Promise<string[]> {
    const changed = await cancelRows(db, await matchingIds(db, filter, CANCELLABLE_STATUSES));
    return changed.map((row) => row.id);
  }

  async suppress(access: ConsoleAccess, address: unknown, reason: unknown): Promise<void> {
    const normalized = normalizeAddress('address', address as string);
    const why = checkReason(reason);
    await this.database.transaction(async (db) => {
      await addSuppression(db, normalized, why);
      await this.recordOnList(db, access, 'suppress', { address: normalized }, why);
    });
  }

  /** Returns whether the address was on the list; an address that was not is not audited, since nothing changed. */
  async unsuppress(access: ConsoleAccess, address: unknown, reason: unknown): Promise<boolean> {
    const normalized = normalizeAddress('address', address as string);
    const why = checkReason(reason);
    return this.database.transaction(async (db) => {
      const removed = await removeSuppression(db, normalized);
      if (removed) await this.recordOnList(db, access, 'unsuppress', { address: normalized }, why);
      return removed;
    });
  }

  /**
   * Takes back an address's unsubscribe from a category; returns whether there was one. One that was not there is
   * not audited, since nothing changed.
   */
  async resubscribe(access: ConsoleAccess, address: unknown, category: unknown, reason: unknown): Promise<boolean> {
    const unsubscribe = unsubscribeOf(address, category);
    const why = checkReason(reason);
    return this.database.transaction(async (db) => {
      const removed = await removeUnsubscribe(db, unsubscribe.address, unsubscribe.category);
      if (removed) await this.recordOnList(db, access, 'resubscribe', unsubscribe, why);
      return removed;
    });
  }

  /**
   * An action on the suppression list or the unsubscribes, whose target is an address (and a category, for an
   * unsubscribe) and no mail.
   */
  private async recordOnList(
    db: SqlClient,
    access: ConsoleAccess,
    action: string,
    target: { address: string },
    reason: string,
  ) {
    await recordAudit(db, { actor: access.actor, action, reason, filter: target, outboxIds: [] });
  }
}
