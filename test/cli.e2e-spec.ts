import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { KNOWN_SCHEMA_VERSION } from '../libs/reliable-mail/src/schema/schema-steps.js';
import { schemaCatalog } from './support/schema-catalog.js';
import { createTestDatabase, type TestDatabase, withClient } from './support/test-database.js';

const execFileAsync = promisify(execFile);
const CLI = fileURLToPath(new URL('../libs/reliable-mail/src/cli/reliable-mail.ts', import.meta.url));
const SQL_FOLDER = new URL('../libs/reliable-mail/sql/', import.meta.url);

/** `npx reliable-mail …`, run from its source as the package's bin runs it built. */
async function cli(args: string[], databaseUrl?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(
      process.execPath,
      ['--import', '@swc-node/register/esm-register', CLI, ...args],
      { env: { ...process.env, DATABASE_URL: databaseUrl ?? '', NODE_OPTIONS: '' } },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('npx reliable-mail', () => {
  const databases: TestDatabase[] = [];
  let migrated: TestDatabase;

  beforeAll(async () => {
    migrated = await createTestDatabase();
    databases.push(migrated);
  });

  afterAll(async () => {
    await Promise.all(databases.map((database) => database.drop()));
  });

  it('migrate brings the database to the newest version, and says there is nothing to do the second time', async () => {
    const first = await cli(['migrate'], migrated.url);
    expect(first).toMatchObject({ code: 0 });
    expect(first.stdout).toContain(`schema "reliable_mail" migrated from version 0 to ${KNOWN_SCHEMA_VERSION}`);
    const second = await cli(['migrate'], migrated.url);
    expect(second.stdout).toContain(`is at version ${KNOWN_SCHEMA_VERSION}, this release's: nothing to do`);
  }, 60_000);

  it('status shows the version and the outbox: rows by status and lane, backlog, oldest due, dead letters', async () => {
    await withClient(migrated.url, (client) =>
      client.query(
        `insert into reliable_mail.mail_outbox (id, message_id, lane, status, payload, max_attempts, next_attempt_at)
         select gen_random_uuid(), g || '@cli.test', lane, status, '{}', 5, now() - interval '1 minute'
         from generate_series(1, 3) g, (values ('critical', 'pending'), ('bulk', 'dead')) v(lane, status)`,
      ),
    );
    const { code, stdout } = await cli(['status', '--json'], migrated.url);
    expect(code).toBe(0);
    const status = JSON.parse(stdout) as {
      version: number;
      problem: string | null;
      outbox: { backlog: number; lagMs: number; deadLetters: number; counts: unknown[] };
    };
    expect(status).toMatchObject({ version: KNOWN_SCHEMA_VERSION, problem: null });
    expect(status.outbox).toMatchObject({ backlog: 3, deadLetters: 3 });
    expect(status.outbox.lagMs).toBeGreaterThanOrEqual(60_000);
    expect(status.outbox.counts).toEqual([
      { status: 'dead', lane: 'bulk', count: 3 },
      { status: 'pending', lane: 'critical', count: 3 },
    ]);
    expect((await cli(['status'], migrated.url)).stdout).toMatch(/backlog: 3, oldest due: \d{4}-/);
  }, 60_000);

  it("relay lists each destination's backlog; relay remove refuses one in use unless forced, and deletes its backlog", async () => {
    const fresh = await createTestDatabase();
    databases.push(fresh);
    expect((await cli(['relay'], fresh.url)).stderr).toContain(
      `is at version 0; the event relay's tables come with version 14`,
    );
    await cli(['migrate'], fresh.url);
    expect((await cli(['relay'], fresh.url)).stdout).toContain('no relay destination is registered');
    await withClient(fresh.url, (client) =>
      client.query(
        `insert into reliable_mail.mail_relay_destination (name, events, seen_at)
         values ('nats', '{reliable-mail.email.sent}', now()), ('old', '{reliable-mail.email.sent}', now() - interval '1 hour');
         insert into reliable_mail.mail_relay (destination, event_id, outbox_id, name, payload, last_error)
         select d, g, gen_random_uuid(), 'reliable-mail.email.sent', '{}', case when d = 'old' then 'no stream' end
         from unnest(array['nats', 'old', 'gone']) d, generate_series(1, 2) g`,
      ),
    );
    const listed = await cli(['relay'], fresh.url);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/'nats'\s*│\s*2\s*│/);
    expect(listed.stdout).toMatch(/'old'\s*│\s*2\s*│.*'no stream'/);
    // Owed events, no longer registered: a transaction that began before a remove copied them.
    expect(listed.stdout).toMatch(/'gone'\s*│\s*2\s*│.*'not registered'/);

    const refused = await cli(['relay', 'remove', 'nats'], fresh.url);
    expect(refused).toMatchObject({ code: 1 });
    expect(refused.stderr).toContain('remove it from every instance first (or pass --force)');
    expect((await cli(['relay', 'remove', 'old'], fresh.url)).stdout).toContain(
      'relay destination "old" removed, with the 2 events it was owed',
    );
    expect((await cli(['relay', 'remove', 'gone'], fresh.url)).stdout).toContain('2 events owed to it deleted');
    expect((await cli(['relay', 'remove', 'nats', '--force'], fresh.url)).code).toBe(0);
    const left = await withClient(fresh.url, (client) =>
      client.query(
        'select (select count(*) from reliable_mail.mail_relay)::int as copies, (select count(*) from reliable_mail.mail_relay_destination)::int as destinations',
      ),
    );
    expect(left.rows).toEqual([{ copies: 0, destinations: 0 }]);
  }, 60_000);

  it('status on a database without the schema exits 1 and says what to run', async () => {
    const empty = await createTestDatabase();
    databases.push(empty);
    const { code, stdout } = await cli(['status'], empty.url);
    expect(code).toBe(1);
    expect(stdout).toContain('run `npx reliable-mail migrate`');
  }, 60_000);

  it("the package's SQL files, applied by another tool, give what migrate gives", async () => {
    const byFiles = await createTestDatabase();
    databases.push(byFiles);
    const files = (await readdir(SQL_FOLDER)).filter((file) => file.endsWith('.sql')).sort();
    expect(files).toHaveLength(KNOWN_SCHEMA_VERSION);
    await withClient(byFiles.url, async (client) => {
      for (const file of files) await client.query(await readFile(new URL(file, SQL_FOLDER), 'utf8'));
    });
    const catalogOf = (url: string) => withClient(url, (client) => schemaCatalog(client, 'reliable_mail'));
    expect(await catalogOf(byFiles.url)).toEqual(await catalogOf(migrated.url));
    expect((await cli(['migrate'], byFiles.url)).stdout).toContain('nothing to do');
  }, 60_000);

  it('refuses what it cannot use, before connecting', async () => {
    expect(await cli(['migrate'])).toMatchObject({ code: 2, stderr: expect.stringContaining('set DATABASE_URL') });
    expect(await cli(['migrate', '--schema', 'Bad"Name'], migrated.url)).toMatchObject({ code: 2 });
    expect(await cli(['drop'], migrated.url)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('unknown command'),
    });
    // The command first: an option it does not take is not what is wrong.
    expect(await cli(['drop', '--ahead', '0'], migrated.url)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('unknown command: drop'),
    });
  }, 60_000);
});
