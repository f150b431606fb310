import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { defineConfig, MikroORM, type Options } from '@mikro-orm/postgresql';
import type { ModuleRef } from '@nestjs/core';
import {
  MailOutbox,
  MailOutboxAttempt,
  MailOutboxEvent,
  MailOutboxFeedback,
  MailSuppression,
  reliableMailEntities,
} from '@reliable-mail/nestjs/mikro-orm';
import pg from 'pg';
import { AppOrm } from '../libs/reliable-mail/src/mikro-orm/app-orm.js';
import { migrateSchema, migrationConnection } from '../libs/reliable-mail/src/schema/migrate-schema.js';
import { tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import { KNOWN_SCHEMA_VERSION } from '../libs/reliable-mail/src/schema/schema-steps.js';
import { LAST_RELEASED_VERSION, madeByEarlierReleases } from './support/schema-catalog.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

// An installation the earlier releases' MikroORM migrations made in the app's own schema keeps its tables there,
// brought to the newest version where they are: reliableMailEntities must describe every
// table, column, index and function each version adds, or the app's schema diff (schema:update, migration:create)
// proposes to drop or change them.

describe('reliableMailEntities, on tables the earlier releases made in the app’s own schema', () => {
  let database: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    // A plain search_path, as an app's: the tables are found in its current schema, `public`.
    await client.query(`alter database ${database.url.split('/').pop()} reset search_path`);
    await client.query('set search_path to default');
    await madeByEarlierReleases(client, 'public', LAST_RELEASED_VERSION);
    expect(await migrateSchema(migrationConnection(client))).toEqual({
      schema: 'public',
      from: LAST_RELEASED_VERSION,
      to: KNOWN_SCHEMA_VERSION,
    });
  });

  afterAll(async () => {
    await client?.end();
    await database?.drop();
  });

  const withOrm = async <T>(
    config: Pick<Options, 'entities' | 'routines'>,
    work: (orm: MikroORM) => Promise<T>,
  ): Promise<T> => {
    const orm = await MikroORM.init(defineConfig({ clientUrl: database.url, ...config }) as Options);
    try {
      return await work(orm);
    } finally {
      await orm.close();
    }
  };

  it('leave the app’s schema diff nothing to do once the tables are brought to the newest version', async () => {
    const sql = await withOrm({ entities: reliableMailEntities }, (orm) =>
      orm.schema.getUpdateSchemaSQL({ wrap: false }),
    );
    expect(sql).toBe('');
  });

  it('registered as the last release’s five, are refused at the start, naming the tables the diff would drop', async () => {
    const lastRelease = [MailOutbox, MailOutboxAttempt, MailOutboxEvent, MailSuppression, MailOutboxFeedback];
    const problem = (entities: Options['entities']) =>
      withOrm({ entities }, async (orm) => {
        const appOrm = AppOrm.find({ get: () => orm.em } as unknown as ModuleRef);
        return appOrm!.schemaDiffProblem(tablesIn('public'));
      });
    expect(await problem(lastRelease)).toMatch(
      /not for mail_console_audit, mail_instance, mail_template_source, mail_send_quota, mail_unsubscribe, mail_relay_destination, mail_relay, mail_migrations, .*register the whole reliableMailEntities list/,
    );
    expect(await problem(reliableMailEntities)).toBeNull();
  });
});
