import { type SqlClient, Statement } from '../../database/sql-client.js';
import { KEPT_ROWS } from '../../schema/partitioned-layout.js';
import { PARTITION_DAY_DEFAULT } from '../../schema/versions/0013-partition-days.js';

/**
 * Moves up to $4 rows that retention keeps (see KEPT_ROWS) out of the days from $2 (null: every day before) to $3,
 * into today's partition, with their attempts and feedback, before retention drops those days' partitions. PostgreSQL
 * moves a row whose partition key changes by deleting and inserting it, which changes where it is: a concurrent
 * writer of the row then fails (40001). So rows another session holds are skipped (a claim's, an operator's), and a
 * `sending` row is never moved: its settle and lease renewals find it by id and lock token, and its partition waits
 * until it is settled, to be moved at the next run. The row's idempotency key follows it through the key's trigger.
 */
export const MOVE_FORWARD = new Statement((t) => ({
  name: 'reliable_mail_move_forward',
  text: `with moved as (
    update ${t.outbox} o set partition_day = ${PARTITION_DAY_DEFAULT}
    where o.id = any(array(
      select id from ${t.outbox}
      where ($2::date is null or partition_day >= $2::date) and partition_day < $3::date and ${KEPT_ROWS}
      limit $4 for update skip locked
    )) and ($2::date is null or o.partition_day >= $2::date) and o.partition_day < $3::date
    returning o.id
  ), attempts as (
    -- By row alone, through each partition's index of rows: a condition on the day would let a plan made on empty
    -- tables read a whole partition through another index that holds the day (the feedback's repeats).
    update ${t.attempt} a set partition_day = ${PARTITION_DAY_DEFAULT}
    where a.outbox_id = any(array(select id from moved))
  ), feedback as (
    update ${t.feedback} f set partition_day = ${PARTITION_DAY_DEFAULT}
    where f.outbox_id = any(array(select id from moved))
  )
  select count(*)::int as moved from moved`,
}));

export async function moveForward(
  db: SqlClient,
  keepClosedForMs: number,
  from: string | null,
  to: string,
  batchSize: number,
): Promise<number> {
  const [row] = await db.query<{ moved: number }>(MOVE_FORWARD, [keepClosedForMs, from, to, batchSize]);
  return row.moved;
}
