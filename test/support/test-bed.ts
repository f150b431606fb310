import { afterAll, afterEach, beforeAll } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import type { Type } from '@nestjs/common';
import {
  MailOutboxAdmin,
  MailOutboxHealthIndicator,
  MailOutboxService,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from './test-database.js';
import { createTestApp, migrate, type TestAppOptions, testMailOptions } from './test-app.js';
import { type SmtpScript, SmtpTestServer } from './smtp-test-server.js';

export type TestApp = Awaited<ReturnType<typeof createTestApp>>;

export interface TestBed {
  readonly databaseUrl: string;
  /** The SMTP server of the running test (after `startSmtp` or `start`). */
  readonly smtp: SmtpTestServer;
  /** Its URL, or a port nothing listens on when the test started none. */
  readonly smtpUrl: string;
  startSmtp(script?: SmtpScript): Promise<SmtpTestServer>;
  /** Runs a statement on the test's database, outside any app: to set a row up as a test needs it. */
  execute(sql: string, values?: unknown[]): Promise<unknown[]>;
  startApp(options: ReliableMailOptions, providers?: Type[], appOptions?: TestAppOptions): Promise<TestApp>;
  /** An SMTP server answering by `script`, and an app sending to it with the test options and `overrides`. */
  start(
    script?: SmtpScript,
    overrides?: Partial<ReliableMailOptions>,
  ): Promise<{
    app: TestApp;
    outbox: MailOutboxService;
    admin: MailOutboxAdmin;
    health: MailOutboxHealthIndicator;
    em: EntityManager;
  }>;
}

/**
 * The hooks of an end-to-end test file: a migrated database of its own, and after each test its apps and SMTP
 * server closed and its rows removed.
 */
export function useTestBed(): TestBed {
  let database: TestDatabase | undefined;
  let smtp: SmtpTestServer | undefined;
  const apps: TestApp[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
  });

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await smtp?.close();
    smtp = undefined;
    const client = new pg.Client({ connectionString: database!.url });
    await client.connect();
    await client.query('truncate mail_outbox, mail_suppression cascade');
    await client.end();
  });

  afterAll(async () => {
    await database?.drop();
  });

  const bed: TestBed = {
    get databaseUrl() {
      return database!.url;
    },
    get smtp() {
      if (!smtp) throw new Error('no SMTP server started in this test');
      return smtp;
    },
    get smtpUrl() {
      return smtp?.url ?? 'smtp://127.0.0.1:1';
    },
    async execute(sql, values = []) {
      const client = new pg.Client({ connectionString: database!.url });
      await client.connect();
      try {
        return (await client.query(sql, values)).rows;
      } finally {
        await client.end();
      }
    },
    async startSmtp(script = {}) {
      smtp = new SmtpTestServer();
      smtp.script = script;
      await smtp.listen();
      return smtp;
    },
    async startApp(options, providers = [], appOptions = {}) {
      const app = await createTestApp(database!.url, options, providers, appOptions);
      apps.push(app);
      return app;
    },
    async start(script = {}, overrides = {}) {
      const server = await bed.startSmtp(script);
      const app = await bed.startApp(testMailOptions(server.url, overrides));
      return {
        app,
        outbox: app.get(MailOutboxService),
        admin: app.get(MailOutboxAdmin),
        health: app.get(MailOutboxHealthIndicator),
        em: app.get(EntityManager),
      };
    },
  };
  return bed;
}
