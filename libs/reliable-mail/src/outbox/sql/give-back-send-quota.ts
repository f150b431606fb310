import { type SqlClient, Statement } from '../../database/sql-client.js';
import { DAY_BUCKETS } from '../../schema/versions/0010-send-quotas.js';

/**
 * Gives back $2 sends of key $1 that the take made at $4 (its `at_ms`) granted and no send used: the claim after it
 * found fewer due rows. They go back into the bucket, never past its burst $3 (a take of 5 that claimed 2 leaves
 * 0 + 3 = 3 tokens with a burst of 5, 2 with a burst of 2), off that take's entry in the window, and off the
 * quarter-hour of the day the take counted them in ($5, the day's length, says which): found by the take's time,
 * so that takes of other instances in between keep theirs. The row exists, the take made it.
 */
export const GIVE_BACK_SEND_QUOTA = new Statement((t) => ({
  name: 'reliable_mail_give_back_send_quota',
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

export interface QuotaGiveBack {
  key: string;
  unused: number;
  /** The bucket's burst, as the take had it; null for a key without a rate. */
  burst: number | null;
  /** The take's `takenAtMs`. */
  takenAtMs: number;
  dayMs: number;
}

export async function giveBackSendQuota(db: SqlClient, giveBack: QuotaGiveBack): Promise<void> {
  const { key, unused, burst, takenAtMs, dayMs } = giveBack;
  await db.query(GIVE_BACK_SEND_QUOTA, [key, unused, burst, takenAtMs, dayMs]);
}
