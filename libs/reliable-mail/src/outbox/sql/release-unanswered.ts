import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Gives back the rows of claims whose answer never reached their worker (its connection went silent or dropped
 * after the statement left): if such a claim committed, its rows are `sending` under a token only that worker knows,
 * and it never sends them, so without this they would wait out a whole lease (10 min by default). As with a release
 * of rows claimed ahead (release.ts), the claim's attempt is taken back and its attempt record deleted. Rows reach
 * it through the lease index (the lane's `sending` rows, a few hundred at most), since nothing indexes the token.
 */
export const RELEASE_UNANSWERED = new Statement((t) => ({
  name: 'reliable_mail_release_unanswered',
  text: `with released as (
    update ${t.outbox} o
    set status = 'pending', attempts = o.attempts - 1, locked_until = null, lock_token = null, locked_by = null,
        updated_at = now()
    where o.status = 'sending' and o.lane = $2 and o.lock_token = any($1::uuid[])
    returning o.id
  ), forgotten as (
    delete from ${t.attempt} a
    where a.outbox_id = any(array(select id from released)) and a.lock_token = any($1::uuid[]) and a.outcome = 'started'
  )
  select count(*)::int as count from released`,
}));

/** Returns how many rows the claims of `lane` with these tokens held. */
export async function releaseUnansweredClaims(db: SqlClient, lane: string, lockTokens: string[]): Promise<number> {
  const [{ count }] = await db.query<{ count: number }>(RELEASE_UNANSWERED, [lockTokens, lane]);
  return count;
}
