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
  }, 60_000);
});
