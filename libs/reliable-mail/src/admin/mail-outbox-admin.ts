import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, Logger } from '@nestjs/common';
import { MailValidationError } from '../errors.js';
import type { OutboxRowWithAttempts, OutboxStatus } from '../outbox/mail.types.js';
import { MailOutboxService } from '../outbox/mail-outbox.service.js';
import { normalizeAddress } from '../outbox/validation/addresses.js';
import type { OutboxFilter, OutboxStats, Suppression } from '../outbox/operations.types.js';
import { outboxStats } from '../outbox/sql/health.js';
import { exportPage, listRows } from '../outbox/sql/list.js';
import { countMatching, matchingIds } from '../outbox/sql/filter.js';
import { CLOSED_STATUSES, purgeRows } from '../outbox/sql/purge.js';
import { REQUEUABLE_STATUSES, requeueRows } from '../outbox/sql/requeue.js';
import { checkFilter } from './outbox-filter.js';
import { type SqlClient, transactionOf } from '../database/sql-client.js';
import { addSuppression, listSuppressions, removeSuppression } from '../outbox/sql/suppression.js';

const EXPORT_PAGE = 500;
const MAX_LIST = 1_000;

function requireReason(reason: string): void {
  if (typeof reason !== 'string' || reason.trim().length === 0) {
    throw new MailValidationError('reason', 'is required: say why, for the next operator');
  }
}

/** The runbook's verbs: inspect, requeue, cancel, purge, export, the suppression list, and the figures. */
@Injectable()
export class MailOutboxAdmin {
  private readonly logger = new Logger('ReliableMail');

  constructor(
    private readonly em: EntityManager,
    private readonly outbox: MailOutboxService,
  ) {}

  /** The verbs run in the ambient transaction, if the operator's code opened one. */
  private get db(): SqlClient {
    return transactionOf(this.em);
  }

  /** Rows matching the filter, newest first, with their attempts. Continue with `before`: the last id of a page. */
  list(filter: OutboxFilter = {}, page: { limit?: number; before?: string } = {}): Promise<OutboxRowWithAttempts[]> {
    checkFilter(filter, null);
    const limit = Math.min(MAX_LIST, Math.max(1, page.limit ?? 50));
    return listRows(this.db, filter, limit, page.before);
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
    checkFilter(filter, 'requeue');
    requireReason(reason);
    if (dryRun) return matchingIds(this.db, filter, REQUEUABLE_STATUSES);
    const ids = await requeueRows(this.db, filter, reason);
    this.logger.log({ msg: 'requeued', count: ids.length, reason, filter });
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
    checkFilter(filter, 'purge');
    if (dryRun) return countMatching(this.db, filter, CLOSED_STATUSES);
    const count = await purgeRows(this.db, filter);
    this.logger.log({ msg: 'purged', count, filter });
    return count;
  }

  /** Rows created in [from, to) with their attempts, one JSON document per line, for audits and restores. */
  async *exportJsonLines(period: { from: Date; to: Date }): AsyncGenerator<string> {
    let after: string | undefined;
    for (;;) {
      const rows = await exportPage(this.db, period.from, period.to, EXPORT_PAGE, after);
      for (const row of rows) yield `${JSON.stringify(row)}\n`;
      if (rows.length < EXPORT_PAGE) return;
      after = rows[rows.length - 1].id;
    }
  }

  stats(): Promise<OutboxStats> {
    return outboxStats(this.db);
  }

  listSuppressions(page: { limit?: number; after?: string } = {}): Promise<Suppression[]> {
    return listSuppressions(this.db, Math.min(MAX_LIST, Math.max(1, page.limit ?? 100)), page.after);
  }

  async suppress(address: string, reason: string): Promise<void> {
    requireReason(reason);
    await addSuppression(this.db, normalizeAddress('address', address), reason);
  }

  /** Takes an address off the suppression list; returns whether it was on it. */
  unsuppress(address: string): Promise<boolean> {
    return removeSuppression(this.db, normalizeAddress('address', address));
  }
}
