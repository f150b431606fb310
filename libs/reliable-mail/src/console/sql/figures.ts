import { type SqlClient, Statement } from '../../database/sql-client.js';
import { toDateOrNull } from '../../outbox/sql/timestamps.js';

export interface QueueFigures {
  backlog: number;
  oldestDueAt: Date | null;
  lagMs: number;
  deadLetters: number;
  suppressions: number;
}

/**
 * The queue at a glance, each figure from an index: the pending rows due now (and the oldest due time) from the
 * dispatcher's partial index, the sending ones from the lease's, the dead letters of the last day from the problem
 * index, the suppressions from their primary key. Lag is how far the dispatchers are behind their schedule: now
 * less the oldest due time (the health check's lag counts a retried row from its creation instead). 3 ms at
 * 20,000 pending rows and 10,000 suppressions.
 */
const FIGURES = new Statement((t) => ({
  name: 'reliable_mail_console_figures',
  text: `select due.count + (select count(*) from ${t.outbox} where status = 'sending') as backlog,
    due.oldest as oldest_due_at,
    coalesce(extract(epoch from now() - due.oldest) * 1000, 0)::float8 as lag_ms,
    (select count(*) from ${t.outbox} where status = 'dead' and updated_at > now() - interval '24 hours') as dead_letters,
    (select count(*) from ${t.suppression}) as suppressions
  from (select count(*) as count, min(next_attempt_at) as oldest
        from ${t.outbox} where status = 'pending' and next_attempt_at <= now()) due`,
}));

interface FiguresRecord {
  backlog: string;
  oldest_due_at: Date | null;
  lag_ms: number;
  dead_letters: string;
  suppressions: string;
}

export async function queueFigures(db: SqlClient): Promise<QueueFigures> {
  const [row] = await db.query<FiguresRecord>(FIGURES, []);
  return {
    backlog: Number(row.backlog),
    oldestDueAt: toDateOrNull(row.oldest_due_at),
    lagMs: Math.max(0, Math.round(row.lag_ms)),
    deadLetters: Number(row.dead_letters),
    suppressions: Number(row.suppressions),
  };
}
