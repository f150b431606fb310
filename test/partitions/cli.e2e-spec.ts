import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase, withClient } from '../support/test-database.js';

const execFileAsync = promisify(execFile);
const CLI = fileURLToPath(new URL('../../libs/reliable-mail/src/cli/reliable-mail.ts', import.meta.url));

/** `npx reliable-mail …`, run from its source (as test/cli runs it). */
async function cli(args: string[], databaseUrl: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(
      process.execPath,
      ['--import', '@swc-node/register/esm-register', CLI, ...args],
      { env: { ...process.env, DATABASE_URL: databaseUrl, NODE_OPTIONS: '' } },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('npx reliable-mail and a partitioned outbox', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase();
  });

  afterAll(() => database?.drop());

  it('partitions refuses a plain outbox; migrate --partition converts it; partitions --ahead makes more days', async () => {
    expect(await cli(['migrate'], database.url)).toMatchObject({ code: 0 });
    const plain = await cli(['partitions'], database.url);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('is not partitioned (`npx reliable-mail migrate --partition` converts it)');

    const converted = await cli(['migrate', '--partition'], database.url);
    expect(converted).toMatchObject({ code: 0 });
    expect(converted.stdout).toContain('is partitioned by day');
    // Run again, it says the outbox was already partitioned: not that rows from today on are in the first partition.
    const convertedAgain = await cli(['migrate', '--partition'], database.url);
    expect(convertedAgain).toMatchObject({ code: 0 });
    expect(convertedAgain.stdout).toContain('was already partitioned by day: nothing to convert');
    const again = await cli(['partitions'], database.url);
    expect(again.stdout).toContain('partitions cover 3 days after today: nothing to do');
    const more = await cli(['partitions', '--ahead', '5'], database.url);
    expect(more.stdout).toMatch(
      /made the partitions of \d{4}-\d\d-\d\d, \d{4}-\d\d-\d\d; they cover 5 days after today/,
    );
    const counts = await withClient(database.url, async (client) => {
      const { rows } = await client.query(
        `select count(*)::int as partitions from pg_inherits where inhparent = 'reliable_mail.mail_outbox'::regclass`,
      );
      return rows[0];
    });
    // The converted table, then today + 2 up to today + 5.
    expect(counts).toEqual({ partitions: 5 });
    expect(await cli(['partitions', '--ahead', '0'], database.url)).toMatchObject({ code: 2 });
    // One day ahead would keep health failing (it wants 2).
    const oneDay = await cli(['partitions', '--ahead', '1'], database.url);
    expect(oneDay).toMatchObject({ code: 2 });
    expect(oneDay.stderr).toContain('--ahead must be a number of days from 2');
  }, 120_000);
});
