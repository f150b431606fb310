import type { ClaimedRow } from '../queue.types.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Gives claimed rows back untouched (their send never started: shutdown, or a lane paused by its server): the
 * claim's attempt is taken back and its attempt record deleted, so each row is as if it had never been claimed.
 */
const RELEASE = new Statement((t) => ({
  name: 'reliable_mail_release',
  text: `with released as (
    update ${t.outbox} o
    set status = 'pending', attempts = o.attempts - 1, locked_until = null, lock_token = null, locked_by = null,
        updated_at = now()
    where o.id = any($1::uuid[]) and o.lock_token = ($2::uuid[])[array_position($1::uuid[], o.id)]
      and o.status = 'sending'
    returning o.id
  )
  delete from ${t.attempt} a where a.id = any($3::uuid[]) and a.outbox_id = any(array(select id from released))`,
}));

export async function releaseRows(
  db: SqlClient,
  rows: Array<Pick<ClaimedRow, 'id' | 'lockToken' | 'attemptId'>>,
): Promise<void> {
  await db.query(RELEASE, [
    rows.map((row) => row.id),
    rows.map((row) => row.lockToken),
    rows.flatMap((row) => (row.attemptId ? [row.attemptId] : [])),
  ]);
}
