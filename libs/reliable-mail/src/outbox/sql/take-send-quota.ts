import { type SqlClient, Statement } from '../../database/sql-client.js';
import { DAY_BUCKETS } from '../../schema/versions/0010-send-quotas.js';

/** The pace a rate is kept at (see quota/quota-pace.ts): a token bucket, and a hard limit over any window. */
export interface SendQuotaPace {
  /** The most tokens the bucket holds: what a take after a quiet spell may grant at once. */
  burst: number;
  refillPerSecond: number;
  /** At most this many sends in any `windowMs`, whatever the bucket holds. */
  windowLimit: number;
  windowMs: number;
}

/** One take from a shared quota (see TAKE_SEND_QUOTA). */
export interface SendQuotaTake {
  key: string;
  /** The sends the lane would start: at least 1. */
  wanted: number;
  /** The rate's pace; null for no rate. */
  pace: SendQuotaPace | null;
  /** The most sends in a rolling `dayMs`; null for no daily quota. */
  perDay: number | null;
  /** The day's length: 24 hours (a test shortens it). */
  dayMs: number;
  /** The provider's own count of the day's sends (SES `SentLast24Hours`) when it was just read; null otherwise. */
  providerSentToday: number | null;
}

/** Why a take granted fewer than it was asked for. */
export type QuotaShortfall = 'paused' | 'daily' | 'rate';

export interface SendQuotaGrant {
  granted: number;
  /** When the take was made, on the database's clock in ms since the epoch: what its settle names it by. */
  takenAtMs: number;
  /** How long, on the database's clock, until a take could grant one more: 0 when one could now. */
  waitMs: number;
  /** Why fewer than `wanted` were granted; null when all were. */
  shortBy: QuotaShortfall | null;
  /** The sends counted in the rolling day, this take's included. */
  sentToday: number;
  /** While the day's quota is spent: how long until the oldest send counted leaves the day. */
  dayResetsInMs: number | null;
  /** While a provider's Retry-After holds the key: how long it still does. */
  pausedForMs: number | null;
}

/** The row's state a take starts from, as SQL expressions: the row's columns, or those of a key seen first. */
interface QuotaState {
  tokens: string;
  refilledAt: string;
  recentAt: string;
  recentCounts: string;
  dayBucket: string;
  dayCounts: string;
  pausedUntil: string;
}

/** The quarter-hours `day_counts` holds (see the table, schema version 10). */
const DAY_SLOTS = DAY_BUCKETS + 1;

/**
 * The columns a take writes, from `s`. The clock is read once (`clock_timestamp()`, not the transaction's `now()`):
 * once this take holds the row's lock, after any take it waited for, so the refill never counts time twice. The
 * subqueries the values are made from are fenced (`offset 0`): inlined, the day's array was rebuilt for each of
 * its references.
 *
 * The bucket: with 20 tokens a second and a burst of 2, a take 30 ms after one that emptied it finds
 * 0 + 0.03 × 20 = 0.6 tokens and grants none; one at 50 ms finds 1.0 and grants 1. It never holds more than the burst.
 *
 * The window: the takes of the last `$9` ms (1,075 for 20 a second), with what each granted (those given back whole
 * are dropped); a take grants no more than leaves them within `$8` (20). The bucket alone would let a second hold
 * burst + rate - 1 (21), and a take that comes late loses what the bucket could not hold; the window holds every
 * second to the limit, 75 ms to spare for sends that reach the provider unevenly, and a late take loses nothing:
 * 20 sends per 1,075 ms, 18.6 a second.
 *
 * The day: `day_counts` shifted to the current quarter-hour (a count whose quarter-hour left the day reads as 0:
 * its subscript, kept within int, falls outside the array, where PostgreSQL answers null), summed. With a quota of
 * 50,000 and 49,990 sent, a take of 50 grants 10. A provider's own count (`$7`) larger than the sum means sends from
 * elsewhere (another app on the account): the difference is put in the oldest quarter-hour, which leaves the day
 * within 15 minutes, by when the provider is read again; put in the newest it would hold the quota for 24 hours after
 * those sends left SES's.
 *
 * A pause in force grants nothing: the lane waits it out.
 */
