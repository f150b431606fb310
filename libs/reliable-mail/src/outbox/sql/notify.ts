import { WAKE_UP_CHANNEL } from '../../reliable-mail.constants.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';

// How the dispatchers of every instance learn of due rows without waiting for their poll: an enqueue (or a requeue)
// notifies the channel with the lane's name, and each dispatcher LISTENs on one connection of its own. A NOTIFY
// inside a transaction is delivered when it commits, so a dispatcher never wakes before the rows are visible.

/**
 * The select-list item that notifies each returned row's lane; used inside the insert's RETURNING. As text: a void
 * column is one Prisma cannot read back.
 */
export const NOTIFY_ROW_LANE = `pg_notify('${WAKE_UP_CHANNEL}', lane)::text as notified`;

/** A CTE step that notifies each distinct lane of the named CTE, and the column that forces it to run. */
export function notifyLanesOf(cte: string): { step: string; column: string } {
  return {
    step: `notified as (select pg_notify('${WAKE_UP_CHANNEL}', lane) from (select distinct lane from ${cte}) lanes)`,
    // A CTE that nothing reads is not run: counting its rows makes the notifications happen.
    column: '(select count(*) from notified) as lanes_notified',
  };
}

/** Run on the listener's own session, outside the pool. */
export const LISTEN = `LISTEN ${WAKE_UP_CHANNEL}`;

const NOTIFY_LANES = new Statement(() => ({
  name: 'reliable_mail_notify',
  text: `select pg_notify($1, lane) from unnest($2::text[]) lane`,
}));

/** Notifies the lanes outside any transaction: the NOTIFY that follows an enqueue's commit. */
export async function notifyLanes(db: SqlClient, lanes: string[]): Promise<void> {
  await db.query(NOTIFY_LANES, [WAKE_UP_CHANNEL, lanes]);
}
