import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Deletes up to $2 feedback rows that named no outbox row and were received more than $1 ms ago. Linked feedback
 * goes with its row (the foreign key cascades); this is the rest, which would otherwise stay for good.
 */
const DELETE_UNLINKED = new Statement((t) => ({
  name: 'reliable_mail_feedback_retention',
  text: `delete from ${t.feedback} where id = any(array(
    select id from ${t.feedback}
    where outbox_id is null and received_at < now() - $1::float8 * interval '1 millisecond'
    order by received_at limit $2
  )) returning id`,
}));

export async function deleteUnlinkedFeedback(db: SqlClient, olderThanMs: number, batchSize: number): Promise<number> {
  const rows = await db.query(DELETE_UNLINKED, [olderThanMs, batchSize]);
  return rows.length;
}
