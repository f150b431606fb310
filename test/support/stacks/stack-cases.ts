import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DynamicModule, Type } from '@nestjs/common';
import {
  type BatchMail,
  type EnqueueResult,
  MailOutboxService,
  type ReliableMailOptions,
  TransactionRequiredError,
} from '@reliable-mail/nestjs';
import pg from 'pg';
import { SmtpTestServer } from '../smtp-test-server.js';
import { createTestApp, migrate, testMailOptions, waitFor } from '../test-app.js';
import { createTestDatabase, type TestDatabase } from '../test-database.js';

export type TestApp = Awaited<ReturnType<typeof createTestApp>>;

/** What an enqueue is given to join a transaction: `{ tx }`, or nothing where the transaction is found ambiently. */
export interface EnqueueTarget {
  tx?: unknown;
}

/** One of the stack's transactions, as a case uses it. */
export interface StackTransaction {
  readonly target: EnqueueTarget;
  /** Runs one of the app's own statements (business rows) in the transaction. */
  execute(sql: string): Promise<unknown>;
}

export type TransactionWork<T> = (tx: StackTransaction) => Promise<T>;

/** The stack's clients, opened on one app. */
export interface StackSession {
  /**
   * Runs `work` in a transaction of the given style: it commits when `work` returns, rolls back when it throws, and
   * the promise rejects when the COMMIT fails.
   */
  transaction<T>(style: string, work: TransactionWork<T>): Promise<T>;
  /** Runs `work` with what the stack gives where it is in no transaction, in the given way. */
  outside<T>(way: string, work: (target: EnqueueTarget) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** A stack (ORM, query builder or driver) the outbox writes through, as the shared cases drive it. */
export interface StackDriver {
  readonly stack: string;
  /** The ways the stack runs a transaction: every case runs in each. */
  readonly styles: readonly string[];
  /** The ways the stack can be in no transaction: none, or a root client passed as `tx`. */
  readonly outsideWays: readonly string[];
  /** Whether the app has MikroORM's module (which gives reliable-mail its database); else `database.url` is given. */
  readonly mikroOrm?: boolean;
  readonly providers?: Type[];
  /** Once per file, before any app starts (generating the Prisma client). */
  prepare?(): Promise<void>;
  dispose?(): Promise<void>;
  /** The stack's Nest modules, for each app of the file. */
  imports?(databaseUrl: string): DynamicModule[];
  open(app: TestApp, databaseUrl: string): Promise<StackSession>;
  /** Cases of this stack only, declared inside the file's describe with the apps running. */
  extraCases?(fixture: () => StackFixture): void;
}

/** What the cases share: the database, the SMTP server, the running app and the stack opened on it. */
export interface StackFixture {
  database: TestDatabase;
  /** A pool of the test's own, for assertions. */
  db: pg.Pool;
  smtp: SmtpTestServer;
  app: TestApp;
  outbox: MailOutboxService;
  session: StackSession;
}

const ORDERS_TABLE = `create table public.orders (
  id serial primary key,
  customer text not null,
  ref text,
  -- Checked at COMMIT only: a transaction that breaks it fails at its COMMIT, after every statement succeeded.
  constraint orders_ref_key unique (ref) deferrable initially deferred
)`;

let caseNumber = 0;

/** A name of its own for one case: its outbox rows carry it as metadata, its orders as customer. */
function newCase(label: string) {
  const tag = `${label}-${++caseNumber}`.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
  return {
    tag,
    metadata: { case: tag },
    mail: (n = 0) => ({ to: `${tag}-${n}@example.com`, subject: `Order ${n} of ${tag}`, text: 'Thanks' }),
    order: (ref = `${tag}-${Math.random()}`) => `insert into orders (customer, ref) values ('${tag}', '${ref}')`,
  };
}

/**
 * Declares the cases every stack must pass, against a database of the file's own and a real SMTP server: what
 * commits is sent once, what rolls back (a throw, a COMMIT failing on a deferred constraint) is neither kept nor
 * sent, the idempotency race, batches, and `requireTransaction`.
 */
export function describeStack(driver: StackDriver): void {
  describe(`reliable-mail on ${driver.stack}`, () => {
    const shared = {} as Omit<StackFixture, 'app' | 'outbox' | 'session'>;

    beforeAll(async () => {
      await driver.prepare?.();
      shared.database = await createTestDatabase();
      await migrate(shared.database.url);
      shared.db = quietPool(shared.database.url, 2);
      await shared.db.query(ORDERS_TABLE);
      shared.smtp = new SmtpTestServer();
      await shared.smtp.listen();
    });

    afterAll(async () => {
      await shared.smtp?.close();
      await shared.db?.end();
      await shared.database?.drop();
      await driver.dispose?.();
    });

    /** Starts an app with reliable-mail and the stack for the cases of one describe, and stops it after them. */
    function withApp(overrides: Partial<ReliableMailOptions>): () => StackFixture {
      const fixture = {} as StackFixture;
      beforeAll(async () => {
        Object.assign(fixture, shared);
        const { url } = shared.database;
        const options = testMailOptions(shared.smtp.url, {
          ...overrides,
          ...(driver.mikroOrm ? {} : { database: { url } }),
        });
        fixture.app = await createTestApp(url, options, driver.providers ?? [], {
          mikroOrm: driver.mikroOrm ?? false,
          imports: driver.imports?.(url) ?? [],
        });
        fixture.outbox = fixture.app.get(MailOutboxService);
        fixture.session = await driver.open(fixture.app, url);
      });
      afterAll(async () => {
        await fixture.session?.close();
        await fixture.app?.close();
      });
      return () => fixture;
    }

    describe('with the default options', () => {
      const fixture = withApp({});
      for (const style of driver.styles) describeCommitAndRollback(style, fixture);
      for (const way of driver.outsideWays) {
        it(`${way}: in no transaction, the row commits on reliable-mail's own connection and is sent`, async () => {
          const { outbox, session } = fixture();
          const { metadata, mail, tag } = newCase(way);
          const result = await session.outside(way, (target) => outbox.enqueue(mail(), { ...target, metadata }));
          expect(result.created).toBe(true);
          expect(await outboxRows(fixture(), tag)).toEqual([result.id]);
          await waitForMails(fixture(), [result]);
        });
      }
      driver.extraCases?.(fixture);
    });

    describe('with requireTransaction: true', () => {
      const fixture = withApp({ requireTransaction: true });
      for (const way of driver.outsideWays) {
        it(`${way}: enqueue and enqueueMany throw TransactionRequiredError and write nothing`, async () => {
          const { outbox, session } = fixture();
          const { metadata, mail, tag } = newCase(way);
          await session.outside(way, async (target) => {
            await expect(outbox.enqueue(mail(), { ...target, metadata })).rejects.toBeInstanceOf(
              TransactionRequiredError,
            );
            await expect(
              outbox.enqueueMany([{ mail: mail(1) }, { mail: mail(2) }], { ...target, metadata }),
            ).rejects.toBeInstanceOf(TransactionRequiredError);
          });
          expect(await outboxRows(fixture(), tag)).toEqual([]);
        });
      }
      for (const style of driver.styles) {
        it(`in ${style}: the enqueue succeeds, commits with the transaction and is sent`, async () => {
          const { outbox, session } = fixture();
          const { metadata, mail, tag, order } = newCase(style);
          const result = await session.transaction(style, async (tx) => {
            await tx.execute(order());
            return outbox.enqueue(mail(), { ...tx.target, metadata });
          });
          expect(await outboxRows(fixture(), tag)).toEqual([result.id]);
          await waitForMails(fixture(), [result]);
        });
      }
    });
  });
}

function describeCommitAndRollback(style: string, fixture: () => StackFixture): void {
  describe(`in ${style}`, () => {
    it('commit: the business row and one outbox row are kept, and the mail is sent once', async () => {
      const { app, outbox, session, smtp } = fixture();
      const { metadata, mail, tag, order } = newCase(style);
      const result = await session.transaction(style, async (tx) => {
        await tx.execute(order());
        return outbox.enqueue(mail(), { ...tx.target, metadata });
      });
      expect(result).toMatchObject({ status: 'pending', created: true, messageId: `<${result.id}@test.example.com>` });
      expect(await outboxRows(fixture(), tag)).toEqual([result.id]);
      expect(await orders(fixture(), tag)).toBe(1);
      await waitForMails(fixture(), [result]);
      const [received] = smtp.received.filter((message) => message.messageId === result.messageId);
      expect(received.recipients).toEqual([`${tag}-0@example.com`]);
      // The send is settled: the row is marked sent and EmailSentEvent is emitted, once.
      await waitFor('the row settled as sent', async () => (await statusOf(fixture(), result.id)) === 'sent', 5_000);
      await waitFor('EmailSentEvent', () => app.events.sent.some((event) => event.id === result.id), 5_000);
      expect(app.events.sent.filter((event) => event.id === result.id)).toHaveLength(1);
    });

    it('rollback by a throw after the enqueue: no outbox row, and no mail', async () => {
      const { outbox, session } = fixture();
      const { metadata, mail, tag, order } = newCase(style);
      const start = mark(fixture());
      let enqueued: EnqueueResult | undefined;
      await expect(
        session.transaction(style, async (tx) => {
          await tx.execute(order());
          enqueued = await outbox.enqueue(mail(), { ...tx.target, metadata });
          throw new Error('payment declined');
        }),
      ).rejects.toThrow('payment declined');
      expect(enqueued?.created).toBe(true);
      expect(await outboxRows(fixture(), tag)).toEqual([]);
      expect(await orders(fixture(), tag)).toBe(0);
      await expectNothingSentSince(fixture(), style, start);
    });

    it('rollback by a COMMIT that fails on a deferred constraint: no outbox row, and no mail', async () => {
      const { outbox, session } = fixture();
      const { metadata, mail, tag, order } = newCase(style);
      const start = mark(fixture());
      let enqueued: EnqueueResult | undefined;
      const committed = session.transaction(style, async (tx) => {
        // Two orders of one ref: unique, but checked only at COMMIT.
        await tx.execute(order(tag));
        await tx.execute(order(tag));
        enqueued = await outbox.enqueue(mail(), { ...tx.target, metadata });
      });
      const error = await committed.then(
        () => new Error('the transaction committed'),
        (thrown: unknown) => thrown,
      );
      expect(errorChain(error)).toMatch(/orders_ref_key/);
      // Every statement succeeded: the transaction failed at its COMMIT.
      expect(enqueued?.created).toBe(true);
      expect(await outboxRows(fixture(), tag)).toEqual([]);
      expect(await orders(fixture(), tag)).toBe(0);
      await expectNothingSentSince(fixture(), style, start);
    });

    it('the idempotency race: 20 concurrent transactions of one key make one row, whose id all 20 get', async () => {
      const { outbox, session } = fixture();
      const { metadata, mail, tag, order } = newCase(style);
      const idempotencyKey = `order-confirmation-${tag}`;
      const results = await Promise.all(
        Array.from({ length: 20 }, () =>
          session.transaction(style, async (tx) => {
            await tx.execute(order());
            return outbox.enqueue(mail(), { ...tx.target, metadata, idempotencyKey });
          }),
        ),
      );
      const rows = await outboxRows(fixture(), tag);
      expect(rows).toHaveLength(1);
      expect(results.map((result) => result.id)).toEqual(Array.from({ length: 20 }, () => rows[0]));
      expect(results.filter((result) => result.created)).toHaveLength(1);
      expect(await orders(fixture(), tag)).toBe(20);
      await waitForMails(fixture(), [results[0]]);
    });

    it('enqueueMany of 3 mails commits all 3 with the transaction', async () => {
      const { outbox, session } = fixture();
      const { metadata, mail, tag, order } = newCase(style);
      const batch: BatchMail[] = [{ mail: mail(1) }, { mail: mail(2) }, { mail: mail(3) }];
      const results = await session.transaction(style, async (tx) => {
        await tx.execute(order());
        return outbox.enqueueMany(batch, { ...tx.target, metadata });
      });
      expect(results).toHaveLength(3);
      expect(results.every((result) => result.created)).toBe(true);
      expect((await outboxRows(fixture(), tag)).sort()).toEqual(results.map((result) => result.id).sort());
      await waitForMails(fixture(), results);
    });

    it('enqueueMany of 3 mails rolls back all 3 with the transaction', async () => {
      const { outbox, session } = fixture();
      const { metadata, mail, tag, order } = newCase(style);
      const start = mark(fixture());
      await expect(
        session.transaction(style, async (tx) => {
          await tx.execute(order());
          const results = await outbox.enqueueMany([{ mail: mail(1) }, { mail: mail(2) }, { mail: mail(3) }], {
            ...tx.target,
            metadata,
          });
          expect(results).toHaveLength(3);
          throw new Error('out of stock');
        }),
      ).rejects.toThrow('out of stock');
      expect(await outboxRows(fixture(), tag)).toEqual([]);
      await expectNothingSentSince(fixture(), style, start);
    });
  });
}

/**
 * A pool whose idle connections may be cut without an unhandled 'error' event: pool.end() resolves before its
 * connections have closed, and the database's drop (with force) then terminates them.
 */
export function quietPool(connectionString: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  pool.on('error', () => undefined);
  return pool;
}

/**
 * What an error and its causes say: clients wrap the driver's error (Drizzle's DrizzleQueryError has it as `cause`,
 * Prisma's DriverAdapterError as a `cause` object with `originalMessage`).
 */
function errorChain(error: unknown): string {
  return inspect(error, { depth: 6 });
}

/** The ids of the outbox rows a case wrote, as committed. */
export async function outboxRows({ db }: StackFixture, tag: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `select id from reliable_mail.mail_outbox where metadata->>'case' = $1 order by id`,
    [tag],
  );
  return rows.map((row) => row.id);
}

async function statusOf({ db }: StackFixture, id: string): Promise<string | undefined> {
  const { rows } = await db.query<{ status: string }>(`select status from reliable_mail.mail_outbox where id = $1`, [
    id,
  ]);
  return rows[0]?.status;
}

async function orders({ db }: StackFixture, tag: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(`select count(*)::int as count from orders where customer = $1`, [
    tag,
  ]);
  return rows[0].count;
}

/** Waits until each mail arrived, then checks it arrived once. */
export async function waitForMails({ smtp }: StackFixture, results: readonly EnqueueResult[]): Promise<void> {
  const ids = results.map((result) => result.messageId);
  await waitFor(`${ids.length} mail(s) at the SMTP server`, () =>
    ids.every((id) => smtp.received.some((message) => message.messageId === id)),
  );
  const copies = smtp.copiesByMessageId();
  for (const id of ids) expect(copies.get(id)).toBe(1);
}

function mark({ smtp }: StackFixture): number {
  return smtp.received.length;
}

/**
 * Proves that nothing of a rolled-back transaction is sent, without sleeping: a second mail is committed after it,
 * and once that one arrived it must be the only mail since `start`.
 */
async function expectNothingSentSince(fixture: StackFixture, style: string, start: number): Promise<void> {
  const { outbox, session, smtp } = fixture;
  const { metadata, mail, order } = newCase(`${style} after the rollback`);
  const after = await session.transaction(style, async (tx) => {
    await tx.execute(order());
    return outbox.enqueue(mail(), { ...tx.target, metadata });
  });
  await waitForMails(fixture, [after]);
  expect(smtp.received.slice(start).map((message) => message.messageId)).toEqual([after.messageId]);
}
