import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { recordFeedback } from '../../libs/reliable-mail/src/feedback/sql/record-feedback.js';
import { cancelRows } from '../../libs/reliable-mail/src/outbox/sql/cancel.js';
import { claimRows } from '../../libs/reliable-mail/src/outbox/sql/claim.js';
import { settleInputOf, settleRows } from '../../libs/reliable-mail/src/outbox/sql/settle.js';
import {
  abandonedDestinations,
  registerDestinations,
  removeDestination,
} from '../../libs/reliable-mail/src/relay/sql/destinations.js';
import { statementsOnClient } from '../../libs/reliable-mail/src/database/sql-client.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import {
  claimOwedEvents,
  confirmRelayed,
  deferRelayed,
  relayBacklog,
} from '../../libs/reliable-mail/src/relay/sql/relay-events.js';
import {
  EMAIL_BOUNCED_EVENT,
  EMAIL_SENT_EVENT,
  RELAYABLE_EVENTS,
} from '../../libs/reliable-mail/src/reliable-mail.constants.js';
import type { SqlClient } from '../../libs/reliable-mail/src/database/sql-client.js';
import { feedbackInput } from '../support/feedback-input.js';
import { sentSettlementOf } from '../support/settlements.js';
import { sqlClientOf } from '../support/sql-client.js';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

