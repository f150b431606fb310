import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { Migrator } from '@mikro-orm/migrations';
import { defineConfig, EntitySchema as MikroEntitySchema, MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { DataSource, EntitySchema as TypeOrmEntitySchema, type Logger as TypeOrmLogger } from 'typeorm';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase, withClient } from '../support/test-database.js';

/*
 * The promise to users: nothing in an app's own schema tooling drops or alters reliable-mail's tables, which live in
 * the schema `reliable_mail`. Each tool below runs for real against a database that holds them, with rows, and an app
 * table of the tool's own in `public` that its model has one column more than (so each tool has something to do,
 * and the test sees it did it). Every statement each tool sends is read off the wire by a tap in front of PostgreSQL,
 * besides what the tool prints or returns, and none may name reliable-mail's schema or tables; the catalog of
 * `reliable_mail` (columns, indexes, constraints, sequences, rows) must be the same afterwards.
 *
 * Prisma is not here: its schema tools (`prisma migrate diff`, `migrate dev`, `db push`, `db pull`) run the native
 * schema engine, which the CLI downloads from binaries.prisma.sh, and these machines have no network for it; the
 * published wasm engine's version is not the CLI's, and failed on the catalog ("Column type 'char' could not be
 * deserialized"). What keeps it away by design: Prisma describes and diffs only the schemas its datasource lists,
 * `public` (the connection's) by default, or those of `schemas = [...]`, so `reliable_mail` is never read unless an
 * app names it there. A test that cannot run would be one that cannot fail, so there is none.
 */

/** Anything that names reliable-mail's schema or one of its tables (`mail_outbox` also covers `mail_outbox_*`). */
const RELIABLE_MAIL =
  /reliable_mail|mail_outbox|mail_suppression|mail_migrations|mail_template_source|mail_send_quota|mail_unsubscribe/i;
const RELIABLE_MAIL_TABLES = [
  'mail_console_audit',
  'mail_instance',
  'mail_migrations',
  'mail_outbox',
  'mail_outbox_attempt',
  'mail_outbox_event',
  'mail_outbox_feedback',
  'mail_relay',
  'mail_relay_destination',
  'mail_send_quota',
  'mail_suppression',
  'mail_template_source',
  'mail_unsubscribe',
];
const HERE = fileURLToPath(new URL('.', import.meta.url));
const DRIZZLE_KIT = fileURLToPath(new URL('../../node_modules/drizzle-kit/bin.cjs', import.meta.url));
const CLI_TIMEOUT_MS = 30_000;
/** The test database's name. */
let databaseName = '';