const takeFrom = (s: QuotaState): string => `
  select coalesce(r.tokens - g.granted, 0), c.at,
         case when g.granted > 0 then x.ats || c.ms else x.ats end,
         case when g.granted > 0 then x.counts || g.granted else x.counts end,
         c.bucket,
         array[w.counts[1] + d.unseen] || w.counts[2:${DAY_SLOTS - 1}] || array[w.counts[${DAY_SLOTS}] + g.granted],
         g.granted
  from (select at, ms, floor(ms / ($6::float8 / ${DAY_BUCKETS}))::bigint as bucket
        from (select at, extract(epoch from at)::float8 * 1000 as ms
              from (select clock_timestamp() as at) clock offset 0) read
        offset 0) c
  cross join lateral (
    select coalesce(array_agg(a order by i), '{}'::float8[]) as ats,
           coalesce(array_agg(n order by i), '{}'::int[]) as counts,
           coalesce(sum(n), 0)::int as sent
    from unnest((${s.recentAt}), (${s.recentCounts})) with ordinality e(a, n, i)
    where a > c.ms - $9::float8 and n > 0
    offset 0) x
  cross join lateral (
    select array(select coalesce((${s.dayCounts})[slot], 0)
                 from generate_series(c.bucket - ${DAY_BUCKETS}, c.bucket) i
                 cross join lateral (
                   select least(greatest(i - (${s.dayBucket}) + ${DAY_SLOTS}, 0), ${DAY_SLOTS + 1})::int as slot
                 ) shifted
                 order by i) as counts
    offset 0) w
  cross join lateral (
    select sent + unseen as sent, unseen
    from (select sent, greatest(0, $7::int - sent) as unseen
          from (select coalesce(sum(n), 0)::int as sent from unnest(w.counts) n) summed) counted
    offset 0) d
  cross join lateral (
    select case when $3::float8 is not null then least($4::float8,
             (${s.tokens}) + coalesce(extract(epoch from c.at - (${s.refilledAt}))::float8, 0) * $3::float8)
           end as tokens
    offset 0) r
  cross join lateral (
    select case when (${s.pausedUntil}) > c.at then 0
                else greatest(0, least($2::int, coalesce(floor(r.tokens)::int, $2::int),
                                       coalesce($8::int - x.sent, $2::int), coalesce($5::int - d.sent, $2::int)))
           end as granted
    offset 0) g`;

/**
 * Takes up to $2 sends from the quota of key $1, for every instance on the database at once: a token bucket of $4
 * tokens refilled at $3 a second, at most $8 sends in any $9 ms, and at most $5 in a rolling day of $6 ms. A key
 * seen first starts with a full bucket. One upsert: `on conflict do update` locks the key's row and computes from
 * its latest version, so two instances that take at once are served one after the other, and the second sees what
 * the first took (two pools taking for 20 a second, and 16 takes at once spending a daily quota of 100, in
 * test/shared-quota). No advisory lock, and nothing held between statements: a take that finds nothing is not
 * retried here, the lane waits `wait_ms`.
 *
 * The answer is read from the row as written (RETURNING sees nothing else): the grant, the wait until the next one,
 * and why fewer than asked were granted: a pause first (nothing is granted during one), the day's quota (nothing
 * frees it before its oldest send leaves the day, at the end of that send's quarter-hour 24 hours later), then the
 * rate: the bucket's next token ((1 - tokens) / rate: 20 ms for 0.6 tokens at 20 a second), or the window's oldest
 * take leaving it.
 *
 * Its commit does not wait for its WAL flush (`synchronous_commit` off for its own transaction): the claim that
 * uses the grant commits after it and waits for its own flush, which writes the take's too. A take lost with the
 * server before any claim granted nothing that was sent. Waiting would delay each grant by a flush, 1 ms here and
 * tens under load, which makes sends reach the provider more unevenly.
 */
