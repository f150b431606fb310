import type { OutboxStatus } from '../mail.types.js';
import type { OutboxFilter } from '../operations.types.js';
import { whereOf } from './filter.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';

/** Statuses an operator may purge: nothing is left to do for them. Pending and sending rows are never purged. */
export const CLOSED_STATUSES: readonly OutboxStatus[] = [
  'sent',
  'cancelled',
  'expired',
  'suppressed',
  'failed',
  'dead',
];

/** Deletes closed rows (their attempts and events go with them) matching the filter; returns how many. */
export async function purgeRows(db: SqlClient, filter: OutboxFilter): Promise<number> {
  const where = whereOf(filter, 2);
  const rows = await db.query(
    new Statement((t) => ({
      text: `delete from ${t.outbox} o where o.status = any($1::text[]) and ${where.sql} returning o.id`,
    })),
    [CLOSED_STATUSES, ...where.values],
  );
  return rows.length;
}
