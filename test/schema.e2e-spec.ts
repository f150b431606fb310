import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Migrator } from '@mikro-orm/migrations';
import { defineConfig, MikroORM } from '@mikro-orm/postgresql';
import { MailOutboxService } from '@reliable-mail/nestjs';
import { reliableMailMigrations } from '@reliable-mail/nestjs/mikro-orm';
import pg from 'pg';
import { migrateSchema, migrationConnection } from '../libs/reliable-mail/src/schema/migrate-schema.js';
import { readSchemaState } from '../libs/reliable-mail/src/schema/schema-state.js';
import { KNOWN_SCHEMA_VERSION } from '../libs/reliable-mail/src/schema/schema-steps.js';
import { SCHEMA_VERSIONS } from '../libs/reliable-mail/src/schema/versions/index.js';
import { LAST_RELEASED_VERSION, madeByEarlierReleases, schemaCatalog } from './support/schema-catalog.js';
import { createTestApp, testMailOptions } from './support/test-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

// reliable-mail owns its schema: `npx reliable-mail migrate` (migrateSchema), the MikroORM migrations and the SQL
// files bring a database to the same tables, each version recorded with the oldest code it serves, and tables the
// earlier releases' MikroORM migrations made in the app's own schema are recognised where they are.

/** A database of its own, with a plain search_path: what the tools and the start see there is what an app sees. */
async function plainDatabase(): Promise<{ database: TestDatabase; client: pg.Client }> {
  const database = await createTestDatabase();
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query(`alter database ${database.url.split('/').pop()} reset search_path`);
  await client.query('set search_path to default');
  return { database, client };
}

