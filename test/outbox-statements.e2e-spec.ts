import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CLAIM, claimRows, claimValues, type ClaimRequest } from '../libs/reliable-mail/src/outbox/sql/claim.js';
import { SETTLE, settleInputOf, settleRows, settleValues } from '../libs/reliable-mail/src/outbox/sql/settle.js';
import { RECORD_FEEDBACK } from '../libs/reliable-mail/src/feedback/sql/record-feedback.js';
import { RELEASE_UNANSWERED } from '../libs/reliable-mail/src/outbox/sql/release-unanswered.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { createTestApp, migrate, testMailOptions } from './support/test-app.js';
import { CONNECTION_SETTINGS, OutboxDatabase } from '../libs/reliable-mail/src/database/outbox-database.js';
import { sqlClientOf } from './support/sql-client.js';
import { feedbackInput } from './support/feedback-input.js';
import { sentSettlement, sentSettlementOf } from './support/settlements.js';
import { Statement, statementsOnClient } from '../libs/reliable-mail/src/database/sql-client.js';
import { DEFAULT_SCHEMA, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';

const TABLES = tablesIn(DEFAULT_SCHEMA);

const claimRequest = (workerId: string, limit: number): ClaimRequest => ({
  lane: 'default',
  limit,
  lockToken: randomUUID(),
  workerId,
  leaseMs: 600_000,
  maxAgeMs: 86_400_000,
});

const settlement = sentSettlement({ providerMessageId: 'queued' });

// The dispatcher's statements are prepared once per connection and planned once (see test/generic-plans, which checks
// every named statement made on empty tables): these are the plans a long-lived connection gets.
describe("the dispatcher's statements, prepared while the attempts table was empty, once the tables have grown", () => {
  let database: TestDatabase;
  let client: pg.Client;

  const plans = async (text: string, values: unknown[], grow: () => Promise<unknown>): Promise<string> => {
    const literals = values.map((value) =>
      client.escapeLiteral(Array.isArray(value) ? `{${value.join(',')}}` : String(value)),
    );
    const explain = async () => {
      const { rows } = await client.query(`explain (costs off) execute statement_under_test(${literals.join(', ')})`);
      return rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
    };
    await client.query(`prepare statement_under_test as ${text}`);
    try {
      // More runs than PostgreSQL makes before it may settle on a generic plan.
      for (let run = 0; run < 6; run++) await explain();
      await grow();
      return await explain();
    } finally {
      await client.query('deallocate statement_under_test');
    }
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    // The settings of reliable-mail's own connections (OutboxDatabase).
    client = new pg.Client({ connectionString: database.url, options: CONNECTION_SETTINGS });
    await client.connect();
    await client.query(
      `insert into mail_outbox (id, message_id, lane, payload, max_attempts)
       select gen_random_uuid(), g || '@plan.test', 'default', jsonb_build_object('text', repeat('x', 2000)), 5
       from generate_series(1, 10000) g`,
    );
  });

  afterAll(async () => {
    await client?.end();
    await database?.drop();
  });

  const growAttempts = () =>
    client.query(
      `insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, outcome)
       select gen_random_uuid(), id, 1, 'w', gen_random_uuid(), 'sent' from mail_outbox, generate_series(1, 10)`,
    );

  it("reliable-mail's own connections plan each statement once, and wait for their commits' flush even where the database does not", async () => {
    const name = database.url.split('/').pop()!;
    await client.query(`alter database ${client.escapeIdentifier(name)} set synchronous_commit = off`);
    const app = await createTestApp(
      database.url,
      testMailOptions('smtp://127.0.0.1:1', { dispatcher: { enabled: false } }),
    );
    try {
      const [setting] = await app.get(OutboxDatabase).query<{ plan_cache_mode: string; synchronous_commit: string }>(
        new Statement(() => ({
          text: `select current_setting('plan_cache_mode') as plan_cache_mode,
                          current_setting('synchronous_commit') as synchronous_commit`,
        })),
        [],
      );
      expect(setting).toEqual({ plan_cache_mode: 'force_generic_plan', synchronous_commit: 'on' });
    } finally {
      await app.close();
      await client.query(`alter database ${client.escapeIdentifier(name)} reset synchronous_commit`);
    }
  });

  it('settle finds the outbox and attempt rows by primary key', async () => {
    const plan = await plans(SETTLE.in(TABLES).text, settleValues([settleInputOf(settlement)], 30_000), growAttempts);
    expect(plan).toMatch(/(Index Scan using|Bitmap Index Scan on) mail_outbox_pkey\b/);
    expect(plan).toMatch(/(Index Scan using|Bitmap Index Scan on) mail_outbox_attempt_pkey\b/);
    expect(plan).not.toMatch(/Seq Scan on mail_outbox|mail_outbox_lease_index/);
  });

  it('claim reads the due and lease indexes, never a whole table', async () => {
    const plan = await plans(
      CLAIM.in(TABLES).text,
      claimValues(claimRequest('plan-test:1', 16)),
      async () => undefined,
    );
    expect(plan).toMatch(/mail_outbox_due_index/);
    expect(plan).toMatch(/mail_outbox_lease_index/);
    expect(plan).not.toMatch(/Seq Scan on mail_outbox/);
  });

  it("claim reads the earlier attempts of a row sent before through their index by row, and a first attempt's not at all", async () => {
    const plan = await plans(CLAIM.in(TABLES).text, claimValues(claimRequest('plan-test:3', 16)), growAttempts);
    expect(plan).toMatch(/One-Time Filter: claimed\.sent_before/);
    expect(plan).toMatch(/Index Cond: \(outbox_id = claimed\.id\)/);
    expect(plan).not.toMatch(/Seq Scan on mail_outbox/);
  });

  it("claim reads the unsubscribes of a non-transactional lane's category by their primary key, never the whole table", async () => {
    const plan = await plans(
      CLAIM.in(TABLES).text,
      claimValues({ ...claimRequest('plan-test:4', 16), unsubscribeCategory: 'newsletter' }),
      () =>
        client.query(
          `insert into mail_unsubscribe (address, category)
           select 'reader' || g || '@example.com', case when g % 2 = 0 then 'newsletter' else 'digest' end
           from generate_series(1, 20000) g;
           analyze mail_unsubscribe`,
        ),
    );
    expect(plan).toMatch(
      /(Index (Only )?Scan using|Bitmap Index Scan on) mail_unsubscribe_pkey\b.*\n\s+Index Cond: \(\(address = ANY \(.+\)\) AND \(category = \$7\)\)/,
    );
    expect(plan).not.toMatch(/Seq Scan on mail_unsubscribe/);
    await client.query('truncate mail_unsubscribe');
  });

  it("claim suppresses the recipients unsubscribed from its lane's category, for a non-transactional lane only", async () => {
    const pool = new pg.Pool({ connectionString: database.url, max: 1 });
    const to = (...addresses: string[]) => JSON.stringify(addresses.map((address) => ({ address })));
    try {
      await client.query(
        `insert into mail_suppression (address, reason, source) values ('gone@example.com', 'hard bounce', 'bounce');
         insert into mail_unsubscribe (address, category) values ('ann@example.com', 'newsletter'),
                                                                  ('bob@example.com', 'newsletter'),
                                                                  ('gone@example.com', 'newsletter')`,
      );
      const claim = async (recipients: string, unsubscribeCategory?: string) => {
        const lane = `unsubscribe-${randomUUID().slice(0, 8)}`;
        await client.query(
          `insert into mail_outbox (id, message_id, lane, payload, max_attempts)
           values (gen_random_uuid(), gen_random_uuid() || '@claim.test', $1,
                   jsonb_build_object('to', $2::jsonb, 'cc', '[]'::jsonb, 'bcc', '[]'::jsonb, 'text', 'x'), 5)`,
          [lane, recipients],
        );
        const [row] = await claimRows(sqlClientOf(pool), {
          ...claimRequest('plan-test:5', 1),
          lane,
          unsubscribeCategory,
        });
        return { skipReason: row.skipReason, suppressed: [...row.suppressed].sort() };
      };
      expect(await claim(to('ann@example.com'), 'newsletter')).toEqual({
        skipReason: 'suppressed',
        suppressed: ['ann@example.com'],
      });
      // Each address once, whether it is on the suppression list, unsubscribed, or both.
      expect(await claim(to('Ann@Example.com', 'gone@example.com', 'cid@example.com'), 'newsletter')).toEqual({
        skipReason: null,
        suppressed: ['ann@example.com', 'gone@example.com'],
      });
      expect(await claim(to('ann@example.com', 'bob@example.com', 'gone@example.com'), 'newsletter')).toEqual({
        skipReason: 'suppressed',
        suppressed: ['ann@example.com', 'bob@example.com', 'gone@example.com'],
      });
      expect(await claim(to('ann@example.com'), 'digest')).toEqual({ skipReason: null, suppressed: [] });
      expect(await claim(to('ann@example.com', 'gone@example.com'))).toEqual({
        skipReason: null,
        suppressed: ['gone@example.com'],
      });
    } finally {
      await client.query('truncate mail_unsubscribe; delete from mail_suppression');
      await pool.end();
    }
  });

  it('the hand-back of unanswered claims reads the lease index, never a whole table', async () => {
    const plan = await plans(
      RELEASE_UNANSWERED.in(TABLES).text,
      [[randomUUID(), randomUUID()], 'default'],
      async () => undefined,
    );
    expect(plan).toMatch(/mail_outbox_lease_index/);
    expect(plan).not.toMatch(/Seq Scan on mail_outbox/);
  });

  it('feedback finds its row by the id of any request the mail went in, through an index', async () => {
    const report = feedbackInput({ provider_message_id: 'request-5000', authenticated: true });
    const plan = await plans(RECORD_FEEDBACK.in(TABLES).text, [JSON.stringify([report]), 30_000], () =>
      client.query(
        `update mail_outbox set provider_message_ids = array['request-' || ctid::text, 'other-' || ctid::text]
         where random() < 0.5; analyze mail_outbox`,
      ),
    );
    expect(plan).toMatch(/mail_outbox_provider_message_ids_index/);
    expect(plan).not.toMatch(/Seq Scan on mail_outbox/);
  });

  it("claim gives each attempt a UUID version 7 of the claim's time, so the attempts' key grows at its right-hand end", async () => {
    const pool = new pg.Pool({ connectionString: database.url, max: 1 });
    try {
      await client.query(
        `insert into mail_outbox (id, message_id, lane, payload, max_attempts)
         select gen_random_uuid(), g || '@uuid.test', 'uuid-test',
                jsonb_build_object('to', jsonb_build_array(jsonb_build_object('address', 'ann@example.com')),
                                   'cc', '[]'::jsonb, 'bcc', '[]'::jsonb, 'text', 'x'), 5
         from generate_series(1, 3) g`,
      );
      const before = Date.now();
      const claimed = await claimRows(sqlClientOf(pool), { ...claimRequest('plan-test:3', 3), lane: 'uuid-test' });
      expect(claimed).toHaveLength(3);
      for (const { attemptId } of claimed) {
        expect(attemptId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        const millis = parseInt(attemptId!.replaceAll('-', '').slice(0, 12), 16);
        // now() is the transaction's start, rounded to the millisecond.
        expect(millis).toBeGreaterThanOrEqual(before - 1);
        expect(millis).toBeLessThanOrEqual(Date.now() + 1);
      }
    } finally {
      await pool.end();
    }
  });

  it('settle stores a reply with a NUL without it, and one with a backslash and "u0000" as it is', async () => {
    const pool = new pg.Pool({ connectionString: database.url, max: 1 });
    try {
      const db = sqlClientOf(pool);
      const claimed = await claimRows(db, claimRequest('plan-test:2', 2));
      const replies = ['250 queued\0 as A1', '250 queued as \\u0000B2'];
      const applied = await settleRows(
        db,
        claimed.map((row, index) =>
          settleInputOf(sentSettlementOf(row, { providerMessageId: 'queued', reply: replies[index] })),
        ),
        30_000,
      );
      expect(applied.size).toBe(2);
      const { rows } = await client.query(
        `select provider_reply from mail_outbox where id = any($1) order by array_position($1, id)`,
        [claimed.map((row) => row.id)],
      );
      expect(rows.map((row: { provider_reply: string }) => row.provider_reply)).toEqual([
        '250 queued as A1',
        '250 queued as \\u0000B2',
      ]);
    } finally {
      await pool.end();
    }
  });
  it("the claim gives each row's day as YYYY-MM-DD, whatever the session's DateStyle", async () => {
    const dmy = new pg.Client({ connectionString: database.url, options: '-c datestyle=SQL,DMY' });
    await dmy.connect();
    try {
      const [row] = await claimRows(statementsOnClient(dmy, TABLES), claimRequest('plan-test:datestyle', 1));
      const { rows } = await dmy.query(
        `select to_char(partition_day, 'YYYY-MM-DD') as day, partition_day::text as shown
                                          from mail_outbox where id = $1`,
        [row.id],
      );
      // What `::text` would have given, which the settle's range compares as text.
      expect(rows[0].shown).toMatch(/^\d\d\/\d\d\/\d{4}$/);
      expect(row.partitionDay).toBe(rows[0].day);
      expect(row.partitionDay).toMatch(/^\d{4}-\d\d-\d\d$/);
    } finally {
      await dmy.end();
    }
  });
});
