import { Injectable, Logger } from '@nestjs/common';
import { checkSearchFilter } from '../admin/outbox-filter.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import type { SqlClient } from '../database/sql-client.js';
import { MailValidationError } from '../errors.js';
import type { OutboxStatus } from '../outbox/mail.types.js';
import { cancelRow } from '../outbox/sql/cancel.js';
import { matchingIds } from '../outbox/sql/filter.js';
import { REQUEUABLE_STATUSES, requeueRows } from '../outbox/sql/requeue.js';
import { addSuppression, removeSuppression } from '../outbox/sql/suppression.js';
import { normalizeAddress } from '../outbox/validation/addresses.js';
import { checkStorable } from '../outbox/validation/json.js';
import type { ConsoleFilter } from './console-data.types.js';
import type { ConsoleAccess } from './console-options.js';
import { recordAudit } from './sql/audit.js';
import { suppressedRecipients } from './sql/suppressed-recipients.js';

export type MailAction = 'requeue' | 'cancel';

/** The statuses each action changes; rows in others are left as they are. */
const ACTION_STATUSES: Record<MailAction, readonly OutboxStatus[]> = {
  requeue: REQUEUABLE_STATUSES,
  cancel: ['pending', 'sending'],
};

/** What an action would change, counted without changing it. */
export interface DryRun {
  ids: string[];
  suppressed: string[];
}

function checkReason(reason: unknown): string {
  if (typeof reason !== 'string' || reason.trim().length === 0) {
    throw new MailValidationError('reason', 'is required: say why, for the audit and the next operator');
  }
  checkStorable('reason', reason);
  return reason.trim().slice(0, 500);
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
    const ids = await matchingIds(this.database, checkSearchFilter(filter, action), ACTION_STATUSES[action]);
    const suppressed = action === 'requeue' ? await suppressedRecipients(this.database, ids) : [];
    return { ids, suppressed };
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

  /** Cancels each pending row, and asks the sender of each row being sent to; returns the rows it changed. */
  private async cancel(db: SqlClient, filter: ConsoleFilter): Promise<string[]> {
    const changed: string[] = [];
    for (const id of await matchingIds(db, filter, ACTION_STATUSES.cancel)) {
      const status = await cancelRow(db, id);
      if (status === 'cancelled' || status === 'sending') changed.push(id);
    }
    return changed;
  }

  async suppress(access: ConsoleAccess, address: unknown, reason: unknown): Promise<void> {
    const normalized = normalizeAddress('address', address as string);
    const why = checkReason(reason);
    await this.database.transaction(async (db) => {
      await addSuppression(db, normalized, why);
      await recordAudit(db, {
        actor: access.actor,
        action: 'suppress',
        reason: why,
        filter: { address: normalized },
        outboxIds: [],
      });
    });
  }

  /** Returns whether the address was on the list; an address that was not is not audited, since nothing changed. */
  async unsuppress(access: ConsoleAccess, address: unknown, reason: unknown): Promise<boolean> {
    const normalized = normalizeAddress('address', address as string);
    const why = checkReason(reason);
    return this.database.transaction(async (db) => {
      const removed = await removeSuppression(db, normalized);
      if (removed) {
        await recordAudit(db, {
          actor: access.actor,
          action: 'unsuppress',
          reason: why,
          filter: { address: normalized },
          outboxIds: [],
        });
      }
      return removed;
    });
  }
}
