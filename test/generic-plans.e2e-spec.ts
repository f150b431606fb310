import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CONNECTION_SETTINGS } from '../libs/reliable-mail/src/database/outbox-database.js';
import type { SqlClient, Statement } from '../libs/reliable-mail/src/database/sql-client.js';
import { deleteUnlinkedFeedback } from '../libs/reliable-mail/src/feedback/sql/feedback-retention.js';
import { recordFeedback } from '../libs/reliable-mail/src/feedback/sql/record-feedback.js';
import { anyDue } from '../libs/reliable-mail/src/outbox/sql/any-due.js';
import { claimRows } from '../libs/reliable-mail/src/outbox/sql/claim.js';
import {
  claimUnconfirmedEvents,
  confirmEvents,
  oldestUnconfirmedEvent,
} from '../libs/reliable-mail/src/outbox/sql/events.js';
import { extendLease } from '../libs/reliable-mail/src/outbox/sql/extend-lease.js';
import {
  feedbackFigures,
  healthFigures,
  openCounts,
  undeclaredLanes,
} from '../libs/reliable-mail/src/outbox/sql/health.js';
import { releaseRows } from '../libs/reliable-mail/src/outbox/sql/release.js';
import { releaseUnansweredClaims } from '../libs/reliable-mail/src/outbox/sql/release-unanswered.js';
import { deleteRetained } from '../libs/reliable-mail/src/outbox/sql/retention.js';
import { settleInputOf, settleRows } from '../libs/reliable-mail/src/outbox/sql/settle.js';
import { DEFAULT_SCHEMA, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import { claimOwedEvents, confirmRelayed, deferRelayed } from '../libs/reliable-mail/src/relay/sql/relay-events.js';
import { listUnsubscribes } from '../libs/reliable-mail/src/unsubscribe/sql/unsubscribes.js';
import { listSuppressions } from '../libs/reliable-mail/src/outbox/sql/suppression.js';
import { feedbackInput } from './support/feedback-input.js';
import { sentSettlement } from './support/settlements.js';
import { migrate } from './support/test-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

// reliable-mail's own connections plan each prepared statement once (a generic plan), which saves its planning at
// every run: a claim planned at every run cost 0.4-0.6 ms (the bench's claim figures at 87df0c2) on the path of every
// idle mail. A generic plan is made with the tables as they are then, often empty, and kept once they have grown. Each statement must therefore reach every
// table through an index condition whatever the statistics said (a primary key array, a partial index), never
// through a scan of a whole table or index: this runs each statement as the dispatcher, health, events, retention,
// feedback and the unsubscribes' pages run it, plans it on empty tables just analysed, grows them, and reads the plan
// it keeps.

const TABLES = tablesIn(DEFAULT_SCHEMA);
// mail_relay_destination is not among them: a row per broker, read whole by every statement that records events.
const OUR_TABLES =
  /\bon (mail_outbox|mail_outbox_attempt|mail_outbox_event|mail_outbox_feedback|mail_suppression|mail_unsubscribe|mail_relay)\b/;
/** Partial indexes holding open rows only (due, leased, failed or dead): read whole, they stay small. */
const OPEN_ROW_INDEXES = new Set(['mail_outbox_due_index', 'mail_outbox_lease_index', 'mail_outbox_problem_index']);

/** What a statement does to the grown tables: its plan's scans that read a whole table or index. */
function wholeScans(plan: string): string[] {
  const nodes = plan.split(/\n(?=\s*->)/);
  return nodes
    .map((node) => node.trim())
    .filter((node) => {
      const header = node.split('\n')[0];
      if (!OUR_TABLES.test(header)) return false;
      if (/Seq Scan/.test(header)) return true;
      const index = /(?:Index Scan|Index Only Scan|Bitmap Index Scan)(?: Backward)? using (\w+)/.exec(header)?.[1];
      return index !== undefined && !OPEN_ROW_INDEXES.has(index) && !/Index Cond:/.test(node);
    })
    .map((node) => node.split('\n')[0]);
}

interface Recorded {
  name: string;
  text: string;
  values: readonly unknown[];
}

/** Runs each statement function against a client that records what it would run and runs nothing. */
async function recordStatements(calls: Array<(db: SqlClient) => Promise<unknown>>): Promise<Recorded[]> {
  const recorded: Recorded[] = [];
  const recorder: SqlClient = {
    query(statement: Statement, values: readonly unknown[]) {
      const { name, text } = statement.in(TABLES);
      recorded.push({ name: name ?? text.slice(0, 40), text, values });
      return Promise.reject(new Error('recorded'));
    },
  };
  for (const call of calls) await call(recorder).catch(() => undefined);
  return recorded;
}

const settlement = sentSettlement({
  providerMessageId: 'queued',
  bounced: [{ address: 'bob@example.com', reply: '550 5.1.1' }],
  eventName: 'reliable-mail.email.sent',
});

const feedback = feedbackInput({
  provider_message_id: 'request-5000',
  row_id: randomUUID(),
  status: '5.1.1',
  suppression_reason: 'hard bounce',
  authenticated: true,
  event_name: 'reliable-mail.email.bounced',
  event_payload: {},
});

const EVERY_NAMED_STATEMENT: Array<(db: SqlClient) => Promise<unknown>> = [
  (db) =>
    claimRows(db, {
      lane: 'default',
      limit: 16,
      lockToken: randomUUID(),
      workerId: 'w',
      leaseMs: 600_000,
      maxAgeMs: 86_400_000,
      unsubscribeCategory: 'newsletter',
    }),
  (db) => settleRows(db, [settleInputOf(settlement)], 30_000),
  (db) => extendLease(db, { id: randomUUID(), lockToken: randomUUID() }, 600_000),
  (db) => anyDue(db, 'default'),
  (db) => releaseRows(db, [{ id: randomUUID(), lockToken: randomUUID(), attemptId: randomUUID() }]),
  (db) => releaseUnansweredClaims(db, 'default', [randomUUID()]),
  (db) =>
    claimUnconfirmedEvents(db, { names: ['reliable-mail.email.sent'], limit: 100, leaseMs: 30_000, except: ['1'] }),
  (db) => confirmEvents(db, ['1', '2']),
  (db) => oldestUnconfirmedEvent(db, ['reliable-mail.email.sent']),
  (db) => healthFigures(db, 3_600_000),
  (db) => openCounts(db),
  (db) => undeclaredLanes(db, ['default']),
  (db) => feedbackFigures(db, 3_600_000),
  (db) => deleteRetained(db, 86_400_000, 500),
  (db) => deleteUnlinkedFeedback(db, 86_400_000, 500),
  (db) => recordFeedback(db, [feedback], 30_000),
  (db) => claimOwedEvents(db, 'nats', 100, 20_000),
  (db) => confirmRelayed(db, ['1', '2']),
  (db) => deferRelayed(db, [{ id: '1', delayMs: 1_000, error: 'no stream' }]),
  (db) => listUnsubscribes(db, 101, undefined, 'reader2'),
  (db) => listUnsubscribes(db, 101, { address: 'reader2500@example.com', category: 'newsletter' }),
  (db) => listSuppressions(db, 101, undefined, 'bounced2'),
  (db) => listSuppressions(db, 101, 'bounced2500@example.com'),
];

/**
 * The primary key scan of each page of the unsubscribes and of the suppression list, started at its keyset: as a
 * filter, the keyset would leave each page reading the index from its first entry.
 */
const KEYSET_PAGES: Record<string, RegExp> = {
  reliable_mail_list_suppressions:
    /Index (Only )?Scan using mail_suppression_pkey on mail_suppression\s+Index Cond: \(address >= \$2\)/,
  reliable_mail_list_suppressions_after:
    /Index (Only )?Scan using mail_suppression_pkey on mail_suppression\s+Index Cond: \(\(address > \$2\) AND \(address >= \$3\)\)/,
  reliable_mail_list_unsubscribes:
    /Index (Only )?Scan using mail_unsubscribe_pkey on mail_unsubscribe\s+Index Cond: \(address >= \$2\)/,
  reliable_mail_list_unsubscribes_after:
    /Index (Only )?Scan using mail_unsubscribe_pkey on mail_unsubscribe\s+Index Cond: \(\(ROW\(address, category\) > ROW\(\$2, \$3\)\)/,
};

describe("the statements reliable-mail's connections prepare, planned once on empty tables", () => {
  let database: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    // The settings of reliable-mail's own connections (OutboxDatabase).
    client = new pg.Client({ connectionString: database.url, options: CONNECTION_SETTINGS });
    await client.connect();
    await client.query('analyze');
  });

  afterAll(async () => {
    await client?.end();
    await database?.drop();
  });

  const literal = (value: unknown): string => {
    if (value === null || value === undefined) return 'null';
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    if (value instanceof Date) return client.escapeLiteral(value.toISOString());
    if (Array.isArray(value)) return client.escapeLiteral(`{${value.map((item) => JSON.stringify(item)).join(',')}}`);
    // The statements' other values are text: JSON written once (settle, feedback), ids, names.
    return client.escapeLiteral(value as string);
  };

  it('reach every grown table through an index condition, never through a whole scan', async () => {
    const statements = (await recordStatements(EVERY_NAMED_STATEMENT)).filter((statement) =>
      statement.name.startsWith('reliable_mail_'),
    );
    expect(statements.map((statement) => statement.name).sort()).toEqual(
      [
        'reliable_mail_any_due',
        'reliable_mail_claim',
        'reliable_mail_claim_events',
        'reliable_mail_claim_relay',
        'reliable_mail_confirm_relay',
        'reliable_mail_defer_relay',
        'reliable_mail_confirm_events',
        'reliable_mail_extend_lease',
        'reliable_mail_feedback_retention',
        'reliable_mail_health',
        'reliable_mail_list_suppressions',
        'reliable_mail_list_suppressions_after',
        'reliable_mail_list_unsubscribes',
        'reliable_mail_list_unsubscribes_after',
        'reliable_mail_open_counts',
        'reliable_mail_record_feedback',
        'reliable_mail_release',
        'reliable_mail_release_unanswered',
        'reliable_mail_retention',
        'reliable_mail_settle',
        'reliable_mail_undeclared_lanes',
      ].sort(),
    );
    const explain = async (statement: Recorded) => {
      const args = statement.values.length > 0 ? `(${statement.values.map(literal).join(', ')})` : '';
      const { rows } = await client.query(`explain (costs off) execute ${statement.name}${args}`);
      return rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
    };
    // Planned (and kept) while every table is empty and analysed.
    for (const statement of statements) {
      await client.query(`prepare ${statement.name} as ${statement.text}`);
      await explain(statement);
    }
    await client.query(
      `insert into mail_outbox (id, message_id, status, lane, payload, max_attempts, provider_message_id,
                                provider_message_ids, sent_at, updated_at)
       select gen_random_uuid(), g || '@plan.test', case when g % 100 = 0 then 'pending' else 'sent' end, 'default',
              jsonb_build_object('to', '[]'::jsonb, 'cc', '[]'::jsonb, 'bcc', '[]'::jsonb, 'text', repeat('x', 200)),
              5, 'p' || g, array['p' || g], now(), now() - interval '2 days'
       from generate_series(1, 20000) g;
       insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, outcome)
       select gen_random_uuid(), id, 1, 'w', gen_random_uuid(), 'sent' from mail_outbox;
       insert into mail_outbox_event (outbox_id, name, payload, locked_until)
       select id, 'reliable-mail.email.sent', '{}', now() + interval '1 hour' from mail_outbox;
       insert into mail_outbox_feedback (id, outbox_id, source, recipient, kind, provider_event_id, reported_at,
                                         received_at, payload)
       select gen_random_uuid(), case when random() < 0.5 then id end, 'postmark', 'ann@example.com', 'delivered',
              'e' || message_id, now(), now() - interval '2 days', '{}' from mail_outbox;
       insert into mail_suppression (address, reason, source)
       select 'bounced' || g || '@example.com', 'hard bounce', 'bounce' from generate_series(1, 5000) g;
       insert into mail_unsubscribe (address, category)
       select 'reader' || g || '@example.com', 'newsletter' from generate_series(1, 5000) g;
       insert into mail_relay_destination (name, events) values ('nats', '{reliable-mail.email.sent}'),
                                                                 ('rabbitmq', '{reliable-mail.email.sent}');
       insert into mail_relay (destination, event_id, outbox_id, name, payload, locked_until)
       select d, e.id, e.outbox_id, e.name, e.payload, now() + interval '1 hour'
       from mail_outbox_event e, unnest(array['nats', 'rabbitmq']) d`,
    );
    const plans: Record<string, string> = {};
    const offenders: Record<string, string[]> = {};
    for (const statement of statements) {
      plans[statement.name] = await explain(statement);
      const scans = wholeScans(plans[statement.name]);
      if (scans.length > 0) offenders[statement.name] = scans;
    }
    expect(offenders).toEqual({});
    for (const [name, keysetScan] of Object.entries(KEYSET_PAGES)) {
      expect([name, plans[name]]).toEqual([name, expect.stringMatching(keysetScan)]);
    }
  }, 60_000);
});
