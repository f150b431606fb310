import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { sqlStateOf } from '../../libs/reliable-mail/src/database/statement-refusal.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import { readSchemaState } from '../../libs/reliable-mail/src/schema/schema-state.js';
import { KNOWN_SCHEMA_VERSION, versionStatements } from '../../libs/reliable-mail/src/schema/schema-steps.js';
import {
  conversionSwitch,
  convertToPartitions,
  isPartitioned,
} from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { ddlConnection } from './partition-rows.js';

// The conversion's steps that lock a table whole (the checks added NOT VALID, the switch) wait for the lock behind any
// long transaction on it, and every enqueue queues behind that wait: each waits 5 s at most, is tried again, and the
// conversion fails after 6 tries, leaving the outbox plain and without its checks. The switch takes its locks at
// once, the outbox's first, and leaves out `including compression` on a server that lacks it (PostgreSQL 13). A
// converted outbox serves code from version 13 only: older code's enqueue fails on it.

const TABLES = tablesIn(DEFAULT_SCHEMA);

describe('the switch of a conversion', () => {
  it('takes every lock at once, the outbox first', () => {
    expect(conversionSwitch(TABLES, '2026-12-05', 170000)[0]).toBe(
      'lock table reliable_mail.mail_outbox, reliable_mail.mail_outbox_attempt, reliable_mail.mail_outbox_feedback, ' +
        'reliable_mail.mail_outbox_event in access exclusive mode',
    );
  });

  it.each([
    { serverVersion: 130011, compression: false },
    { serverVersion: 140000, compression: true },
    { serverVersion: 170002, compression: true },
  ])('copies the columns compression on server $serverVersion: $compression', ({ serverVersion, compression }) => {
    const statements = conversionSwitch(TABLES, '2026-12-05', serverVersion).join('\n');
    expect(statements.includes('including compression')).toBe(compression);
    expect(statements).toContain('including storage');
  });
});

describe('a conversion behind a long transaction', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
  });

  afterAll(() => database?.drop());

  it('gives up after its tries, and leaves the outbox plain without its checks', async () => {
    // A transaction holding the attempts' table: the outbox's check is added, the attempts' waits for the lock.
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    const { connection, end } = await ddlConnection(database.url);
    try {
      await holder.query('begin');
      await holder.query('lock table mail_outbox_attempt in access share mode');
      const failure = await convertToPartitions(connection, TABLES, 3).catch((error: unknown) => error);
      expect(sqlStateOf(failure)).toBe('55P03');
      await holder.query('commit');
      expect(await isPartitioned(connection, TABLES)).toBe(false);
      const checks = await connection.run<{ name: string }>(
        `select conname as name from pg_constraint where conname like '%_before_partitions'`,
      );
      expect(checks).toEqual([]);
    } finally {
      await holder.end();
      await end();
    }
  }, 60_000);

  it('converts once the transaction ends, and then refuses the start of code older than version 13', async () => {
    const { connection, end } = await ddlConnection(database.url);
    try {
      expect((await readSchemaState(connection, undefined)).servesCodeFrom).toBe(1);
      expect(await convertToPartitions(connection, TABLES, 3)).toMatchObject({ converted: true });
      // What the start check of every release compares with the newest version it knows (12 before this layout):
      // serving code from 13 on, the schema is refused by code of version 12, whose enqueue would fail (42P10).
      const state = await readSchemaState(connection, undefined);
      expect({ version: state.version, servesCodeFrom: state.servesCodeFrom }).toEqual({
        version: KNOWN_SCHEMA_VERSION,
        servesCodeFrom: 13,
      });
      // A later version that serves code from 1 on a plain outbox does not let older code back in on this one.
      const [record] = versionStatements(TABLES, {
        version: KNOWN_SCHEMA_VERSION + 1,
        name: 'next',
        servesCodeFrom: 1,
        statements: () => [],
      });
      await connection.run(record);
      expect((await readSchemaState(connection, undefined)).servesCodeFrom).toBe(13);
    } finally {
      await end();
    }
  });
});
