import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Deletes up to $2 sent, cancelled, expired and suppressed rows last changed more than $1 ms ago, oldest first,
 * from the closed rows' partial index. Rows another session holds are skipped, so retention never waits on the
 * dispatchers, and a small batch never holds its locks for long. Failed and dead rows wait for an operator.
 */
const DELETE_RETAINED = new Statement((t) => ({
  name: 'reliable_mail_retention',
  text: `delete from ${t.outbox} where id = any(array(
    select id from ${t.outbox}
    where status in ('sent', 'cancelled', 'expired', 'suppressed') and updated_at < now() - $1::float8 * interval '1 millisecond'
    order by updated_at limit $2 for update skip locked
  )) returning id`,
}));

export async function deleteRetained(db: SqlClient, olderThanMs: number, batchSize: number): Promise<number> {
  const rows = await db.query(DELETE_RETAINED, [olderThanMs, batchSize]);
  return rows.length;
}