export const TAKE_SEND_QUOTA = new Statement((t) => ({
  name: 'reliable_mail_take_send_quota',
  text: `with taken as (
    insert into ${t.sendQuota} as q
      (key, tokens, refilled_at, recent_at, recent_counts, day_bucket, day_counts, last_granted)
    select $1, taken.* from (${takeFrom({
      tokens: '$4::float8',
      refilledAt: 'null::timestamptz',
      recentAt: `'{}'::float8[]`,
      recentCounts: `'{}'::int[]`,
      dayBucket: '0',
      dayCounts: `'{}'::int[]`,
      pausedUntil: 'null::timestamptz',
    })}) taken
    on conflict (key) do update
    set (tokens, refilled_at, recent_at, recent_counts, day_bucket, day_counts, last_granted) = (${takeFrom({
      tokens: 'q.tokens',
      refilledAt: 'q.refilled_at',
      recentAt: 'q.recent_at',
      recentCounts: 'q.recent_counts',
      dayBucket: 'q.day_bucket',
      dayCounts: 'q.day_counts',
      pausedUntil: 'q.paused_until',
    })})
    returning q.*
  ), answer as (
    select taken.last_granted as granted, day.sent_today, at_ms,
      case when taken.paused_until > taken.refilled_at
           then extract(epoch from taken.paused_until - taken.refilled_at)::float8 * 1000 end as paused_ms,
      case when day.sent_today >= $5::int
           then (taken.day_bucket + day.oldest) * ($6::float8 / ${DAY_BUCKETS}) - at_ms end as resets_ms,
      greatest(
        case when $3::float8 is null then 0 else (1 - taken.tokens) / $3::float8 * 1000 end,
        case when recent.sent >= $8::int then recent.oldest + $9::float8 - at_ms else 0 end
      ) as rate_ms
    from taken
    cross join lateral (select extract(epoch from taken.refilled_at)::float8 * 1000 as at_ms) clock
    cross join lateral (
      select coalesce(sum(taken.day_counts[i]), 0)::int as sent_today,
             min(i) filter (where taken.day_counts[i] > 0) as oldest
      from generate_subscripts(taken.day_counts, 1) i
    ) day
    cross join lateral (
      select coalesce(sum(n), 0)::int as sent, min(a) filter (where n > 0) as oldest
      from unnest(taken.recent_at, taken.recent_counts) e(a, n)
    ) recent
  )
  select granted, at_ms, sent_today, paused_ms, resets_ms,
    greatest(coalesce(paused_ms, 0), coalesce(resets_ms, 0), rate_ms, 0) as wait_ms,
    case when granted >= $2::int then null when paused_ms is not null then 'paused'
         when resets_ms is not null then 'daily' else 'rate' end as short_by
  from answer, (select set_config('synchronous_commit', 'off', true)) unflushed_commit`,
}));

interface TakeRecord {
  granted: number;
  at_ms: number;
  sent_today: number;
  paused_ms: number | null;
  resets_ms: number | null;
  wait_ms: number;
  short_by: QuotaShortfall | null;
}

export async function takeSendQuota(db: SqlClient, take: SendQuotaTake): Promise<SendQuotaGrant> {
  const { pace } = take;
  const [row] = await db.query<TakeRecord>(TAKE_SEND_QUOTA, [
    take.key,
    take.wanted,
    pace?.refillPerSecond ?? null,
    pace?.burst ?? null,
    take.perDay,
    take.dayMs,
    take.providerSentToday,
    pace?.windowLimit ?? null,
    pace?.windowMs ?? null,
  ]);
  return {
    granted: row.granted,
    takenAtMs: row.at_ms,
    waitMs: Math.ceil(row.wait_ms),
    shortBy: row.short_by,
    sentToday: row.sent_today,
    dayResetsInMs: row.resets_ms === null ? null : Math.max(0, Math.ceil(row.resets_ms)),
    pausedForMs: row.paused_ms === null ? null : Math.ceil(row.paused_ms),
  };
}