describe("reliable-mail's schema", () => {
  const opened: Array<{ database: TestDatabase; client: pg.Client }> = [];
  const open = async () => {
    const fresh = await plainDatabase();
    opened.push(fresh);
    return fresh;
  };

  afterAll(async () => {
    for (const { database, client } of opened) {
      await client.end();
      await database.drop();
    }
  });

  it('migrate makes schema reliable_mail at the newest version, records each version, and then has nothing to do', async () => {
    const { client } = await open();
    const connection = migrationConnection(client);

    expect(await migrateSchema(connection)).toEqual({ schema: 'reliable_mail', from: 0, to: KNOWN_SCHEMA_VERSION });
    expect(await migrateSchema(connection)).toEqual({
      schema: 'reliable_mail',
      from: KNOWN_SCHEMA_VERSION,
      to: KNOWN_SCHEMA_VERSION,
    });
    const { rows } = await client.query('select version, name from reliable_mail.mail_migrations order by version');
    expect(rows).toEqual(SCHEMA_VERSIONS.map(({ version, name }) => ({ version, name })));
    // Nothing of reliable-mail's is in the app's own schema.
    const { rows: stray } = await client.query(
      `select table_name from information_schema.tables where table_schema = 'public' and table_name like 'mail_%'`,
    );
    expect(stray).toEqual([]);
  });

  it('version 12 keeps unsubscribes beside the suppression list, whose key stays the address: the code before it still records hard bounces', async () => {
    const { client } = await open();
    await migrateSchema(migrationConnection(client));
    const keys = await client.query(
      `select c.relname as table, array_agg(a.attname::text order by k.n) as columns
       from pg_index i join pg_class c on c.oid = i.indrelid
       cross join lateral unnest(i.indkey) with ordinality k(attnum, n)
       join pg_attribute a on a.attrelid = c.oid and a.attnum = k.attnum
       where i.indisprimary and c.relname in ('mail_suppression', 'mail_unsubscribe')
         and c.relnamespace = 'reliable_mail'::regnamespace
       group by c.relname order by c.relname`,
    );
    expect(keys.rows).toEqual([
      { table: 'mail_suppression', columns: ['address'] },
      { table: 'mail_unsubscribe', columns: ['address', 'category'] },
    ]);
    // The settle's statement of the versions before: an address unsubscribed from a category is no conflict.
    await client.query(
      `insert into reliable_mail.mail_unsubscribe (address, category) values ('ann@example.com', 'newsletter')`,
    );
    const { rowCount } = await client.query(
      `insert into reliable_mail.mail_suppression (address, reason, source) values ('ann@example.com', '550 5.1.1', 'bounce')
       on conflict (address) do nothing`,
    );
    expect(rowCount).toBe(1);
  });

  it('payloads and metadata are written with lz4 where the server has it, which on 15 it has', async () => {
    const { client } = await open();
    await migrateSchema(migrationConnection(client));
    const { rows } = await client.query(
      `select attname, attcompression from pg_attribute
       where attrelid = 'reliable_mail.mail_outbox'::regclass and attname in ('payload', 'metadata') order by attname`,
    );
    expect(rows).toEqual([
      { attname: 'metadata', attcompression: 'l' },
      { attname: 'payload', attcompression: 'l' },
    ]);
  });

  it('compresses the payload with lz4 where the server has it', async () => {
    const { client } = await open();
    await migrateSchema(migrationConnection(client));
    const { rows } = await client.query(
      `select attcompression as compression from pg_attribute
       where attrelid = 'reliable_mail.mail_outbox'::regclass and attname = 'payload'`,
    );
    expect(rows).toEqual([{ compression: 'l' }]);
  });

  it('instances migrating at once take turns under the lock: each succeeds, the versions are applied once', async () => {
    const { database, client } = await open();
    const clients = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const other = new pg.Client({ connectionString: database.url });
        await other.connect();
        return other;
      }),
    );
    try {
      const results = await Promise.all(clients.map((other) => migrateSchema(migrationConnection(other))));
      expect(results.map((result) => result.to)).toEqual([4, 4, 4, 4].map(() => KNOWN_SCHEMA_VERSION));
      expect(results.filter((result) => result.from === 0)).toHaveLength(1);
    } finally {
      await Promise.all(clients.map((other) => other.end()));
    }
    const { rows } = await client.query('select count(*)::int as count from reliable_mail.mail_migrations');
    expect(rows[0].count).toBe(KNOWN_SCHEMA_VERSION);
  });

  it("MikroORM's migrations make the same tables and records as migrate, which then has nothing to do", async () => {
    const cli = await open();
    await migrateSchema(migrationConnection(cli.client));
    const viaMikroOrm = await open();
    const orm = await MikroORM.init(
      defineConfig({
        clientUrl: viaMikroOrm.database.url,
        entities: [],
        discovery: { warnWhenNoEntities: false },
        extensions: [Migrator],
        migrations: { migrationsList: reliableMailMigrations, snapshot: false, silent: true },
        schemaGenerator: { ignoreSchema: ['reliable_mail'] },
      }),
    );
    try {
      await orm.migrator.up();
      // The app's own schema diff, told to leave reliable-mail's schema alone, has nothing to say.
      expect(await orm.schema.getUpdateSchemaSQL({ wrap: false })).toBe('');
    } finally {
      await orm.close();
    }
    expect(await schemaCatalog(viaMikroOrm.client, 'reliable_mail')).toEqual(
      await schemaCatalog(cli.client, 'reliable_mail'),
    );
    expect((await migrateSchema(migrationConnection(viaMikroOrm.client))).from).toBe(KNOWN_SCHEMA_VERSION);
  });

  it("MikroORM's migrations run nothing again where migrate already brought the schema up", async () => {
    const { database, client } = await open();
    await migrateSchema(migrationConnection(client));
    const orm = await MikroORM.init(
      defineConfig({
        clientUrl: database.url,
        entities: [],
        discovery: { warnWhenNoEntities: false },
        extensions: [Migrator],
        migrations: { migrationsList: reliableMailMigrations, snapshot: false, silent: true },
      }),
    );
    try {
      await expect(orm.migrator.up()).resolves.toHaveLength(SCHEMA_VERSIONS.length);
    } finally {
      await orm.close();
    }
    const { rows } = await client.query('select count(*)::int as count from reliable_mail.mail_migrations');
    expect(rows[0].count).toBe(KNOWN_SCHEMA_VERSION);
  });

  it("an app's own table named mail_migrations in its schema is not taken for reliable-mail's", async () => {
    const { client } = await open();
    await client.query('create table public.mail_migrations (id serial primary key, applied text)');
    expect(await migrateSchema(migrationConnection(client))).toEqual({
      schema: 'reliable_mail',
      from: 0,
      to: KNOWN_SCHEMA_VERSION,
    });
  });

  it('a custom schema takes every table, its record and nothing else', async () => {
    const { client } = await open();
    expect(await migrateSchema(migrationConnection(client), 'mail_custom')).toMatchObject({ schema: 'mail_custom' });
    const { rows } = await client.query(
      `select table_schema, count(*)::int as tables from information_schema.tables
       where table_name like 'mail_%' group by table_schema`,
    );
    expect(rows).toEqual([{ table_schema: 'mail_custom', tables: 13 }]);
  });

  describe('tables the earlier releases made in the app’s own schema', () => {
    it('are recognised at their version, in place, with nothing run or written', async () => {
      const { client } = await open();
      await madeByEarlierReleases(client, 'public', LAST_RELEASED_VERSION);
      const state = await readSchemaState(migrationConnection(client));
      expect(state).toMatchObject({ version: LAST_RELEASED_VERSION, source: 'recognised' });
      expect(state.tables.schema).toBe('public');
      const { rows } = await client.query(
        `select to_regclass('public.mail_migrations') as versions, to_regnamespace('reliable_mail') as own_schema`,
      );
      expect(rows).toEqual([{ versions: null, own_schema: null }]);
    });

    it.each([1, 2, 3, 4, 5, 6])(
      'at version %i are brought up where they are, the versions they had recorded',
      async (at) => {
        const { client } = await open();
        await madeByEarlierReleases(client, 'public', at);
        expect(await readSchemaState(migrationConnection(client))).toMatchObject({ version: at, source: 'recognised' });

        expect(await migrateSchema(migrationConnection(client))).toEqual({
          schema: 'public',
          from: at,
          to: KNOWN_SCHEMA_VERSION,
        });
        const { rows } = await client.query('select version, name from public.mail_migrations order by version');
        expect(rows.map((row) => row.version)).toEqual(SCHEMA_VERSIONS.map((version) => version.version));
        expect(rows.slice(0, at).every((row) => /recognised/.test(row.name))).toBe(true);
      },
    );

    it('beside tables in reliable_mail are refused, naming both: the app would send from one and strand the other', async () => {
      const { client } = await open();
      await madeByEarlierReleases(client, 'public', LAST_RELEASED_VERSION);
      await migrateSchema(migrationConnection(client), 'reliable_mail');
      const refusal = /reliable-mail's tables are in two schemas, "reliable_mail" and "public".*set database\.schema/;
      await expect(readSchemaState(migrationConnection(client))).rejects.toThrow(refusal);
      await expect(migrateSchema(migrationConnection(client))).rejects.toThrow(refusal);
      // Named, either is used alone.
      expect((await readSchemaState(migrationConnection(client), 'public')).tables.schema).toBe('public');
    });

    it('at version 5 are brought up by a role that owns them but may not create schemas in the database', async () => {
      const { database, client } = await open();
      await madeByEarlierReleases(client, 'public', 5);
      const role = `mail_owner_${database.url.split('_').pop()}`;
      await client.query(`create role ${role} login`);
      try {
        await client.query(`grant usage, create on schema public to ${role}`);
        for (const table of [
          'mail_outbox',
          'mail_outbox_attempt',
          'mail_outbox_event',
          'mail_outbox_feedback',
          'mail_suppression',
        ]) {
          await client.query(`alter table public.${table} owner to ${role}`);
        }
        const asRole = new URL(database.url);
        asRole.username = role;
        const owner = new pg.Client({ connectionString: asRole.toString() });
        await owner.connect();
        try {
          expect(await migrateSchema(migrationConnection(owner))).toEqual({
            schema: 'public',
            from: 5,
            to: KNOWN_SCHEMA_VERSION,
          });
        } finally {
          await owner.end();
        }
      } finally {
        await client.query(`drop owned by ${role}; drop role ${role}`).catch(() => undefined);
      }
    });

    it('get their mails’ recipients written by version 8, so that a search by recipient finds the mails of before', async () => {
      const { client } = await open();
      await madeByEarlierReleases(client, 'public', LAST_RELEASED_VERSION);
      const payload = {
        v: 2,
        from: { address: 'shop@example.com' },
        to: [{ name: 'Ann', address: 'Ann@Example.com' }],
        cc: [{ address: 'bob@example.org' }],
        bcc: [],
        replyTo: [],
        headers: {},
        subject: 'Hi',
        text: 'x',
      };
      await client.query(
        `insert into public.mail_outbox (id, message_id, payload, max_attempts, status)
         values ('0190e4a0-0000-7000-8000-000000000001', '<0190e4a0-0000-7000-8000-000000000001@x>', $1, 3, 'dead')`,
        [payload],
      );
      await migrateSchema(migrationConnection(client));
      const { rows } = await client.query('select recipients from public.mail_outbox');
      expect(rows).toEqual([{ recipients: ['ann@example.com', 'bob@example.org'] }]);
    });

    it('are what an app finds and sends from when no schema is set', async () => {
      const { database, client } = await open();
      await madeByEarlierReleases(client, 'public', LAST_RELEASED_VERSION);
      const app = await createTestApp(
        database.url,
        testMailOptions('smtp://127.0.0.1:1', {
          dispatcher: { enabled: false },
          // Brought to this release's version where they are.
          database: { url: database.url, migrateAtStart: true },
        }),
        [],
        { mikroOrm: false },
      );
      try {
        const { id } = await app.get(MailOutboxService).enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' });
        const { rows } = await client.query('select id from public.mail_outbox');
        expect(rows).toEqual([{ id }]);
      } finally {
        await app.close();
      }
    });
  });
});

