import type { SqlClient, Statement } from '../../database/sql-client.js';
import type { ClaimedRow } from '../queue.types.js';

/**
 * Renews the lease of a row claimed ahead that waited long for its slot, before its send starts, so that the send
 * and its settle fit in the lease. Only while the claim's token still holds the row.
 */
const EXTEND_LEASE: Statement = {
  name: 'reliable_mail_extend_lease',
  text: `update mail_outbox set locked_until = now() + $3::float8 * interval '1 millisecond'
         where id = $1 and lock_token = $2 and status = 'sending'
         returning id`,
};

/** Returns whether the row is still this claim's, its lease renewed for `leaseMs`. */
export async function extendLease(
  db: SqlClient,
  row: Pick<ClaimedRow, 'id' | 'lockToken'>,
  leaseMs: number,
): Promise<boolean> {
  const rows = await db.query(EXTEND_LEASE, [row.id, row.lockToken, leaseMs]);
  return rows.length > 0;
}
