import { type SqlClient, Statement } from '../../database/sql-client.js';

/**
 * Registers this instance's destinations at its start (`seen_at`: the latest start that named each): from the commit
 * on, every event of their names that any instance records is copied for them. An instance naming a destination's events differently changes
 * them for every instance: the destination is one, whoever registers it.
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
 * one that does registers it again at its next start.
 */
const UNREGISTER = new Statement((t) => ({
  text: `delete from ${t.relayDestination} where name = $1 returning name`,
}));

const DROP_BACKLOG = new Statement((t) => ({
  text: `with dropped as (delete from ${t.relay} where destination = $1 returning 1) select count(*)::int as count from dropped`,
}));

/** Each registered destination with its backlog: how many events it is owed, and since when the oldest. */
const LIST = new Statement((t) => ({
  text: `select d.name, d.events, d.registered_at, d.seen_at,
                (select count(*) from ${t.relay} r where r.destination = d.name)::int as owed,
                (select min(recorded_at) from ${t.relay} r where r.destination = d.name) as oldest
         from ${t.relayDestination} d order by d.name`,
}));

export interface RegisteredDestination {
  name: string;
  events: string[];
  registered_at: Date;
  seen_at: Date;
  owed: number;
  oldest: Date | null;
}

export function registeredDestinations(db: SqlClient): Promise<RegisteredDestination[]> {
  return db.query<RegisteredDestination>(LIST, []);
}

export interface RemovedDestination {
  registered: boolean;
  droppedEvents: number;
}

export async function removeDestination(db: SqlClient, name: string): Promise<RemovedDestination> {
  const unregistered = await db.query(UNREGISTER, [name]);
  const [{ count }] = await db.query<{ count: number }>(DROP_BACKLOG, [name]);
  return { registered: unregistered.length > 0, droppedEvents: count };
}
