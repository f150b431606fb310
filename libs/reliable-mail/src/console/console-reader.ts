import { Injectable } from '@nestjs/common';
import { OutboxFilterError } from '../errors.js';
import { checkLimit, checkRowId, checkSearchFilter, checkTextCursor } from '../admin/outbox-filter.js';
import { MailOutboxService } from '../outbox/mail-outbox.service.js';
import { listInstances } from '../outbox/sql/instances.js';
import { listRows } from '../outbox/sql/list.js';
import { listSuppressions } from '../outbox/sql/suppression.js';
import type { Suppression } from '../outbox/operations.types.js';
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

const SUPPRESSIONS_PAGE = 100;
/** What the web console reads: the overview, a search over the mails, one mail's timeline, the audit. */
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
  async suppressions(page: { from?: string; after?: string }): Promise<{ items: Suppression[]; next: string | null }> {
    const from = checkTextCursor('from', page.from);
    const after = checkTextCursor('after', page.after);
    const rows = await listSuppressions(await this.db(), SUPPRESSIONS_PAGE + 1, after, from?.toLowerCase());
    return {
      items: rows.slice(0, SUPPRESSIONS_PAGE),
      next: rows.length > SUPPRESSIONS_PAGE ? rows[SUPPRESSIONS_PAGE - 1].address : null,
    };
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
