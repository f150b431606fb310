import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { defineConfig } from '@mikro-orm/postgresql';
import type { DynamicModule, INestApplication } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { Test } from '@nestjs/testing';
import {
  MailOutboxService,
  ReliableMailModule,
  type ReliableMailOptions,
  ReliableMailSetupError,
  ReliableMailWebhooksModule,
} from '@reliable-mail/nestjs';
import { reliableMailEntities } from '@reliable-mail/nestjs/mikro-orm';
import { migrateSchema, migrationConnection } from '../libs/reliable-mail/src/schema/migrate-schema.js';
import { KNOWN_SCHEMA_VERSION, NEEDED_SCHEMA_VERSION } from '../libs/reliable-mail/src/schema/schema-steps.js';
import { PrivatePostgres } from './support/private-postgres.js';
import { LAST_RELEASED_VERSION, madeByEarlierReleases } from './support/schema-catalog.js';
import { testLogger, testMailOptions } from './support/test-app.js';
import { createTestDatabase, type TestDatabase, withClient } from './support/test-database.js';

// A wrong setup fails app.init() with the fix in the message, before anything is enqueued or sent.

const apps: INestApplication[] = [];

/** An app with exactly these modules: the tests leave out, one at a time, what reliable-mail needs. */
async function appWith(imports: Array<DynamicModule | Promise<DynamicModule>>): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports }).compile();
  const app = moduleRef.createNestApplication({ logger: testLogger });
  apps.push(app);
  await app.init();
  return app;
}

const mailOptions = (url: string | undefined, overrides: Partial<ReliableMailOptions> = {}): ReliableMailOptions =>
  testMailOptions('smtp://127.0.0.1:1', {
    ...overrides,
    dispatcher: { enabled: false },
    database: { url, ...overrides.database },
  });

const reliableMail = (url: string | undefined, overrides: Partial<ReliableMailOptions> = {}) =>
  ReliableMailModule.forRoot({ ...mailOptions(url, overrides), isGlobal: true });

/** A fresh database with reliable-mail's schema at `version` (0: none), recorded as migrate records it. */
async function databaseAt(version: number): Promise<TestDatabase> {
  const database = await createTestDatabase();
  databases.push(database);
  if (version > 0) {
    await withClient(database.url, async (client) => {
      await migrateSchema(migrationConnection(client));
      await client.query('delete from reliable_mail.mail_migrations where version > $1', [version]);
    });
  }
  return database;
}

const databases: TestDatabase[] = [];

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close().catch(() => undefined)));
  testLogger.warnings.splice(0);
});

afterAll(async () => {
  await Promise.all(databases.map((database) => database.drop()));
});

describe('the start refuses, naming the fix', () => {
  it('a database without reliable-mail’s schema', async () => {
    const database = await databaseAt(0);
    const start = appWith([EventEmitterModule.forRoot(), reliableMail(database.url)]);
    await expect(start).rejects.toThrow(ReliableMailSetupError);
    await expect(start).rejects.toThrow(
      /not in the database \(schema "reliable_mail"\): run `npx reliable-mail migrate`/,
    );
  });

  it('a schema older than the code needs', async () => {
    const database = await databaseAt(NEEDED_SCHEMA_VERSION - 2);
    await expect(appWith([EventEmitterModule.forRoot(), reliableMail(database.url)])).rejects.toThrow(
      `is at version ${NEEDED_SCHEMA_VERSION - 2}, and this code needs version ${NEEDED_SCHEMA_VERSION}: run \`npx reliable-mail migrate\``,
    );
  });

  it('an app without EventEmitterModule', async () => {
    const database = await databaseAt(KNOWN_SCHEMA_VERSION);
    await expect(appWith([reliableMail(database.url)])).rejects.toThrow(
      /ReliableMailModule needs EventEmitterModule\.forRoot\(\) \(from @nestjs\/event-emitter\)/,
    );
  });

  it('an app without MikroORM and without database.url', async () => {
    await expect(appWith([EventEmitterModule.forRoot(), reliableMail(undefined)])).rejects.toThrow(
      /needs database\.url \(a postgres:\/\/ URL\) in an app without MikroORM/,
    );
  });

  it('the webhooks module where ReliableMailModule is not global', async () => {
    const database = await databaseAt(KNOWN_SCHEMA_VERSION);
    const start = appWith([
      EventEmitterModule.forRoot(),
      ReliableMailModule.forRoot(mailOptions(database.url)),
      ReliableMailWebhooksModule.forRoot({ sources: { postmark: { basicAuth: { username: 'u', password: 'p' } } } }),
    ]);
    await expect(start).rejects.toThrow(/register ReliableMailModule\.forRoot\(\{ isGlobal: true, … \}\)/);
  });

  it('a database nothing answers for, after database.startTimeoutMs, naming its host, with one line logged', async () => {
    const started = performance.now();
    const start = appWith([
      EventEmitterModule.forRoot(),
      reliableMail('postgres://postgres@127.0.0.1:1/none', { database: { startTimeoutMs: 1_500 } }),
    ]);
    await expect(start).rejects.toThrow(
      /could not connect to the database at 127\.0\.0\.1:1 within database\.startTimeoutMs \(1500 ms\): .*ECONNREFUSED/,
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_500);
    expect(testLogger.warnings).toEqual([
      expect.objectContaining({ msg: expect.stringMatching(/does not answer yet/) }),
    ]);
  });
});

