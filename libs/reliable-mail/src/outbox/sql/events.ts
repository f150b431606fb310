import type { StoredEvent } from '../queue.types.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';

// Events are recorded by the settle that makes the change they report (see settle.ts) and deleted once emitted.
// One whose emitter died first keeps its lease time; after it, any instance that listens for it emits it again.

/**
 * Takes up to $2 events named in $3 whose lease ran out, but those in $4, for another $1 ms: the longest waiting
 * first, through the lease's index, and then by primary key array (an index condition whatever the plan was made on).
 */
const CLAIM_UNCONFIRMED = new Statement((t) => ({
  name: 'reliable_mail_claim_events',
  text: `update ${t.event} e set locked_until = now() + $1::float8 * interval '1 millisecond'
    where e.id = any(array(
      select id from ${t.event}
      where locked_until <= now() and name = any($3::text[]) and id <> all($4::bigint[])
      order by locked_until limit $2 for update skip locked
    ))
    returning e.id, e.name, e.payload`,
}));

const CONFIRM = new Statement((t) => ({
  name: 'reliable_mail_confirm_events',
  text: `delete from ${t.event} where id = any($1::bigint[])`,
}));

export interface UnconfirmedEventsRequest {
  names: string[];
  limit: number;
  leaseMs: number;
  /** Events still being emitted by this process. */
  except: string[];
}

export async function claimUnconfirmedEvents(
  db: SqlClient,
  { names, limit, leaseMs, except }: UnconfirmedEventsRequest,
): Promise<StoredEvent[]> {
  const rows = await db.query<{ id: string; name: string; payload: Record<string, unknown> }>(CLAIM_UNCONFIRMED, [
    leaseMs,
    limit,
    names,
    except,
  ]);
  return rows.map((row) => ({ id: String(row.id), name: row.name, payload: row.payload }));
}

/** Deletes events whose listeners have run. */
export async function confirmEvents(db: SqlClient, ids: string[]): Promise<void> {
  if (ids.length > 0) await db.query(CONFIRM, [ids]);
}

/**
 * The oldest event of the names in $1 not yet confirmed, in the order of recording (the primary key). An event is
 * deleted once heard, so one of a name this process listens for that stays is one whose listeners keep failing or
 * hanging. Events of other names are passed over: an instance with `record: 'all'` keeps them for listeners elsewhere.
 */
// Unnamed: a health check's, planned at each run with the table as it is then (nothing indexes the names).
const OLDEST_UNCONFIRMED = new Statement((t) => ({
  text: `select name, (extract(epoch from now() - created_at) * 1000)::bigint as age_ms
         from ${t.event} where name = any($1::text[]) order by id limit 1`,
}));

export interface OldestUnconfirmedEvent {
  name: string;
  ageMs: number;
}

export async function oldestUnconfirmedEvent(db: SqlClient, names: string[]): Promise<OldestUnconfirmedEvent | null> {
  if (names.length === 0) return null;
  const [row] = await db.query<{ name: string; age_ms: string }>(OLDEST_UNCONFIRMED, [names]);
  return row ? { name: row.name, ageMs: Number(row.age_ms) } : null;
}
