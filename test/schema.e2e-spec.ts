import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MikroORM } from '@mikro-orm/postgresql';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { ormConfig } from './support/test-app.js';

describe('the migrations and the exported entities', () => {
  let database: TestDatabase;
  let orm: MikroORM;

  beforeAll(async () => {
    database = await createTestDatabase();
    orm = await MikroORM.init(ormConfig(database.url));
  });

  afterAll(async () => {
    await orm?.close();
    await database?.drop();
  });

  it("describe the same schema, so an app's own migration:create generates nothing for the outbox", async () => {
    await orm.migrator.up();
    expect(await orm.schema.getUpdateSchemaSQL({ wrap: false })).toBe('');
  });

  it('compress the payload with lz4 where the server has it', async () => {
    const [{ compression }] = await orm.em
      .fork()
      .execute<{ compression: string }[]>(
        `select attcompression as compression from pg_attribute where attrelid = 'mail_outbox'::regclass and attname = 'payload'`,
      );
    expect(compression).toBe('l');
  });

  it('can be rolled back', async () => {
    await orm.migrator.down({ to: 0 });
    const tables = await orm.em
      .fork()
      .execute(`select table_name from information_schema.tables where table_name like 'mail_%'`);
    expect(tables).toEqual([]);
  });
});
