import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Whether lane $1 has a row the claim would take: a pending row whose time has come, or a `sending` row whose lease
 * ran out. A read through the same partial indexes as the claim, with no lock and no write: an idle lane with a
 * shared quota asks this at its poll before it takes a grant, where a take and its give-back wrote the quota's row
 * twice (two WAL flushes) at every poll of every instance, and health's `sentToday` counted the grant in between.
 */
const ANY_DUE = new Statement((t) => ({
  name: 'reliable_mail_any_due',
  text: `select exists (select 1 from ${t.outbox} where status = 'pending' and lane = $1 and next_attempt_at <= now())
             or exists (select 1 from ${t.outbox} where status = 'sending' and lane = $1 and locked_until <= now())
             as due`,
}));

export async function anyDue(db: SqlClient, lane: string): Promise<boolean> {
  const [row] = await db.query<{ due: boolean }>(ANY_DUE, [lane]);
  return row?.due === true;
}
