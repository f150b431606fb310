import { afterAll, afterEach, beforeAll } from '@jest/globals';
import type { ReliableMailOptions } from '@reliable-mail/nestjs';
import { OutboxDatabase } from '../../libs/reliable-mail/src/database/outbox-database.js';
import { Statement } from '../../libs/reliable-mail/src/database/sql-client.js';
import { createTestApp, testMailOptions } from '../support/test-app.js';
import { SmtpTestServer } from '../support/smtp-test-server.js';
import { createTestDatabase, type TestDatabase, withClient } from '../support/test-database.js';
import { PgBouncer } from './pgbouncer.js';

type TestApp = Awaited<ReturnType<typeof createTestApp>>;

export interface PgBouncerBed {
  /** The test's database on the shared server, reached directly. */
  readonly database: TestDatabase;
  /** The same database through the test's PgBouncer. */
  readonly throughBouncer: string;
  readonly smtp: SmtpTestServer;
  /**
   * An app whose MikroORM and reliable-mail both connect through PgBouncer, with `database.pooler` its pool mode;
   * the schema migrated at its start.
   */
  startApp(overrides?: Partial<ReliableMailOptions>): Promise<TestApp>;
  /** Closes the apps the test has started (after each test, the bed does). */
  closeApps(): Promise<void>;
}

/**
 * The hooks of a test file behind a PgBouncer of its own in `poolMode` with `poolSize` server connections: a
 * database of its own (not migrated: the apps migrate it as they start), an SMTP server, and after each test its apps
 * closed and its rows and messages removed.
 */
export function usePgBouncerBed({
  poolMode,
  poolSize,
}: {
  poolMode: 'session' | 'transaction';
  poolSize: number;
}): PgBouncerBed {
  let database: TestDatabase | undefined;
  let bouncer: PgBouncer | undefined;
  let smtp: SmtpTestServer | undefined;
  const apps: TestApp[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    bouncer = await PgBouncer.start({ poolMode, server: database.url, poolSize });
    smtp = new SmtpTestServer();
    await smtp.listen();
  });

  afterEach(async () => {
    await bed.closeApps();
    smtp!.received.length = 0;
    await withClient(database!.url, (client) => client.query('truncate mail_outbox, mail_suppression cascade'));
  });

  afterAll(async () => {
    await smtp?.close();
    await bouncer?.stop();
    await database?.drop();
  });

  const bed: PgBouncerBed = {
    get database() {
      return database!;
    },
    get throughBouncer() {
      return bouncer!.urlOf(database!.url);
    },
    get smtp() {
      return smtp!;
    },
    async startApp(overrides = {}) {
      const options = testMailOptions(smtp!.url, overrides);
      const app = await createTestApp(bed.throughBouncer, {
        ...options,
        database: {
          // Enough for a start through PgBouncer; the code before database.pooler waited 60 s on each refusal.
          startTimeoutMs: 10_000,
          ...options.database,
          url: bed.throughBouncer,
          pooler: poolMode,
          migrateAtStart: true,
        },
      });
      apps.push(app);
      return app;
    },
    async closeApps() {
      await Promise.all(apps.splice(0).map((app) => app.close()));
    },
  };
  return bed;
}

const CURRENT_SETTINGS = new Statement(() => ({
  text: `select current_setting('statement_timeout') as statement_timeout,
           current_setting('enable_seqscan') as enable_seqscan,
           current_setting('plan_cache_mode') as plan_cache_mode,
           current_setting('synchronous_commit') as synchronous_commit,
           current_setting('jit') as jit`,
}));
/** A second longer than the tests' `database.statementTimeoutMs` (4 s). */
const PAST_STATEMENT_TIMEOUT = new Statement(() => ({ text: 'select pg_sleep(5)' }));

/** What the settings of reliable-mail's own connections are, with the tests' statement timeout. */
export const OWN_SETTINGS = {
  statement_timeout: '4s',
  enable_seqscan: 'off',
  plan_cache_mode: 'force_generic_plan',
  synchronous_commit: 'on',
  jit: 'off',
};

/**
 * The settings a statement of `app`'s own connections runs under, and the SQLSTATE a statement past its timeout
 * fails with: 57014 when the server cancelled it, rather than the client giving up on it 5 s later.
 */
export async function ownStatements(app: TestApp): Promise<{ settings: unknown; pastTimeout: unknown }> {
  const database = app.get(OutboxDatabase);
  const [settings] = await database.query(CURRENT_SETTINGS, []);
  const pastTimeout = await database.query(PAST_STATEMENT_TIMEOUT, []).then(
    () => 'answered',
    (error: unknown) => (error as { code?: unknown }).code ?? String(error),
  );
  return { settings, pastTimeout };
}