describe('the start', () => {
  let database: TestDatabase;
  let client: pg.Client;
  const apps: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    ({ database, client } = await plainDatabase());
    await migrateSchema(migrationConnection(client));
  });

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await client.query('delete from reliable_mail.mail_migrations where version > $1', [KNOWN_SCHEMA_VERSION]);
  });

  afterAll(async () => {
    await client.end();
    await database.drop();
  });

  const start = async () => {
    const app = await createTestApp(
      database.url,
      testMailOptions('smtp://127.0.0.1:1', { dispatcher: { enabled: false }, database: { url: database.url } }),
      [],
      { mikroOrm: false },
    );
    apps.push(app);
    return app;
  };

  it('runs on a newer schema that still serves it: a rollback of the code after a migration keeps working', async () => {
    await client.query(
      `insert into reliable_mail.mail_migrations (version, name, serves_code_from) values ($1, 'additive', $2)`,
      [KNOWN_SCHEMA_VERSION + 1, KNOWN_SCHEMA_VERSION],
    );
    await expect(start()).resolves.toBeDefined();
  });

  it('refuses a newer schema that no longer serves it, naming what to deploy', async () => {
    await client.query(
      `insert into reliable_mail.mail_migrations (version, name, serves_code_from) values ($1, 'breaking', $1)`,
      [KNOWN_SCHEMA_VERSION + 1],
    );
    await expect(start()).rejects.toThrow(
      new RegExp(
        `serves only code that knows version ${KNOWN_SCHEMA_VERSION + 1} or later.*knows versions up to ${KNOWN_SCHEMA_VERSION}: deploy a newer version of the package`,
      ),
    );
  });
});
