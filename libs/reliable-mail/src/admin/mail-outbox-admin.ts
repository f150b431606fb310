import { Injectable, Logger } from '@nestjs/common';
import { MailValidationError, OutboxFilterError } from '../errors.js';
import type { OutboxRowWithAttempts, OutboxStatus } from '../outbox/mail.types.js';
import { MailOutboxService } from '../outbox/mail-outbox.service.js';
import { normalizeAddress } from '../outbox/validation/addresses.js';
import { checkStorable } from '../outbox/validation/json.js';
import type { OutboxFilter, OutboxStats, Suppression, Unsubscribe } from '../outbox/operations.types.js';
import { outboxStats } from '../outbox/sql/health.js';
import { exportPage, listRows } from '../outbox/sql/list.js';
import { countMatching, matchingIds } from '../outbox/sql/filter.js';
import { CLOSED_STATUSES, purgeRows } from '../outbox/sql/purge.js';
import { REQUEUABLE_STATUSES, requeueRows } from '../outbox/sql/requeue.js';
import { checkFilter, checkLimit, checkPeriod, checkRowId, checkTextCursor } from './outbox-filter.js';
import type { SqlClient } from '../database/sql-client.js';
import { addSuppression, listSuppressions, removeSuppression } from '../outbox/sql/suppression.js';
import { listUnsubscribes, type UnsubscribeCursor } from '../unsubscribe/sql/unsubscribes.js';

const EXPORT_PAGE = 500;
const MAX_LIST = 1_000;

function requireReason(reason: string): void {
  if (typeof reason !== 'string' || reason.trim().length === 0) {
    throw new MailValidationError('reason', 'is required: say why, for the next operator');
  }
  checkStorable('reason', reason);
}

/** A page of a list; null or a non-object would otherwise throw a TypeError at its first field. */
function pageOf<T extends object>(page: T | undefined): Partial<T> {
  if (page === undefined) return {};
  if (!page || typeof page !== 'object') throw new OutboxFilterError('page', 'must be an object such as { limit: 50 }');
  return page;
}

/** A page's cursor on unsubscribes: the address and category of the last of the page before, as they came. */
function unsubscribeCursor(after: unknown): UnsubscribeCursor | undefined {
  if (after === undefined) return undefined;
  const { address, category } = (after && typeof after === 'object' ? after : {}) as Record<string, unknown>;
  if (address === undefined || category === undefined)
    throw new OutboxFilterError('page.after', 'must be { address, category }: the last unsubscribe of the page before');
  return {
    address: checkTextCursor('page.after.address', address)!,
    category: checkTextCursor('page.after.category', category)!,
  };
}

/**
 * The runbook's verbs: inspect, requeue, cancel, purge, export, the suppression list, the unsubscribes, and the
 * figures.
 */
@Injectable()
export class MailOutboxAdmin {
  private readonly logger = new Logger('ReliableMail');

  constructor(private readonly outbox: MailOutboxService) {}

  /** The verbs run in the transaction the operator's code runs in, if any; else on reliable-mail's own connections. */
  private db(): Promise<SqlClient> {
    return this.outbox.statements();
  }

  /** Rows matching the filter, newest first, with their attempts. Continue with `before`: the last id of a page. */
  async list(filter: OutboxFilter = {}, page?: { limit?: number; before?: string }): Promise<OutboxRowWithAttempts[]> {
    const checked = checkFilter(filter, null);
    const { limit, before } = pageOf(page);
    return listRows(
      await this.db(),
      checked,
      checkLimit('page.limit', limit, 50, MAX_LIST),
      checkRowId('page.before', before),
    );
  }

  /** One row with its attempts. */
  inspect(id: string): Promise<OutboxRowWithAttempts> {
    return this.outbox.get(id);
  }

  /**
   * Sends failed, dead, expired, cancelled or suppressed rows again: same id and Message-ID, attempts from zero,
   * the reason recorded on the row. Returns the ids requeued; rows in other statuses are left as they are. With
   * `dryRun` nothing changes, and the ids are those it would requeue.
   */
  async requeue(
    filter: OutboxFilter,
    reason: string,
    { dryRun = false }: { dryRun?: boolean } = {},
  ): Promise<string[]> {
    const checked = checkFilter(filter, 'requeue');
    requireReason(reason);
    if (dryRun) return matchingIds(await this.db(), checked, REQUEUABLE_STATUSES);
    const ids = await requeueRows(await this.db(), checked, reason);
    this.logger.log({ msg: 'requeued', count: ids.length, reason, filter: checked });
    return ids;
  }

  cancel(id: string): Promise<{ id: string; status: OutboxStatus }> {
    return this.outbox.cancel(id);
  }

  /**
   * Deletes closed rows matching the filter, with their attempts; pending and sending rows are never purged.
   * Returns how many; with `dryRun` nothing is deleted and the count is of the rows it would delete.
   */
  async purge(filter: OutboxFilter, { dryRun = false }: { dryRun?: boolean } = {}): Promise<number> {
    const checked = checkFilter(filter, 'purge');
    if (dryRun) return countMatching(await this.db(), checked, CLOSED_STATUSES);
    const count = await purgeRows(await this.db(), checked);
    this.logger.log({ msg: 'purged', count, filter: checked });
    return count;
  }

  /** Rows created in [from, to) with their attempts, one JSON document per line, for audits and restores. */
  async *exportJsonLines(period: { from: Date; to: Date }): AsyncGenerator<string> {
    const { from, to } = checkPeriod(period);
    let after: string | undefined;
    for (;;) {
      const rows = await exportPage(await this.db(), from, to, EXPORT_PAGE, after);
      for (const row of rows) yield `${JSON.stringify(row)}\n`;
      if (rows.length < EXPORT_PAGE) return;
      after = rows[rows.length - 1].id;
    }
  }

  async stats(): Promise<OutboxStats> {
    return outboxStats(await this.db());
  }

  async listSuppressions(page?: { limit?: number; after?: string }): Promise<Suppression[]> {
    const { limit, after } = pageOf(page);
    return listSuppressions(
      await this.db(),
      checkLimit('page.limit', limit, 100, MAX_LIST),
      checkTextCursor('page.after', after),
    );
  }

  /**
   * The one-click unsubscribes, by address and category, a page at a time (`after`: the last of the page before).
   * `MailUnsubscribeService.resubscribe` takes one back when its recipient opts in again.
   */
  async listUnsubscribes(page?: { limit?: number; after?: UnsubscribeCursor }): Promise<Unsubscribe[]> {
    const { limit, after } = pageOf(page);
    return listUnsubscribes(await this.db(), checkLimit('page.limit', limit, 100, MAX_LIST), unsubscribeCursor(after));
  }

  async suppress(address: string, reason: string): Promise<void> {
    requireReason(reason);
    await addSuppression(await this.db(), normalizeAddress('address', address), reason);
  }

  /** Takes an address off the suppression list; returns whether it was on it. */
  async unsuppress(address: string): Promise<boolean> {
    return removeSuppression(await this.db(), normalizeAddress('address', address));
  }
}
