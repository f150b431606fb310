import { type SqlClient, Statement } from '../../database/sql-client.js';
import type { ConsoleRowCount } from '../console-data.types.js';

/**
 * Above this many sent rows (as the table's statistics put it) the sent ones are estimated, not counted: counting
 * them by lane reads each from the table (no index holds their lane), 950,000 rows of 1.5 KB, seconds, where the
 * overview must answer in 100 ms. 50,000 are counted in about 30 ms.
 */
export const SENT_COUNT_LIMIT = 50_000;

/**
 * Every status but `sent` counted by lane, each from its partial index, index-only (the status is the index's
 * predicate, written here as a constant so that no column outside the index is read): pending and sending from
 * the dispatcher's, the other final ones from the console's (status, lane). 25,000 pending and final rows: 8 ms.
 * Beside them, the sent rows of each lane as the planner would estimate them: the rows in the table now (its live
 * rows at the last vacuum or analyze, scaled to its size now) times the lane's share (pg_stats), less the rows
 * counted in that lane; null when the table has no statistics yet.
 */
const UNSENT_COUNTS = new Statement((t) => ({
  text: `with counted as (
    select status, lane, count(*)::int as count from (
      select 'pending' as status, lane from ${t.outbox} where status = 'pending'
      union all select 'sending', lane from ${t.outbox} where status = 'sending'
      union all select status, lane from ${t.outbox}
                where status in ('failed', 'dead', 'cancelled', 'expired', 'suppressed')
    ) unsent group by status, lane
  ), table_rows as (
    select case when c.relpages > 0 and c.reltuples > 0
                then c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8)
           end as estimate
    from pg_class c where c.oid = '${t.outbox}'::regclass
  )
  select status, lane, count, false as estimated from counted
  union all
  select 'sent', share.lane,
         greatest(0, round((select estimate from table_rows) * share.fraction
                           - coalesce((select sum(c.count) from counted c where c.lane = share.lane), 0)))::int,
         true
  from pg_stats s, unnest(s.most_common_vals::text::text[], s.most_common_freqs) as share(lane, fraction)
  where s.schemaname = '${t.schema}' and s.tablename = 'mail_outbox' and s.attname = 'lane'
    and (select estimate from table_rows) is not null`,
}));

/** The sent rows by lane, counted: read only when they are few (see SENT_COUNT_LIMIT). */
const SENT_COUNTS = new Statement((t) => ({
  text: `select 'sent' as status, lane, count(*)::int as count, false as estimated
         from ${t.outbox} where status = 'sent' group by lane`,
}));

/**
 * Rows by status and lane, in that order. The sent rows, most of the table, are estimated beyond `exactLimit` (an
 * estimate within a percent or so, marked `estimated`: what the console shows as "about"), else counted, as they
 * are when the table has no statistics yet.
 */
export async function consoleCounts(db: SqlClient, exactLimit = SENT_COUNT_LIMIT): Promise<ConsoleRowCount[]> {
  const rows = await db.query<ConsoleRowCount>(UNSENT_COUNTS, []);
  const counted = rows.filter((row) => !row.estimated);
  const estimated = rows.filter((row) => row.estimated && row.count > 0);
  const sentEstimate = estimated.reduce((sum, row) => sum + row.count, 0);
  const sent =
    estimated.length > 0 && sentEstimate > exactLimit ? estimated : await db.query<ConsoleRowCount>(SENT_COUNTS, []);
  return [...counted, ...sent].sort((a, b) =>
    a.status < b.status ? -1 : a.status > b.status ? 1 : a.lane < b.lane ? -1 : a.lane > b.lane ? 1 : 0,
  );
}
