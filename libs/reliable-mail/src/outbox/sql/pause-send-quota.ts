import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Pauses the quota of key $1 for $2 ms from now on the database's clock, for every instance: a provider's
 * Retry-After, read by one instance, holds back the others' sends too (each takes nothing until it ends, see
 * take-send-quota.ts). A pause already longer stays: a Retry-After of 30 s over one of 60 s set 10 s ago keeps the
 * 50 s left. Timed by the database's clock, as the takes that honour it, so that instances whose clocks are apart
 * pause alike. A key seen first starts with an empty bucket, which the takes after the pause refill.
 */
export const PAUSE_SEND_QUOTA = new Statement((t) => ({
  name: 'reliable_mail_pause_send_quota',
  text: `insert into ${t.sendQuota} as q (key, tokens, refilled_at, paused_until)
    values ($1, 0, clock_timestamp(), clock_timestamp() + $2::float8 * interval '1 millisecond')
    on conflict (key) do update set paused_until = greatest(q.paused_until, excluded.paused_until)
    returning extract(epoch from q.paused_until - clock_timestamp())::float8 * 1000 as paused_ms`,
}));

/** Returns how long the key is now paused for: `pauseMs`, or longer when another pause was. */
export async function pauseSendQuota(db: SqlClient, key: string, pauseMs: number): Promise<number> {
  const [row] = await db.query<{ paused_ms: number }>(PAUSE_SEND_QUOTA, [key, pauseMs]);
  return Math.max(0, Math.ceil(row.paused_ms));
}
