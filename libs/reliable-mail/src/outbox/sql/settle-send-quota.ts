import { type SqlClient, Statement } from '../../database/sql-client.js';
import { DAY_BUCKETS } from '../../schema/versions/0010-send-quotas.js';

/**
 * Settles a take of key $1 made at $4 (its `at_ms`) with what its sends came to: $2 is what it granted less what they
 * used. Positive, the claim after it found fewer due rows, and the rest goes back into the bucket, never past its
 * burst $3 (a take of 5 that claimed 2 leaves 0 + 3 = 3 tokens with a burst of 5, 2 with a burst of 2). Negative,
 * the rows cost more than a grant each (a mail to 5 recipients where the provider counts recipients): the bucket goes
 * below zero, so the next takes wait (a take that emptied it for one row to 5 leaves -4 tokens: 250 ms at 20 a second).
 * Either way the take's entry in the window and the quarter-hour of the day the take counted in ($5, the day's
 * length, says which) move by as much: found by the take's time, so that takes of other instances in between keep
 * theirs. The row exists, the take made it.
 */
export const SETTLE_SEND_QUOTA = new Statement((t) => ({
  name: 'reliable_mail_settle_send_quota',
  text: `update ${t.sendQuota}
    set tokens = least($3::float8, tokens + $2::int),
        recent_counts = array(
          select case when a = $4::float8 then greatest(0, n - $2::int) else n end
          from unnest(recent_at, recent_counts) with ordinality e(a, n, i) order by i),
        day_counts = array(
          select case when i = floor($4::float8 / ($5::float8 / ${DAY_BUCKETS})) - day_bucket + ${DAY_BUCKETS + 1}
                      then greatest(0, n - $2::int) else n end
          from unnest(day_counts) with ordinality e(n, i) order by i)
    where key = $1`,
}));

export interface QuotaSettlement {
  key: string;
  /** What the take granted less what its sends used: negative when they cost more. */
  unused: number;
  /** The bucket's burst, as the take had it; null for a key without a rate. */
  burst: number | null;
  /** The take's `takenAtMs`. */
  takenAtMs: number;
  dayMs: number;
}

export async function settleSendQuota(db: SqlClient, settlement: QuotaSettlement): Promise<void> {
  const { key, unused, burst, takenAtMs, dayMs } = settlement;
  await db.query(SETTLE_SEND_QUOTA, [key, unused, burst, takenAtMs, dayMs]);
}
