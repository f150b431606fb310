import type { FeedbackFigures, HealthFigures, OutboxStats, RowCount } from '../operations.types.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';
import { PARTITION_DAY_DEFAULT } from '../../schema/versions/0013-partition-days.js';

/**
 * What a health probe needs, from the open rows' partial indexes. A row waits since its first due time: its
 * `next_attempt_at` before any attempt, its creation (or last requeue) once it is being retried. Dead letters are
 * counted in the last $1 ms.
 */
const HEALTH_FIGURES = new Statement((t) => ({
  name: 'reliable_mail_health',
  text: `select count(*)::int as backlog,
         coalesce(extract(epoch from now() - min(waiting_since)) * 1000, 0)::bigint as lag_ms,
         (select count(*)::int from ${t.outbox}
          where status = 'dead' and updated_at > now() - $1::float8 * interval '1 millisecond') as dead_letters
  from (
    select case when attempts = 0 then next_attempt_at else coalesce(requeued_at, created_at) end as waiting_since
    from ${t.outbox} where status = 'pending' and (attempts > 0 or next_attempt_at <= now())
    union all
    select coalesce(requeued_at, created_at) from ${t.outbox} where status = 'sending'
  ) open_rows`,
}));

export async function healthFigures(db: SqlClient, deadLetterWindowMs: number): Promise<HealthFigures> {
  const [row] = await db.query<{ backlog: number; lag_ms: string; dead_letters: number }>(HEALTH_FIGURES, [
    deadLetterWindowMs,
  ]);
  return { backlog: row.backlog, lagMs: Number(row.lag_ms), deadLetters: row.dead_letters };
}

/**
 * Rows by status and lane, for the metrics gauges: the open statuses and the problems, each from its partial index
 * (a predicate that spans them would take none).
 */
const OPEN_COUNTS = new Statement((t) => ({
  name: 'reliable_mail_open_counts',
  text: `select status, lane, count(*)::int as count from (
           select status, lane from ${t.outbox} where status = 'pending'
           union all select status, lane from ${t.outbox} where status = 'sending'
           union all select status, lane from ${t.outbox} where status in ('failed', 'dead')
         ) open_rows group by status, lane`,
}));

export function openCounts(db: SqlClient): Promise<RowCount[]> {
  return db.query<RowCount>(OPEN_COUNTS, []);
}

/** Everything `stats()` shows. Counting by status reads the whole table: an operator's query, not a probe's. */
const STATS = new Statement((t) => ({
  text: `select
    (select coalesce(jsonb_agg(c order by c.status, c.lane), '[]'::jsonb)
     from (select status, lane, count(*)::int as count from ${t.outbox} group by status, lane) c) as counts,
    (select count(*)::int from ${t.outbox} where status = 'sent' and updated_at > now() - interval '1 minute') as sent_minute,
    (select count(*)::int from ${t.outbox} where status = 'sent' and updated_at > now() - interval '1 hour') as sent_hour,
    (select count(*)::int from ${t.outbox} where status in ('failed', 'dead') and updated_at > now() - interval '1 minute') as failed_minute,
    (select count(*)::int from ${t.outbox} where status in ('failed', 'dead') and updated_at > now() - interval '1 hour') as failed_hour`,
}));

interface StatsRecord {
  counts: RowCount[];
  sent_minute: number;
  sent_hour: number;
  failed_minute: number;
  failed_hour: number;
}

export async function outboxStats(db: SqlClient): Promise<OutboxStats> {
  const [[row], figures] = await Promise.all([db.query<StatsRecord>(STATS, []), healthFigures(db, 3_600_000)]);
  return {
    counts: row.counts,
    ...figures,
    sent: { lastMinute: row.sent_minute, lastHour: row.sent_hour },
    failed: { lastMinute: row.failed_minute, lastHour: row.failed_hour },
  };
}

/**
 * Open rows in lanes this instance does not declare: a lane removed from the configuration leaves its rows
 * pending for good, unless it is declared again (or the rows are moved). Reads the open rows' partial indexes.
 */
const UNDECLARED_LANES = new Statement((t) => ({
  name: 'reliable_mail_undeclared_lanes',
  text: `select lane, count(*)::int as count from (
           select lane from ${t.outbox} where status = 'pending' and lane <> all($1::text[])
           union all select lane from ${t.outbox} where status = 'sending' and lane <> all($1::text[])
         ) open_rows group by lane order by lane`,
}));

export async function undeclaredLanes(db: SqlClient, declared: string[]): Promise<Record<string, number>> {
  const rows = await db.query<{ lane: string; count: number }>(UNDECLARED_LANES, [declared]);
  return Object.fromEntries(rows.map((row) => [row.lane, row.count]));
}

/**
 * In a partitioned outbox, how many days after today its partitions cover; null for a plain outbox. Read from the
 * catalog: the upper bound of the newest partition (`FOR VALUES FROM ('2026-12-05') TO ('2026-12-06')`). Unnamed:
 * a catalog query, not planned over the outbox.
 */
const PARTITIONS_AHEAD = new Statement((t) => ({
  text: `select case when (select relkind from pg_class where oid = to_regclass('${t.outbox}')) = 'p' then
           coalesce((select max(substring(pg_get_expr(c.relpartbound, c.oid) from $$TO \\('([0-9-]+)'\\)$$)::date)
                     from pg_inherits i join pg_class c on c.oid = i.inhrelid
                     where i.inhparent = to_regclass('${t.outbox}')) - ${PARTITION_DAY_DEFAULT} - 1, 0)
         end as days_ahead`,
}));

export async function partitionsAhead(db: SqlClient): Promise<number | null> {
  const [row] = await db.query<{ days_ahead: number | null }>(PARTITIONS_AHEAD, []);
  return row.days_ahead;
}

/**
 * Bounces and complaints received in the last $1 ms, against the mails sent in it: what mailbox providers and
 * ESPs judge a sender by. Read from partial indexes only: the sent rows' entries in the window, and the bounce and
 * complaint feedback, never the delivery reports, which may be as many as the mails.
 */
// Unnamed: planned at each run with the tables as they are then, where the sent rows' index is the one to take
// (the closed rows' index covers them too, and a plan made on empty tables may take it).
const FEEDBACK_FIGURES = new Statement((t) => ({
  text: `select
    (select count(*)::int from ${t.outbox}
     where status = 'sent' and sent_at > now() - $1::float8 * interval '1 millisecond') as sent,
    count(*) filter (where bounce_type = 'hard')::int as hard_bounces,
    count(*) filter (where bounce_type = 'soft')::int as soft_bounces,
    count(*) filter (where kind = 'complained')::int as complaints,
    count(*) filter (where outbox_id is null)::int as unlinked
  from ${t.feedback}
  where kind in ('bounced', 'complained') and received_at > now() - $1::float8 * interval '1 millisecond'`,
}));

export async function feedbackFigures(db: SqlClient, windowMs: number): Promise<FeedbackFigures> {
  const [row] = await db.query<{
    sent: number;
    hard_bounces: number;
    soft_bounces: number;
    complaints: number;
    unlinked: number;
  }>(FEEDBACK_FIGURES, [windowMs]);
  return {
    sent: row.sent,
    hardBounces: row.hard_bounces,
    softBounces: row.soft_bounces,
    complaints: row.complaints,
    unlinked: row.unlinked,
  };
}

/** A share of the mails sent, 0 when none were. */
export const rateOf = (count: number, sent: number): number => (sent === 0 ? 0 : count / sent);