// What the statements that record events (settle, feedback, cancel) owe each relay destination, and how a
// destination's copies are claimed, confirmed and put off (see 0014-event-relay.ts).
describe('the event relay in the database', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let db: SqlClient;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    db = sqlClientOf(pool);
  });

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  beforeEach(async () => {
    await pool.query(
      'truncate mail_outbox, mail_outbox_attempt, mail_outbox_event, mail_relay, mail_relay_destination cascade',
    );
  });

  const enqueue = async (count: number): Promise<string[]> => {
    const { rows } = await pool.query<{ id: string }>(
      `insert into mail_outbox (id, message_id, lane, payload, max_attempts)
       select gen_random_uuid(), g || '@relay.test', 'default', '{"text":"x"}'::jsonb, 5 from generate_series(1, $1) g
       returning id`,
      [count],
    );
    return rows.map((row) => row.id);
  };

  /** Claims every pending row and settles each as sent, its event kept for listeners or not. */
  const settleAllSent = async (forListeners: boolean) => {
    const claimed = await claimRows(db, {
      lane: 'default',
      limit: 100,
      lockToken: randomUUID(),
      workerId: 'relay-test',
      leaseMs: 60_000,
      maxAgeMs: 86_400_000,
    });
    const inputs = claimed.map((row) =>
      settleInputOf(sentSettlementOf(row, { eventName: EMAIL_SENT_EVENT, eventPayload: { id: row.id } }), forListeners),
    );
    return settleRows(db, inputs, 30_000);
  };

  const copies = async () =>
    (
      await pool.query<{ destination: string; event_id: string; outbox_id: string; name: string }>(
        'select destination, event_id, outbox_id, name from mail_relay order by destination, event_id',
      )
    ).rows;

  it('a settle copies its event for every destination registered for its name, with the id the listeners get', async () => {
    await registerDestinations(db, [
      { name: 'nats', events: RELAYABLE_EVENTS },
      { name: 'rabbitmq', events: RELAYABLE_EVENTS },
      { name: 'bounces-only', events: [EMAIL_BOUNCED_EVENT] },
    ]);
    const [id] = await enqueue(1);
    const applied = await settleAllSent(true);
    const [event] = [...applied.values()];
    expect(event).toMatchObject({ name: EMAIL_SENT_EVENT });
    expect(await copies()).toEqual([
      { destination: 'nats', event_id: event!.id, outbox_id: id, name: EMAIL_SENT_EVENT },
      { destination: 'rabbitmq', event_id: event!.id, outbox_id: id, name: EMAIL_SENT_EVENT },
    ]);
  });

  it('an event recorded for the relay alone is not kept for listeners, and takes its id from the same sequence', async () => {
    await registerDestinations(db, [{ name: 'nats', events: RELAYABLE_EVENTS }]);
    await enqueue(2);
    const applied = await settleAllSent(false);
    expect([...applied.values()]).toEqual([null, null]);
    const { rows: events } = await pool.query('select id from mail_outbox_event');
    expect(events).toEqual([]);
    const owed = await copies();
    expect(owed).toHaveLength(2);
    // Numbered once each: distinct, and the listeners' next event comes after them.
    expect(new Set(owed.map((copy) => copy.event_id)).size).toBe(2);
    await enqueue(1);
    const [listened] = [...(await settleAllSent(true)).values()];
    expect(Number(listened!.id)).toBeGreaterThan(Math.max(...owed.map((copy) => Number(copy.event_id))));
  });

  it('nothing is copied while no destination is registered', async () => {
    await enqueue(3);
    await settleAllSent(true);
    expect(await copies()).toEqual([]);
  });

  it('a cancel and a feedback report copy their events too', async () => {
    await registerDestinations(db, [{ name: 'nats', events: RELAYABLE_EVENTS }]);
    const [cancelled, bounced] = await enqueue(2);
    await cancelRows(db, [cancelled]);
    await recordFeedback(
      db,
      [
        feedbackInput({
          row_id: bounced,
          event_name: EMAIL_BOUNCED_EVENT,
          event_for_listeners: false,
          event_payload: { recipient: 'ann@example.com' },
        }),
      ],
      30_000,
    );
    expect((await copies()).map(({ outbox_id, name }) => ({ outbox_id, name }))).toEqual(
      expect.arrayContaining([
        { outbox_id: cancelled, name: 'reliable-mail.email.failed' },
        { outbox_id: bounced, name: EMAIL_BOUNCED_EVENT },
      ]),
    );
    const { rows: events } = await pool.query('select name from mail_outbox_event');
    // The cancel's is kept for listeners as ever; the bounce was recorded for the relay alone.
    expect(events).toEqual([{ name: 'reliable-mail.email.failed' }]);
  });

  it("a destination's claim takes its own copies only, each once, and confirms and defers them", async () => {
    await registerDestinations(db, [
      { name: 'a', events: RELAYABLE_EVENTS },
      { name: 'b', events: RELAYABLE_EVENTS },
    ]);
    await enqueue(5);
    await settleAllSent(false);
    const first = await claimOwedEvents(db, 'a', 3, 60_000);
    const second = await claimOwedEvents(db, 'a', 10, 60_000);
    expect(first).toHaveLength(3);
    expect(second).toHaveLength(2);
    expect(new Set([...first, ...second].map((copy) => copy.eventId)).size).toBe(5);
    expect(first[0]).toMatchObject({ name: EMAIL_SENT_EVENT, attempts: 1 });
    // b's copies are untouched by a's claims.
    expect(await claimOwedEvents(db, 'b', 10, 60_000)).toHaveLength(5);

    await confirmRelayed(
      db,
      first.map((copy) => copy.id),
    );
    await deferRelayed(db, [
      { id: second[0].id, delayMs: 0, error: 'no stream' },
      { id: second[1].id, delayMs: 60_000, error: 'later' },
    ]);
    const again = await claimOwedEvents(db, 'a', 10, 60_000);
    expect(again.map((copy) => copy.id)).toEqual([second[0].id]);
    expect(again[0].attempts).toBe(2);
    expect(await relayBacklog(db, 'a', 100)).toMatchObject({ owed: 2 });
    expect(await relayBacklog(db, 'c', 100)).toEqual({ owed: 0, oldestAgeMs: null });
  });

  it("a cancel in the caller's transaction copies nothing when that transaction rolls back", async () => {
    await registerDestinations(db, [{ name: 'nats', events: RELAYABLE_EVENTS }]);
    const [id] = await enqueue(1);
    const client = await pool.connect();
    try {
      await client.query('begin');
      expect(await cancelRows(statementsOnClient(client, tablesIn(DEFAULT_SCHEMA)), [id])).toHaveLength(1);
      await client.query('rollback');
    } finally {
      client.release();
    }
    expect(await copies()).toEqual([]);
  });

  it('a destination nobody said it publishes to for the time given, still owed events, is abandoned', async () => {
    await registerDestinations(db, [
      { name: 'stale', events: RELAYABLE_EVENTS },
      { name: 'stale-but-owed-nothing', events: [EMAIL_BOUNCED_EVENT] },
      { name: 'live', events: RELAYABLE_EVENTS },
    ]);
    await enqueue(3);
    await settleAllSent(false);
    await pool.query(`update mail_relay_destination set seen_at = now() - interval '1 hour' where name like 'stale%'`);
    expect(await abandonedDestinations(db, 600_000, 100)).toEqual({ stale: 3 });
    expect(await abandonedDestinations(db, 600_000, 1)).toEqual({ stale: 2 });
    expect(await abandonedDestinations(db, 7_200_000, 100)).toEqual({});
  });

  it("a purged mail's copies stay owed, and removing a destination deletes them", async () => {
    await registerDestinations(db, [{ name: 'nats', events: RELAYABLE_EVENTS }]);
    const [id] = await enqueue(1);
    await settleAllSent(true);
    await pool.query('delete from mail_outbox where id = $1', [id]);
    expect(await copies()).toHaveLength(1);
    // Registered just now: in use, refused unless forced.
    expect(await removeDestination(db, 'nats', false)).toMatchObject({ removed: false });
    expect(await copies()).toHaveLength(1);
    expect(await removeDestination(db, 'nats', true)).toEqual({ removed: true, registered: true, droppedEvents: 1 });
    expect(await copies()).toEqual([]);
    await enqueue(1);
    await settleAllSent(true);
    expect(await copies()).toEqual([]);
  });
});
