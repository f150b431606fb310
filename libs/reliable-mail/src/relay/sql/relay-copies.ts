import type { OutboxTables } from '../../schema/outbox-tables.js';

/**
 * The part of each statement that records events (settle, feedback, cancel) that copies them for the relay: one copy
 * for every destination registered for the event's name, with the event's id. `recorded` names the statement's
 * relation of the events it records (columns id, outbox_id, name, payload). With no destination registered it joins
 * an empty table: nothing is written.
 */
export const relayCopies = (t: OutboxTables, recorded: string): string =>
  `insert into ${t.relay} (destination, event_id, outbox_id, name, payload)
    select d.name, r.id, r.outbox_id, r.name, r.payload
    from ${recorded} r join ${t.relayDestination} d on r.name = any(d.events)`;
