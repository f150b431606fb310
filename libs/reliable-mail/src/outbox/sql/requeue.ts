import type { OutboxStatus } from '../mail.types.js';
import type { OutboxFilter } from '../operations.types.js';
import { whereOf } from './filter.js';
import { notifyLanesOf } from './notify.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';

/** Statuses an operator may requeue: the final ones a fix can turn around (an unsuppressed address, too). */
export const REQUEUABLE_STATUSES: readonly OutboxStatus[] = ['failed', 'dead', 'expired', 'cancelled', 'suppressed'];

/**
 * Puts final rows back in the queue with their id and Message-ID: attempts start again from zero, the reason is
 * recorded, an expiry is lifted, and the recipients that refused it or were given up on are tried again (those
 * that took it are not); the dispatchers of their lanes are woken when the transaction commits.
 */
export async function requeueRows(db: SqlClient, filter: OutboxFilter, reason: string): Promise<string[]> {
  const where = whereOf(filter, 3);
  const notified = notifyLanesOf('requeued');
  const rows = await db.query<{ id: string }>(
    new Statement((t) => ({
      text: `with requeued as (
        update ${t.outbox} o
        set status = 'pending', attempts = 0, next_attempt_at = now(), expires_at = null, cancel_requested_at = null,
            rejected_recipients = null, requeued_at = now(), requeue_reason = $1, updated_at = now()
        where o.status = any($2::text[]) and ${where.sql}
        returning o.id, o.lane
      ), ${notified.step}
      select id, ${notified.column} from requeued`,
    })),
    [reason, REQUEUABLE_STATUSES, ...where.values],
  );
  return rows.map((row) => row.id);
}