describe("an app's own schema tooling, run against a database that holds reliable-mail's schema", () => {
  let database: TestDatabase;
  let admin: pg.Client;
  let tap: StatementTap;
  let before: CatalogSnapshot;

  beforeAll(async () => {
    database = await createTestDatabase();
    // createTestDatabase sets `search_path = public, reliable_mail` on the database, for tests that read the tables
    // by bare name. An app's database has the default one, and a search_path that shows `reliable_mail` could change
    // what a tool introspects as "its" schema, so the tools see a plain database here. (With that search_path kept,
    // every tool sent the same statements when this was written.)
    databaseName = new URL(database.url).pathname.slice(1);
    await withClient(database.url, (client) =>
      client.query(`alter database ${pg.escapeIdentifier(databaseName)} reset search_path`),
    );
    await migrate(database.url);
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    expect((await admin.query<{ search_path: string }>('show search_path')).rows[0].search_path).toBe(
      '"$user", public',
    );
    const ids = [randomUUID(), randomUUID(), randomUUID()];
    for (const [index, id] of ids.entries()) {
      await admin.query(
        `insert into reliable_mail.mail_outbox (id, message_id, content_hash, payload, max_attempts, status)
         values ($1, $2, $3, $4, 5, $5)`,
        [
          id,
          `<${id}@test.example.com>`,
          `hash-${index}`,
          { to: [`user${index}@example.com`] },
          ['pending', 'sent', 'dead'][index],
        ],
      );
    }
    await admin.query(
      `insert into reliable_mail.mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, outcome)
       values ($1, $2, 1, 'worker-1', $3, 'sent')`,
      [randomUUID(), ids[1], randomUUID()],
    );
    await admin.query(
      `insert into reliable_mail.mail_suppression (address, reason, source) values ('gone@example.com', 'hard bounce', 'bounce')`,
    );
    before = await catalogSnapshot(admin);
    // The snapshot is of reliable-mail's real schema, not of an empty one that would compare equal to anything.
    expect(Object.keys(before.rows).sort()).toEqual(RELIABLE_MAIL_TABLES);
    expect(before.rows.mail_outbox.count).toBe(3);
    expect(before.indexes.length).toBeGreaterThan(10);
    tap = await StatementTap.start(database.url);
  });

  afterAll(async () => {
    await tap?.close();
    await admin?.end();
    await database?.drop();
  });

  /** The app's table as the database has it: one column fewer than the tool's model. */
  async function createAppTable(table: string): Promise<void> {
    await admin.query(`drop table if exists public.${table}`);
    await admin.query(`create table public.${table} (id uuid primary key, name text not null)`);
    await admin.query(`insert into public.${table} (id, name) values ($1, 'first')`, [randomUUID()]);
  }

  async function appColumns(table: string): Promise<string[]> {
    const { rows } = await admin.query<{ column_name: string }>(
      `select column_name from information_schema.columns where table_schema = 'public' and table_name = $1 order by ordinal_position`,
      [table],
    );
    return rows.map((row) => row.column_name);
  }

  async function expectReliableMailUntouched(): Promise<void> {
    expect(await catalogSnapshot(admin)).toEqual(before);
  }

  describe('MikroORM 7', () => {
    const MikroWidget = new MikroEntitySchema({
      name: 'MikroWidget',
      tableName: 'mikro_widget',
      properties: {
        id: { type: 'uuid', primary: true },
        name: { type: 'text' },
        colour: { type: 'text', nullable: true },
      },
    });
    let migrations: string;
    let orm: MikroORM;

    /** The config the README recommends: the app's own entities, and reliable-mail's schema ignored. */
    const recommended = (url: string) =>
      defineConfig({
        clientUrl: url,
        entities: [MikroWidget],
        extensions: [Migrator],
        migrations: { path: migrations, emit: 'js' },
        schemaGenerator: { ignoreSchema: ['reliable_mail'] },
        debug: false,
      });

    beforeAll(async () => {
      await createAppTable('mikro_widget');
      migrations = await mkdtemp(join(tmpdir(), 'reliable-mail-mikro-'));
      orm = await MikroORM.init(recommended(tap.url));
    });

    afterAll(async () => {
      await orm?.close();
      if (migrations) await rm(migrations, { recursive: true, force: true });
    });

    it('with ignoreSchema, getUpdateSchemaSQL changes only the app table', async () => {
      tap.take();
      const statements = splitStatements(await orm.schema.getUpdateSchemaSQL({ wrap: false }));
      expect(statements).toContain('alter table "mikro_widget" add "colour" text null;');
      expectNothingAbout(statements);
      expectNothingAbout(tap.take(), { exclusions: true });
      await expectReliableMailUntouched();
    });

    it("with ignoreSchema, the migrator's createMigration writes a migration that changes only the app table", async () => {
      tap.take();
      const result = await orm.migrator.create();
      expect(result.diff.up).toContain('alter table "mikro_widget" add "colour" text null;');
      expect(result.fileName).not.toBe('');
      const written = await readFile(join(migrations, result.fileName), 'utf8');
      expect(written).toContain('alter table "mikro_widget" add "colour" text null;');
      expectNothingAbout([...result.diff.up, ...result.diff.down, result.code, written]);
      expectNothingAbout(tap.take(), { exclusions: true });
      await expectReliableMailUntouched();
    });

    it('with ignoreSchema, schema.update() runs for real and leaves reliable-mail alone', async () => {
      tap.take();
      await orm.schema.update();
      const sent = tap.take();
      expect(sent.some((statement) => /alter table "mikro_widget" add "colour"/.test(statement))).toBe(true);
      expectNothingAbout(sent, { exclusions: true });
      expect(await appColumns('mikro_widget')).toEqual(['id', 'name', 'colour']);
      await expectReliableMailUntouched();
    });

    it('without ignoreSchema, getUpdateSchemaSQL would drop reliable-mail: the setting is what protects it', async () => {
      const { ignoreSchema: _ignored, ...schemaGenerator } = recommended(tap.url).schemaGenerator ?? {};
      const unprotected = await MikroORM.init({ ...recommended(tap.url), schemaGenerator });
      try {
        const sql = await unprotected.schema.getUpdateSchemaSQL({ wrap: false });
        expect(sql).toContain('drop table if exists "reliable_mail"."mail_outbox" cascade;');
        expect(sql).toContain('drop schema if exists "reliable_mail";');
      } finally {
        await unprotected.close();
      }
      // It was only generated, never run.
      await expectReliableMailUntouched();
    });
  });

  describe('TypeORM', () => {
    const TypeormWidget = new TypeOrmEntitySchema({
      name: 'TypeormWidget',
      tableName: 'typeorm_widget',
      columns: {
        id: { type: 'uuid', primary: true },
        name: { type: 'text' },
        colour: { type: 'text', nullable: true },
      },
    });
    const logged: string[] = [];
    let dataSource: DataSource;

    beforeAll(async () => {
      await createAppTable('typeorm_widget');
      dataSource = new DataSource({
        type: 'postgres',
        url: tap.url,
        entities: [TypeormWidget],
        logger: new CapturingTypeOrmLogger(logged),
      });
      await dataSource.initialize();
    });

    afterAll(async () => {
      if (dataSource?.isInitialized) await dataSource.destroy();
    });

    it("the schema builder's log (what migration:generate writes) changes only the app table", async () => {
      tap.take();
      const { upQueries, downQueries } = await dataSource.driver.createSchemaBuilder().log();
      const up = upQueries.map((query) => query.query);
      expect(up).toEqual(['ALTER TABLE "typeorm_widget" ADD "colour" text']);
      expectNothingAbout([...up, ...downQueries.map((query) => query.query)]);
      expectNothingAbout(tap.take());
      await expectReliableMailUntouched();
    });

    it('synchronize() runs for real and leaves reliable-mail alone', async () => {
      logged.length = 0;
      tap.take();
      await dataSource.synchronize();
      expect(logged).toContain('ALTER TABLE "typeorm_widget" ADD "colour" text');
      expectNothingAbout(logged);
      const sent = tap.take();
      expect(sent).toContain('ALTER TABLE "typeorm_widget" ADD "colour" text');
      expectNothingAbout(sent);
      expect(await appColumns('typeorm_widget')).toEqual(['id', 'name', 'colour']);
      await expectReliableMailUntouched();
    });
  });

  describe('drizzle-kit', () => {
    let out: string;

    const drizzleKit = (command: string, ...flags: string[]) =>
      run(process.execPath, [DRIZZLE_KIT, command, '--config', 'drizzle.config.ts', ...flags], {
        cwd: HERE,
        env: { ...process.env, NODE_OPTIONS: '', SCHEMA_TOOLING_DATABASE_URL: tap.url, SCHEMA_TOOLING_OUT: out },
      });

    beforeAll(async () => {
      await createAppTable('drizzle_widget');
      out = await mkdtemp(join(tmpdir(), 'reliable-mail-drizzle-'));
    });

    afterAll(async () => {
      if (out) await rm(out, { recursive: true, force: true });
    });

    it('generate writes a migration of the app table only, without reading the database', async () => {
      tap.take();
      const output = await drizzleKit('generate');
      const files = (await readdir(out)).filter((file) => file.endsWith('.sql'));
      expect(files).toHaveLength(1);
      const sql = await readFile(join(out, files[0]), 'utf8');
      expect(sql).toContain('CREATE TABLE "drizzle_widget"');
      expectNothingAbout([sql, output]);
      expect(tap.take()).toEqual([]);
      await expectReliableMailUntouched();
    });

    it('push --force runs for real and changes only public', async () => {
      tap.take();
      const output = await drizzleKit('push', '--force', '--verbose');
      const printed = output.split('\n').filter((line) => /^(create|alter|drop|truncate|comment)\b/i.test(line));
      expect(printed).toContain('ALTER TABLE "drizzle_widget" ADD COLUMN "colour" text;');
      expect(output).toContain('Changes applied');
      expectNothingAbout([output]);
      const sent = tap.take();
      expect(
        sent.some((statement) => statement.includes('ALTER TABLE "drizzle_widget" ADD COLUMN "colour" text')),
      ).toBe(true);
      expectNothingAbout(sent);
      expect(await appColumns('drizzle_widget')).toEqual(['id', 'name', 'colour']);
      await expectReliableMailUntouched();
    });
  });
});

