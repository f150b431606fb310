import type { OutboxStatus } from '../mail.types.js';
import type { SqlClient, Statement } from '../../database/sql-client.js';

/** A pending row is cancelled at once; a row being sent gets a request that its settle honours. */
const CANCEL: Statement = {
  text: `update mail_outbox
    set status = case when status = 'pending' then 'cancelled' else status end,
        cancel_requested_at = case when status = 'sending' then now() else cancel_requested_at end,
        updated_at = now()
    where id = $1 and status in ('pending', 'sending')
    returning status`,
};

const STATUS_OF: Statement = { text: `select status from mail_outbox where id = $1` };

/** Cancels the row, or asks its sender to; returns its status afterwards, or null when there is no such row. */
export async function cancelRow(db: SqlClient, id: string): Promise<OutboxStatus | null> {
  const [changed] = await db.query<{ status: OutboxStatus }>(CANCEL, [id]);
  if (changed) return changed.status;
  // A statement of its own: one that waited for a concurrent settle must see what that settle committed.
  const [current] = await db.query<{ status: OutboxStatus }>(STATUS_OF, [id]);
  return current ? current.status : null;
}
