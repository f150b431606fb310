import { type SqlClient, Statement } from '../../database/sql-client.js';
import type { OutboxStatus } from '../../outbox/mail.types.js';
import { type SearchFilter, whereOf } from '../../outbox/sql/filter.js';

/**
 * Which recipients of the rows a filter matches are on the suppression list: a requeue warns of them by name, since
 * they stay suppressed. Up to 50, from the rows' recipients column, one probe of the list's primary key per
 * address.
 */
export async function suppressedRecipients(
  db: SqlClient,
  filter: SearchFilter,
  statuses: readonly OutboxStatus[],
): Promise<string[]> {
  const where = whereOf(filter, 2);
  const rows = await db.query<{ address: string }>(
    new Statement((t) => ({
      text: `select distinct s.address from ${t.outbox} o
             cross join lateral unnest(o.recipients) r(address)
             join ${t.suppression} s on s.address = r.address
             where o.status = any($1::text[]) and ${where.sql} order by s.address limit 50`,
    })),
    [statuses, ...where.values],
  );
  return rows.map((row) => row.address);
}
