import { Injectable } from '@nestjs/common';
import { OutboxFilterError } from '../errors.js';
import { checkLimit, checkRowId, checkSearchFilter, checkTextCursor } from '../admin/outbox-filter.js';
import { MailOutboxService } from '../outbox/mail-outbox.service.js';
import { listInstances } from '../outbox/sql/instances.js';
import { listRows } from '../outbox/sql/list.js';
import { listSuppressions } from '../outbox/sql/suppression.js';
import type { Suppression, Unsubscribe } from '../outbox/operations.types.js';
import { listUnsubscribes, type UnsubscribeCursor } from '../unsubscribe/sql/unsubscribes.js';
import { isUuid } from '../shared/uuid.js';
import type { SqlClient } from '../database/sql-client.js';
import type { AuditEntry, ConsoleFilter, ConsoleOverview, MailPage, MailTimeline } from './console-data.types.js';
import { listAudit } from './sql/audit.js';
import { consoleCounts } from './sql/counts.js';
import { queueFigures } from './sql/figures.js';
import { mailPage } from './sql/mails.js';
import { minuteFigures } from './sql/minutes.js';
import { timelineExtras } from './sql/timeline.js';

const MAX_PAGE = 200;
/** A week of minutes, 10,080 points: more than a chart draws. */
const MAX_HOURS = 168;

/** The rows of a page of the suppression list or of the unsubscribes. */
const LIST_PAGE = 100;

/** A page of a list by address, and where the next starts: null on the last. */
export interface AddressListPage<T, C> {
  items: T[];
  next: C | null;
}

/** A page of a list read one row past it, which tells whether there is a next page. */
function listPage<T, C>(rows: T[], cursorOf: (last: T) => C): AddressListPage<T, C> {
  return { items: rows.slice(0, LIST_PAGE), next: rows.length > LIST_PAGE ? cursorOf(rows[LIST_PAGE - 1]) : null };
}

/**
 * What the web console reads: the overview, a search over the mails, one mail's timeline, the suppression list, the
 * unsubscribes, the audit.
 */
@Injectable()
export class ConsoleReader {
  constructor(private readonly outbox: MailOutboxService) {}

  /** In the transaction the caller's code runs in, if any; else on reliable-mail's own connections. */
  private db(): Promise<SqlClient> {
    return this.outbox.statements();
  }

  /**
   * Counts by status and lane (the sent ones estimated when many: see `estimated`), the backlog, the instances and
   * the figures of each minute of the last `hours` (more than 0, at most 168). Its statements run side by side.
   */
  async overview(hours = 6): Promise<ConsoleOverview> {
    if (typeof hours !== 'number' || !(hours > 0 && hours <= MAX_HOURS)) {
      throw new OutboxFilterError('hours', `must be a number of hours above 0 and at most ${MAX_HOURS}`);
    }
    const db = await this.db();
    const [counts, figures, instances, minutes] = await Promise.all([
      consoleCounts(db),
      queueFigures(db),
      listInstances(db),
      minuteFigures(db, hours),
    ]);
    return { counts, ...figures, instances, minutes };
  }

  /**
   * Mails matching the filter (the admin's fields, a Message-ID, a provider's message id), newest first, `limit`
   * (default 50, at most 200) at a time; continue with `before: page.next`. Refuses a filter as the admin does,
   * with an OutboxFilterError.
   */
  async mails(filter: ConsoleFilter = {}, page: { limit?: number; before?: string } = {}): Promise<MailPage> {
    const checked = checkSearchFilter(filter);
    if (!page || typeof page !== 'object')
      throw new OutboxFilterError('page', 'must be an object such as { limit: 50 }');
    return mailPage(
      await this.db(),
      checked,
      checkLimit('page.limit', page.limit, 50, MAX_PAGE),
      checkRowId('page.before', page.before),
    );
  }

  /** One mail with its attempts, feedback, pending events and the operators' actions on it; null if no such row. */
  async timeline(id: string): Promise<MailTimeline | null> {
    if (!isUuid(id)) return null;
    const db = await this.db();
    const [[row], extras] = await Promise.all([listRows(db, { ids: [id] }, 1), timelineExtras(db, id)]);
    if (!row || !extras) return null;
    return { row, ...extras };
  }

  /**
   * A page of the suppression list in address order: from `from` (a search's start, included), after `after` (the
   * last address of the page before).
   */
  async suppressions(page: { from?: string; after?: unknown }): Promise<AddressListPage<Suppression, string>> {
    const from = checkTextCursor('from', page.from);
    const after = checkTextCursor('after', page.after);
    const rows = await listSuppressions(await this.db(), LIST_PAGE + 1, after, from?.toLowerCase());
    return listPage(rows, (last) => last.address);
  }

  /**
   * A page of the unsubscribes in address and category order: from `from` (a search's start, included), after
   * `after` and `afterCategory` (the last of the page before, given together).
   */
  async unsubscribes(page: {
    from?: unknown;
    after?: unknown;
    afterCategory?: unknown;
  }): Promise<AddressListPage<Unsubscribe, UnsubscribeCursor>> {
    const from = checkTextCursor('from', page.from);
    const address = checkTextCursor('after', page.after);
    const category = checkTextCursor('afterCategory', page.afterCategory);
    if ((address === undefined) !== (category === undefined)) {
      throw new OutboxFilterError('after', 'and afterCategory go together: the last unsubscribe of the page before');
    }
    const after = address !== undefined && category !== undefined ? { address, category } : undefined;
    const rows = await listUnsubscribes(await this.db(), LIST_PAGE + 1, after, from?.toLowerCase());
    return listPage(rows, ({ address, category }) => ({ address, category }));
  }

  /** The operators' actions, newest first; continue with `before`: the last id of a page. */
  async audit(page: { limit?: number; before?: string } = {}): Promise<AuditEntry[]> {
    if (!page || typeof page !== 'object')
      throw new OutboxFilterError('page', 'must be an object such as { limit: 50 }');
    return listAudit(
      await this.db(),
      checkLimit('page.limit', page.limit, 50, MAX_PAGE),
      checkRowId('page.before', page.before),
    );
  }
}
