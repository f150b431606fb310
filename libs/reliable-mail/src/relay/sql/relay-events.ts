import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Takes up to $2 of destination $1's due copies for $3 ms: the earliest due first, through (destination,
 * locked_until), skipping those another instance holds; then by primary key array, an index condition whatever the
 * plan was made on. The lease outlasts the publication's timeout, so a copy is published again only after its
 * publisher gave up on it or died.
 */
const CLAIM = new Statement((t) => ({
  name: 'reliable_mail_claim_relay',
  text: `update ${t.relay} r
    set locked_until = now() + $3::float8 * interval '1 millisecond', attempts = r.attempts + 1
    where r.id = any(array(
      select id from ${t.relay}
      where destination = $1 and locked_until <= now()
      order by locked_until limit $2 for update skip locked
    ))
    returning r.id, r.event_id, r.outbox_id, r.name, r.payload, r.recorded_at, r.attempts`,
}));

/** A copy a destination owes, as claimed. */
export interface OwedEvent {
  /** The copy's id (one per destination). */
  id: string;
  eventId: string;
  mailId: string;
  name: string;
  payload: Record<string, unknown>;
  recordedAt: Date;
  /** Publications tried, this one included. */
  attempts: number;
}

export async function claimOwedEvents(
  db: SqlClient,
  destination: string,
  limit: number,
  leaseMs: number,
): Promise<OwedEvent[]> {
  const rows = await db.query<{
    id: string;
    event_id: string;
    outbox_id: string;
    name: string;
    payload: Record<string, unknown>;
    recorded_at: Date;
    attempts: number;
  }>(CLAIM, [destination, limit, leaseMs]);
  return rows.map((row) => ({
    id: String(row.id),
    eventId: String(row.event_id),
    mailId: row.outbox_id,
    name: row.name,
    payload: row.payload,
    recordedAt: row.recorded_at,
    attempts: row.attempts,
  }));
}

/** The copies whose broker confirmed them: the destination owes them no more. */
const CONFIRM = new Statement((t) => ({
  name: 'reliable_mail_confirm_relay',
  text: `delete from ${t.relay} where id = any($1::bigint[])`,
}));

export async function confirmRelayed(db: SqlClient, ids: readonly string[]): Promise<void> {
  if (ids.length > 0) await db.query(CONFIRM, [ids]);
}

/**
 * Copies whose publication failed, each due again after its own delay ($2, ms) with the error that failed it: a
 * copy the broker keeps refusing backs off alone, and the rest of its destination's backlog goes on.
 */
const DEFER = new Statement((t) => ({
  name: 'reliable_mail_defer_relay',
  text: `update ${t.relay} r
    set locked_until = now() + d.delay_ms * interval '1 millisecond', last_error = d.error
    from unnest($1::bigint[], $2::float8[], $3::text[]) as d(id, delay_ms, error)
    where r.id = any($1::bigint[]) and r.id = d.id`,
}));

export interface DeferredCopy {
  id: string;
  delayMs: number;
  error: string;
}

export async function deferRelayed(db: SqlClient, copies: readonly DeferredCopy[]): Promise<void> {
  if (copies.length === 0) return;
  await db.query(DEFER, [copies.map((c) => c.id), copies.map((c) => c.delayMs), copies.map((c) => c.error)]);
}

/**
 * A destination's backlog for health: its oldest copy (by id: recording order) and how many it has, counted up to
 * $2 + 1 through (destination, id), so that a backlog of millions costs a health check no more than that.
 */
// Unnamed: a health check's, planned with the table as it is at each run.
const BACKLOG = new Statement((t) => ({
  text: `select (select (extract(epoch from now() - recorded_at) * 1000)::bigint from ${t.relay}
                 where destination = $1 order by id limit 1) as oldest_age_ms,
                (select count(*) from (select 1 from ${t.relay} where destination = $1 limit $2 + 1) owed)::int as owed`,
}));

export interface RelayBacklog {
  /** Events owed, counted up to the cap asked for, plus one (more than the cap: at least that many). */
  owed: number;
  /** How long the oldest has waited; null when none is owed. */
  oldestAgeMs: number | null;
}

export async function relayBacklog(db: SqlClient, destination: string, countUpTo: number): Promise<RelayBacklog> {
  const [row] = await db.query<{ oldest_age_ms: string | null; owed: number }>(BACKLOG, [destination, countUpTo]);
  return { owed: row.owed, oldestAgeMs: row.oldest_age_ms === null ? null : Number(row.oldest_age_ms) };
}
