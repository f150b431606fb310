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

/**
 * Deletes closed rows matching the filter, and their attempts and feedback; returns how many. The plain layout's
 * foreign keys would cascade; a partitioned outbox has none (see versions/0013-partition-days.ts), so the statement
 * deletes them itself, by row and day. Events are deleted once emitted and need no row.
 */
export async function purgeRows(db: SqlClient, filter: OutboxFilter): Promise<number> {
  const where = whereOf(filter, 2);
  const rows = await db.query(
    new Statement((t) => ({
      text: `with purged as (
        delete from ${t.outbox} o where o.status = any($1::text[]) and ${where.sql} returning o.id, o.partition_day
      ), attempts as (
        delete from ${t.attempt} a using purged p where a.outbox_id = p.id and a.partition_day = p.partition_day
      ), feedback as (
        delete from ${t.feedback} f using purged p where f.outbox_id = p.id and f.partition_day = p.partition_day
      )
      select id from purged`,
    })),
    [CLOSED_STATUSES, ...where.values],
  );
  return rows.length;
}
