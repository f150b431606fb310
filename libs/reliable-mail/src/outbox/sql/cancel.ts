import { EMAIL_FAILED_EVENT } from '../../reliable-mail.constants.js';
import type { OutboxStatus } from '../mail.types.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';
import { relayCopies } from '../../relay/sql/relay-copies.js';

/**
 * A pending row is cancelled at once, and its `EmailFailedEvent` recorded with it, due at once: the next redelivery of
 * any dispatcher instance that listens for it emits it (this statement may run in a caller's transaction, whose commit
 * nothing here sees), and copied for the relay destinations registered for it. A row being sent gets a request that its
 * settle honours, and that settle records the event.
 */
const CANCEL = new Statement((t) => ({
  text: `with cancelled as (
    update ${t.outbox}
    set status = case when status = 'pending' then 'cancelled' else status end,
        cancel_requested_at = case when status = 'sending' then now() else cancel_requested_at end,
        updated_at = now()
    where id = any($1::uuid[]) and status in ('pending', 'sending')
    returning id, status, message_id, idempotency_key, attempts, accepted_recipients, metadata
  ), event as (
    insert into ${t.event} (outbox_id, name, payload, locked_until)
    select id, $2, jsonb_build_object(
             'id', id, 'messageId', message_id, 'idempotencyKey', idempotency_key, 'attempt', attempts,
             'status', 'cancelled', 'cause', 'cancelled', 'permanent', false, 'outcomeUnknown', false,
             'accepted', coalesce(accepted_recipients, '[]'::jsonb), 'deferred', '[]'::jsonb, 'replyCode', null,
             'enhancedStatus', null, 'reason', 'cancelled', 'nextAttemptAt', null, 'deadLettered', false,
             'metadata', metadata),
           now()
    from cancelled where status = 'cancelled'
    returning id, outbox_id, name, payload
  ), relayed as (
    ${relayCopies(t, 'event')}
  )
  select id, status from cancelled`,
}));

/** The statuses a cancel changes: a pending row at once, a row being sent by its settle. */
export const CANCELLABLE_STATUSES: readonly OutboxStatus[] = ['pending', 'sending'];

const STATUS_OF = new Statement((t) => ({ text: `select status from ${t.outbox} where id = $1` }));

/** Cancels the row, or asks its sender to; returns its status afterwards, or null when there is no such row. */
export async function cancelRow(db: SqlClient, id: string): Promise<OutboxStatus | null> {
  const [changed] = await cancelRows(db, [id]);
  if (changed) return changed.status;
  // A statement of its own: one that waited for a concurrent settle must see what that settle committed.
  const [current] = await db.query<{ status: OutboxStatus }>(STATUS_OF, [id]);
  return current ? current.status : null;
}

/**
 * Cancels the pending rows among `ids` and asks the senders of those being sent to, in one statement; returns the
 * rows it changed (`cancelled`, or `sending` with the request), not those that had moved on.
 */
export function cancelRows(
  db: SqlClient,
  ids: readonly string[],
): Promise<Array<{ id: string; status: OutboxStatus }>> {
  return db.query<{ id: string; status: OutboxStatus }>(CANCEL, [ids, EMAIL_FAILED_EVENT]);
}
