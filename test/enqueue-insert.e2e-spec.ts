import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { SqlClient, Statement } from '../libs/reliable-mail/src/database/sql-client.js';
import { statementsOnClient } from '../libs/reliable-mail/src/database/sql-client.js';
import { insertRows } from '../libs/reliable-mail/src/outbox/sql/insert.js';
import { DEFAULT_SCHEMA, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import { WAKE_UP_CHANNEL } from '../libs/reliable-mail/src/reliable-mail.constants.js';
import type { NewOutboxRow } from '../libs/reliable-mail/src/outbox/queue.types.js';
import { newRow } from './support/outbox-rows.js';
import { migrate, waitFor } from './support/test-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const TABLES = tablesIn(DEFAULT_SCHEMA);

const SHAPES = [
  { rows: 1, notify: false },
  { rows: 1, notify: true },
  { rows: 3, notify: false },
  { rows: 3, notify: true },
];

describe("an enqueue's insert", () => {
  let database: TestDatabase;
  let client: pg.Client;

  /** Runs the insert of `rows` on `client`, and gives the plan of the statement it sent. */
  const insertAndPlan = async (rows: NewOutboxRow[], notify: boolean): Promise<string> => {
    const sent: { statement: Statement; values: readonly unknown[] }[] = [];
    const onClient = statementsOnClient(client, TABLES);
    const recording: SqlClient = {
      query: (statement, values) => {
        sent.push({ statement, values });
        return onClient.query(statement, values);
      },
    };
    await insertRows(recording, rows, notify);
    expect(sent).toHaveLength(1);
    const { rows: plan } = await client.query<{ 'QUERY PLAN': string }>(
      `explain (costs off) ${sent[0].statement.in(TABLES).text}`,
      [...sent[0].values],
    );
    return plan.map((line) => line['QUERY PLAN']).join('\n');
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await database?.drop();
  });

  it.each(SHAPES)(
    'of mail without an idempotency key makes no speculative insertion ($rows rows, notify $notify)',
    async ({ rows, notify }) => {
      const plan = await insertAndPlan(
        Array.from({ length: rows }, () => newRow()),
        notify,
      );
      expect(plan).toContain('Insert on mail_outbox');
      expect(plan).not.toContain('Conflict Resolution');
    },
  );

  it.each(SHAPES)(
    'of mail with an idempotency key skips a taken key ($rows rows, notify $notify)',
    async ({ rows, notify }) => {
      const keyedRows = () =>
        Array.from({ length: rows }, (_, index) => newRow({ idempotencyKey: `taken-${rows}-${notify}-${index}` }));
      expect(await insertRows(statementsOnClient(client, TABLES), keyedRows(), notify)).toHaveLength(rows);
      expect(await insertRows(statementsOnClient(client, TABLES), keyedRows(), notify)).toEqual([]);
      expect(await insertAndPlan(keyedRows(), notify)).toContain('Conflict Resolution: NOTHING');
    },
  );

  it.each([false, true])(
    'of a batch with and without keys writes the keyless mail and skips a taken key (notify %s)',
    async (notify) => {
      const key = `mixed-${notify}`;
      await insertRows(statementsOnClient(client, TABLES), [newRow({ idempotencyKey: key })], notify);
      const keyless = newRow();
      const inserted = await insertRows(
        statementsOnClient(client, TABLES),
        [newRow({ idempotencyKey: key }), keyless],
        notify,
      );
      expect(inserted.map((row) => row.id)).toEqual([keyless.id]);
    },
  );

  it('answers for mail without a key what the table holds, and wakes each lane it wrote', async () => {
    const listener = new pg.Client({ connectionString: database.url });
    await listener.connect();
    const notified: string[] = [];
    listener.on('notification', (message) => notified.push(message.payload ?? ''));
    await listener.query(`listen ${WAKE_UP_CHANNEL}`);
    try {
      const one = [newRow({ lane: 'one' })];
      const many = [newRow({ lane: 'many-a' }), newRow({ lane: 'many-b' }), newRow({ lane: 'many-a' })];
      await client.query('begin');
      const inserted = [
        ...(await insertRows(statementsOnClient(client, TABLES), one, true)),
        ...(await insertRows(statementsOnClient(client, TABLES), many, true)),
      ];
      await client.query('commit');

      const { rows: stored } = await client.query(
        `select id, idempotency_key as "idempotencyKey", message_id as "messageId", status,
                content_hash as "contentHash", true as created
         from ${TABLES.outbox} where id = any($1::uuid[]) order by id`,
        [[...one, ...many].map((row) => row.id)],
      );
      expect([...inserted].sort((a, b) => a.id.localeCompare(b.id))).toEqual(stored);
      expect(stored).toHaveLength(4);
      await waitFor('a notification of each lane', () => notified.length >= 3);
      expect([...notified].sort()).toEqual(['many-a', 'many-b', 'one']);
    } finally {
      await listener.end();
    }
  });
});