describe('MikroORM’s schema diff', () => {
  const mikroOrm = (url: string, config: Record<string, unknown>) =>
    MikroOrmModule.forRoot(
      defineConfig({ clientUrl: url, entities: [], discovery: { warnWhenNoEntities: false }, ...config }),
    );

  it('an app whose MikroORM would drop reliable-mail’s schema is refused, one told to leave it alone starts', async () => {
    const database = await databaseAt(KNOWN_SCHEMA_VERSION);
    await expect(
      appWith([mikroOrm(database.url, {}), EventEmitterModule.forRoot(), reliableMail(undefined)]),
    ).rejects.toThrow(/add schemaGenerator: \{ ignoreSchema: \['reliable_mail'\] \} to the MikroORM config/);
    await expect(
      appWith([
        mikroOrm(database.url, { schemaGenerator: { ignoreSchema: ['reliable_mail'] } }),
        EventEmitterModule.forRoot(),
        reliableMail(undefined),
      ]),
    ).resolves.toBeDefined();
  });

  it('the earlier releases’ entities, registered where the tables are in their own schema, are refused', async () => {
    const database = await databaseAt(KNOWN_SCHEMA_VERSION);
    await expect(
      appWith([
        mikroOrm(database.url, {
          entities: reliableMailEntities,
          schemaGenerator: { ignoreSchema: ['reliable_mail'] },
        }),
        EventEmitterModule.forRoot(),
        reliableMail(undefined),
      ]),
    ).rejects.toThrow(/MikroORM's schema diff would create copies of them; remove reliableMailEntities/);
  });

  it('tables the earlier releases made in the app’s schema need their entities registered', async () => {
    const database = await databaseAt(0);
    await withClient(database.url, async (client) => {
      await client.query('set search_path to public');
      await madeByEarlierReleases(client, 'public', LAST_RELEASED_VERSION);
    });
    // Brought to this release's version where they are, so that what is checked is the entities.
    const migrated = { database: { migrateAtStart: true } };
    await expect(
      appWith([mikroOrm(database.url, {}), EventEmitterModule.forRoot(), reliableMail(undefined, migrated)]),
    ).rejects.toThrow(
      /where MikroORM's schema diff \(schema:update, migration:create\) would drop them: add reliableMailEntities/,
    );
    const app = await appWith([
      mikroOrm(database.url, { entities: reliableMailEntities }),
      EventEmitterModule.forRoot(),
      reliableMail(undefined, migrated),
    ]);
    await expect(
      app.get(MailOutboxService).enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' }),
    ).resolves.toMatchObject({ status: 'pending' });
  });
});

describe('the start on a database that comes up late (a private cluster, stopped)', () => {
  let cluster: PrivatePostgres;

  beforeAll(async () => {
    cluster = await PrivatePostgres.start();
    await withClient(cluster.url, (client) => migrateSchema(migrationConnection(client)));
    await cluster.stop();
  }, 60_000);

  afterAll(async () => {
    await cluster?.destroy();
  });

  it('waits for it within database.startTimeoutMs, with one warning for the whole wait', async () => {
    const start = appWith([
      EventEmitterModule.forRoot(),
      reliableMail(cluster.url, { database: { startTimeoutMs: 30_000 } }),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await cluster.start();
    const app = await start;
    await expect(
      app.get(MailOutboxService).enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' }),
    ).resolves.toMatchObject({ status: 'pending' });
    expect(testLogger.warnings).toEqual([
      expect.objectContaining({ msg: expect.stringMatching(/does not answer yet/) }),
    ]);
  }, 60_000);
});

describe('database.migrateAtStart', () => {
  it('brings an empty database to the schema, with many instances starting at once', async () => {
    const database = await databaseAt(0);
    const started = await Promise.all(
      Array.from({ length: 3 }, () =>
        appWith([EventEmitterModule.forRoot(), reliableMail(database.url, { database: { migrateAtStart: true } })]),
      ),
    );
    expect(started).toHaveLength(3);
    const { rows } = await withClient(database.url, (client) =>
      client.query('select count(*)::int as count from reliable_mail.mail_migrations'),
    );
    expect(rows[0].count).toBe(KNOWN_SCHEMA_VERSION);
  });
});
