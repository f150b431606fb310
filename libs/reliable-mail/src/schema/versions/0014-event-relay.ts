import type { OutboxTables } from '../outbox-tables.js';
import type { SchemaVersion } from './schema-version.js';

/**
 * The event relay (issue 24): the recorded events each broker destination is still owed, apart from the app's
 * listeners' record in `mail_outbox_event`.
 *
 * - **A copy per destination, not a flag on the event.** A listener's confirmation deletes its event, as before, and
 *   costs an app without a relay nothing more; a destination's confirmation deletes its own copy. A broker down for a
 *   day keeps its copies and nothing else: the listeners' events go on being deleted.
 * - **The destinations are rows** (`mail_relay_destination`), registered by every instance that publishes to one
 *   (and again every minute: `seen_at`). The statements that record an event (settle, feedback, cancel) copy it for
 *   every destination registered there, so an instance that has no broker client still owes the broker its events.
 *   Code of before this version copies nothing: a destination is to be named once every instance runs this one. A
 *   destination taken out of service is deleted with its copies (`reliable-mail relay remove`).
 * - **One id for the event everywhere**: the copy keeps the id the listeners' record has (or would have had: an
 *   event recorded for a destination alone takes its id from the same sequence), so the message id a broker
 *   deduplicates on, `<mail id>:<event id>`, is the same in every destination and in `eventId` in the app.
 * - **No foreign key to the outbox**: retention purging a mail, or dropping its day, leaves the copies its broker is
 *   still owed.
 * - **Claimed through (destination, locked_until)**: each destination's due copies are a range of the index, so a
 *   destination with a backlog of millions is not read by another's claim, nor its copies waiting out a backoff by
 *   its own. Health reads the oldest copy through (destination, id), one index descent whatever the backlog.
 */
export const EVENT_RELAY_SCHEMA_V14 = (t: Pick<OutboxTables, 'relay'>) => ({
  indexes: {
    due: `create index "mail_relay_due_index" on ${t.relay} ("destination", "locked_until")`,
    destination: `create index "mail_relay_destination_index" on ${t.relay} ("destination", "id")`,
  },
});

export const eventRelay: SchemaVersion = {
  version: 14,
  name: 'event-relay',
  servesCodeFrom: 1,
  statements: (t) => [
    `create table ${t.relayDestination} (
        "name" text primary key,
        "events" text[] not null,
        "registered_at" timestamptz not null default now(),
        "seen_at" timestamptz not null default now()
      )`,
    `create table ${t.relay} (
        "id" bigserial primary key,
        "destination" text not null,
        "event_id" bigint not null,
        "outbox_id" uuid not null,
        "name" text not null,
        "payload" jsonb not null,
        "recorded_at" timestamptz not null default now(),
        "locked_until" timestamptz not null default now(),
        "attempts" int not null default 0,
        "last_error" text null
      )`,
    EVENT_RELAY_SCHEMA_V14(t).indexes.due,
    EVENT_RELAY_SCHEMA_V14(t).indexes.destination,
  ],
};
