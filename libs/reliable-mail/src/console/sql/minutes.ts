import { type SqlClient, Statement } from '../../database/sql-client.js';
import { toDate } from '../../outbox/sql/timestamps.js';
import type { MinuteFigures } from '../console-data.types.js';

/**
 * An attempt ends within its lease of its start (10 minutes by default): attempts that ended in the window started
 * at most this long before it. A reclaim that finds its worker gone ends it later, as `unknown`, and is counted
 * only if it started in this margin too.
 */
const ATTEMPT_MARGIN = `interval '1 hour'`;

/** The smallest UUIDv7 of a time: a bound on time-ordered ids, where the primary key reads a period. */
const uuidFloor = (time: string) =>
  `(lpad(to_hex(floor(extract(epoch from ${time}) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid`;

/** The window's first minute, in the statement: the database's clock, the one that wrote the times it reads. */
const SINCE = `date_trunc('minute', now() - $1::float8 * interval '1 hour')`;

/**
 * The minutes of the last $1 hours that had any mail: mails sent (from the sent rows' index on sent_at, with their
 * latency from creation read from the rows themselves: 15,000 rows in 6 hours, 20 ms), mails that failed or died
 * (the problem index, index-only), and attempts that ended in a retry. Attempts have no index on their times, but
 * their ids are UUIDv7 made by the claim, when they start: the primary key reads the window. The window's bound is
 * an expression of $1 in each scan (not a CTE's value), so that the planner estimates each range from its
 * statistics: with an unknown bound it expected a third of the table and spent 0.5 s compiling the plan (JIT).
 * The minutes without any are added by the caller.
 */
const MINUTES = new Statement((t) => ({
  text: `select minute, sum(sent)::int as sent, sum(failed)::int as failed, sum(deferred)::int as deferred,
           max(p50) as p50, max(p95) as p95
  from (
    select date_trunc('minute', sent_at) as minute, count(*) as sent, 0 as failed, 0 as deferred,
           percentile_cont(0.5) within group (order by extract(epoch from sent_at - created_at) * 1000) as p50,
           percentile_cont(0.95) within group (order by extract(epoch from sent_at - created_at) * 1000) as p95
    from ${t.outbox} where status = 'sent' and sent_at >= ${SINCE} group by 1
    union all
    select date_trunc('minute', updated_at), 0, count(*), 0, null, null
    from ${t.outbox} where status in ('failed', 'dead') and updated_at >= ${SINCE} group by 1
    union all
    select date_trunc('minute', finished_at), 0, 0, count(*), null, null
    from ${t.attempt}
    where id >= ${uuidFloor(`${SINCE} - ${ATTEMPT_MARGIN}`)} and finished_at >= ${SINCE}
      and outcome in ('transient', 'partial', 'unknown')
    group by 1
  ) figures group by minute`,
}));

/** The window's minutes by the database's clock, for the zeros between the minutes the figures name. */
const WINDOW = new Statement(() => ({
  text: `select ${SINCE} as since, date_trunc('minute', now()) as until`,
}));

interface MinuteRecord {
  minute: Date;
  sent: number;
  failed: number;
  deferred: number;
  p50: number | null;
  p95: number | null;
}

const roundedOrNull = (value: number | null) => (value === null ? null : Math.round(value));

/** Each minute of the last `hours`, the oldest first, zeros included. */
export async function minuteFigures(db: SqlClient, hours: number): Promise<MinuteFigures[]> {
  const [[window], rows] = await Promise.all([
    db.query<{ since: Date; until: Date }>(WINDOW, [hours]),
    db.query<MinuteRecord>(MINUTES, [hours]),
  ]);
  const byMinute = new Map(rows.map((row) => [toDate(row.minute).getTime(), row]));
  const minutes: MinuteFigures[] = [];
  for (let at = toDate(window.since).getTime(); at <= toDate(window.until).getTime(); at += 60_000) {
    const row = byMinute.get(at);
    minutes.push({
      minute: new Date(at),
      sent: row?.sent ?? 0,
      failed: row?.failed ?? 0,
      deferred: row?.deferred ?? 0,
      latencyP50Ms: roundedOrNull(row?.p50 ?? null),
      latencyP95Ms: roundedOrNull(row?.p95 ?? null),
    });
  }
  return minutes;
}
