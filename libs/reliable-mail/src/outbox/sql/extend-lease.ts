import { type QueryBound, type SqlClient, Statement } from '../../database/sql-client.js';
import type { ClaimedRow } from '../queue.types.js';

/**
 * Renews the lease of a row claimed ahead that waited long for its slot, before its send starts, so that the send
 * and its settle fit in the lease. Only while the claim's token still holds the row and its lease has not ended: a
 * renewal that reaches the server late, once its worker gave up on it and left the row unsent, would otherwise keep
 * the row from everyone for one more lease.
 */
const EXTEND_LEASE = new Statement((t) => ({
  name: 'reliable_mail_extend_lease',
  text: `update ${t.outbox} set locked_until = now() + $3::float8 * interval '1 millisecond'
         where id = $1 and lock_token = $2 and status = 'sending' and locked_until > now()
         returning id`,
}));

/** Returns whether the row is still this claim's, its lease renewed for `leaseMs`. */
export async function extendLease(
  db: SqlClient,
  row: Pick<ClaimedRow, 'id' | 'lockToken'>,
  leaseMs: number,
  bound?: QueryBound,
): Promise<boolean> {
  const rows = await db.query(EXTEND_LEASE, [row.id, row.lockToken, leaseMs], bound);
  return rows.length > 0;
}
