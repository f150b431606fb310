import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Registers this instance's destinations: from the commit on, every event of their names that any instance records is
 * copied for them. Done at start, and every minute where the dispatcher publishes to them (`seen_at`): a destination
 * no instance publishes to any more is seen as abandoned (`abandonedDestinations`). An instance naming a destination's
 * events differently changes them for every instance: the destination is one, whoever registers it.
 */

const REGISTER = new Statement((t) => ({
  text: `insert into ${t.relayDestination} (name, events)
    select x.name, array(select jsonb_array_elements_text(x.events))
    from jsonb_to_recordset($1::jsonb) as x(name text, events jsonb)
    on conflict (name) do update set events = excluded.events, seen_at = now()`,
}));

export async function registerDestinations(
  db: SqlClient,
  destinations: ReadonlyArray<{ name: string; events: readonly string[] }>,
): Promise<void> {
  await db.query(REGISTER, [JSON.stringify(destinations.map(({ name, events }) => ({ name, events })))]);
}

/** The names of the events some registered destination takes: those recorded even where no listener hears them. */
const RELAYED_NAMES = new Statement((t) => ({
  text: `select distinct unnest(events) as name from ${t.relayDestination}`,
}));

export async function relayedEventNames(db: SqlClient): Promise<string[]> {
  const rows = await db.query<{ name: string }>(RELAYED_NAMES, []);
  return rows.map((row) => row.name);
}

/**
 * Takes a destination out of service: no event is copied for it any more, then those it was owed are deleted. Two
 * statements, not one: a statement's parts see one snapshot, and the copies a settle made between that snapshot and
 * the registration's delete would stay; the second statement sees them. Run once no instance names the destination:
 * one that does registers it again within a minute (its heartbeat), or at its start.
 */
const UNREGISTER = new Statement((t) => ({
  text: `delete from ${t.relayDestination} where name = $1 and ($2 or seen_at < now() - $3::float8 * interval '1 millisecond')
         returning name`,
}));

const SEEN = new Statement((t) => ({
  text: `select (extract(epoch from now() - seen_at) * 1000)::bigint as unseen_ms from ${t.relayDestination} where name = $1`,
}));

/**
 * The backlog of a destination no longer registered. An instance that started since the registration's delete has
 * registered it again, and its events are owed once more: this statement sees that registration (it began after its
 * commit) and deletes nothing, and copies committed after it began are not its to see.
 */
const DROP_BACKLOG = new Statement((t) => ({
  text: `with dropped as (
           delete from ${t.relay}
           where destination = $1 and not exists (select 1 from ${t.relayDestination} where name = $1)
           returning 1
         )
         select count(*)::int as count,
                exists (select 1 from ${t.relayDestination} where name = $1) as registered_again
         from dropped`,
}));

/**
 * Each destination with its backlog: how many events it is owed, since when the oldest, and the latest error. Those
 * owed events but no longer registered too (`seen_at` null): copies a transaction that began before a `remove` made.
 */
// An operator's command: it reads the whole table once (a count per destination), keeping one error of each.
const LIST = new Statement((t) => ({
  text: `with owed as (
           select destination, count(*)::int as owed, min(recorded_at) as oldest,
                  max(id) filter (where last_error is not null) as errored
           from ${t.relay} group by destination
         )
         select coalesce(d.name, o.destination) as name, d.seen_at, coalesce(o.owed, 0) as owed, o.oldest,
                (select r.last_error from ${t.relay} r where r.id = o.errored) as last_error
         from ${t.relayDestination} d full join owed o on o.destination = d.name
         order by 1`,
}));

export interface RegisteredDestination {
  name: string;
  /** Null for a destination no longer registered that is still owed events. */
  seen_at: Date | null;
  owed: number;
  oldest: Date | null;
  last_error: string | null;
}

export function registeredDestinations(db: SqlClient): Promise<RegisteredDestination[]> {
  return db.query<RegisteredDestination>(LIST, []);
}

/**
 * Registered destinations no instance has published to for $1 ms (none registered them since) that are still owed
 * events: their copies grow with every event recorded, and nothing will publish them. Counted up to $2 + 1.
 */
// Unnamed: a health check's, run only where a destination is registered.
const ABANDONED = new Statement((t) => ({
  text: `select d.name,
                (select count(*) from (select 1 from ${t.relay} r where r.destination = d.name limit $2 + 1) owed)::int
                  as owed
         from ${t.relayDestination} d
         where d.seen_at < now() - $1::float8 * interval '1 millisecond'`,
}));

export async function abandonedDestinations(
  db: SqlClient,
  unseenForMs: number,
  countUpTo: number,
): Promise<Record<string, number>> {
  const rows = await db.query<{ name: string; owed: number }>(ABANDONED, [unseenForMs, countUpTo]);
  return Object.fromEntries(rows.filter(({ owed }) => owed > 0).map(({ name, owed }) => [name, owed]));
}

/** A registered destination an instance published to this recently is in use: `remove` refuses it but `force`d. */
export const IN_USE_WITHIN_MS = 3 * 60_000;

export type RemovedDestination =
  { removed: true; registered: boolean; droppedEvents: number } | { removed: false; unseenMs: number };

/**
 * Takes a destination out of service, unless an instance published to it within `IN_USE_WITHIN_MS` and `force` is
 * not set: that instance would go on publishing what it records while every other stopped copying events for it.
 */
export async function removeDestination(db: SqlClient, name: string, force: boolean): Promise<RemovedDestination> {
  const unregistered = await db.query(UNREGISTER, [name, force, IN_USE_WITHIN_MS]);
  if (unregistered.length === 0) {
    const [seen] = await db.query<{ unseen_ms: string }>(SEEN, [name]);
    if (seen) return { removed: false, unseenMs: Number(seen.unseen_ms) };
  }
  const [{ count, registered_again }] = await db.query<{ count: number; registered_again: boolean }>(DROP_BACKLOG, [
    name,
  ]);
  if (registered_again) return { removed: false, unseenMs: 0 };
  return { removed: true, registered: unregistered.length > 0, droppedEvents: count };
}