/**
 * No statement names reliable-mail's schema or tables. The test database's own name (`reliable_mail_test_…`) is not
 * such a name. With `exclusions`, a list of literals after `not in` is allowed to: that is how MikroORM's
 * introspection leaves out the schemas of `ignoreSchema`.
 */
function expectNothingAbout(statements: readonly string[], { exclusions = false } = {}): void {
  const naming = statements
    .map((statement) => (databaseName ? statement.replaceAll(databaseName, '<database>') : statement))
    .map((statement) => (exclusions ? statement.replace(/not in \((?:'[^']*'(?:, )?)+\)/gi, 'not in (…)') : statement))
    .filter((statement) => RELIABLE_MAIL.test(statement));
  expect(naming).toEqual([]);
}

function splitStatements(sql: string): string[] {
  return sql
    .split(/;\n/)
    .map((statement) => statement.trim())
    .filter((statement) => statement !== '')
    .map((statement) => (statement.endsWith(';') ? statement : `${statement};`));
}

interface CatalogSnapshot {
  columns: unknown[];
  indexes: unknown[];
  constraints: unknown[];
  sequences: unknown[];
  /** Per table: the number of rows and a digest of their contents. */
  rows: Record<string, { count: number; digest: string | null }>;
}

/** What the schema `reliable_mail` holds: its tables' columns, indexes, constraints and sequences, and its rows. */
async function catalogSnapshot(client: pg.Client): Promise<CatalogSnapshot> {
  const query = async (sql: string) => (await client.query(sql)).rows;
  const columns = await query(
    `select table_name, column_name, ordinal_position, data_type, udt_name, is_nullable, column_default
     from information_schema.columns where table_schema = 'reliable_mail' order by table_name, ordinal_position`,
  );
  const indexes = await query(
    `select tablename, indexname, indexdef from pg_indexes where schemaname = 'reliable_mail' order by indexname`,
  );
  const constraints = await query(
    `select c.relname as table_name, k.conname, pg_get_constraintdef(k.oid) as definition
     from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = k.connamespace
     where n.nspname = 'reliable_mail' order by c.relname, k.conname`,
  );
  const sequences = await query(
    `select sequence_name, data_type from information_schema.sequences where sequence_schema = 'reliable_mail'
     order by sequence_name`,
  );
  const tables = await query(
    `select table_name from information_schema.tables where table_schema = 'reliable_mail' order by table_name`,
  );
  const rows: CatalogSnapshot['rows'] = {};
  for (const { table_name: table } of tables as { table_name: string }[]) {
    const [row] = await query(
      `select count(*)::int as count, md5(string_agg(t::text, '|' order by t::text)) as digest
       from reliable_mail.${pg.escapeIdentifier(table)} t`,
    );
    rows[table] = { count: row.count as number, digest: row.digest as string | null };
  }
  return { columns, indexes, constraints, sequences, rows };
}

/** Runs a CLI to its end within the timeout; resolves with its output (stdout and stderr, without colours). */
function run(file: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { ...options, timeout: CLI_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const output = stripVTControlCharacters(`${stdout}\n${stderr}`);
        if (error) reject(new Error(`${file} ${args.join(' ')} failed: ${error.message}\n${output}`));
        else resolve(output);
      },
    );
  });
}

/** A TypeORM logger that keeps every query it is told of. */
class CapturingTypeOrmLogger implements TypeOrmLogger {
  constructor(private readonly queries: string[]) {}

  logQuery(query: string): void {
    this.queries.push(query);
  }

  logQueryError(): void {}

  logQuerySlow(): void {}

  logSchemaBuild(): void {}

  logMigration(): void {}

  log(): void {}
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

/**
 * A TCP proxy in front of the test database that reads every statement its clients send: the text of each simple
 * Query ('Q') and of each Parse ('P') of the extended protocol. It declines SSL and GSS encryption itself, so the
 * stream stays readable; everything else passes through unchanged.
 */
class StatementTap {
  private readonly statements: string[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    private readonly target: URL,
  ) {}

  static async start(databaseUrl: string): Promise<StatementTap> {
    const server = createServer();
    const tap = new StatementTap(server, new URL(databaseUrl));
    server.on('connection', (client) => tap.accept(client));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return tap;
  }

  /** The database's URL, through the tap. */
  get url(): string {
    const url = new URL(this.target);
    url.hostname = '127.0.0.1';
    url.port = String((this.server.address() as AddressInfo).port);
    return url.toString();
  }

  /** The statements sent since the last call. */
  take(): string[] {
    return this.statements.splice(0);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const upstream = connect(Number(this.target.port || 5432), this.target.hostname);
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        this.sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    upstream.pipe(client);
    let pending = Buffer.alloc(0);
    let startup = true;
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        if (startup) {
          if (pending.length < 8 || pending.length < pending.readInt32BE(0)) return;
          const message = pending.subarray(0, pending.readInt32BE(0));
          pending = pending.subarray(message.length);
          const code = message.readInt32BE(4);
          if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
            client.write('N');
            continue;
          }
          startup = false;
          upstream.write(message);
          continue;
        }
        if (pending.length < 5 || pending.length < 1 + pending.readInt32BE(1)) return;
        const message = pending.subarray(0, 1 + pending.readInt32BE(1));
        pending = pending.subarray(message.length);
        this.record(message);
        upstream.write(message);
      }
    });
  }

  private record(message: Buffer): void {
    const type = String.fromCharCode(message[0]);
    if (type === 'Q') {
      this.statements.push(message.toString('utf8', 5, message.indexOf(0, 5)));
    } else if (type === 'P') {
      const nameEnd = message.indexOf(0, 5);
      this.statements.push(message.toString('utf8', nameEnd + 1, message.indexOf(0, nameEnd + 1)));
    }
  }
}
