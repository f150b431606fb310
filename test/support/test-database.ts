import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The tests read reliable-mail's tables by their bare names, as an operator whose search_path names its schema. */
const SEARCH_PATH = 'search_path = public, reliable_mail';

/** How long a drop waits for the sessions of the database to end before it ends them. */
const DROP_GRACE_MS = 2_000;

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A database of its own for one test file: a fresh database on the server `DATABASE_URL` names, or a PostgreSQL
 * testcontainer when it is not set.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer('postgres:16-alpine').start();
    await withClient(container.getConnectionUri(), (client) =>
      client.query(`alter database ${container.getDatabase()} set ${SEARCH_PATH}`),
    );
    return { url: container.getConnectionUri(), drop: async () => void (await container.stop()) };
  }
  const name = `reliable_mail_test_${randomBytes(6).toString('hex')}`;
  await withClient(serverUrl, async (client) => {
    await client.query(`create database ${name}`);
    await client.query(`alter database ${name} set ${SEARCH_PATH}`);
  });
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () =>
      withClient(serverUrl, async (client) => {
        // pg-pool's end() resolves once it has asked its clients to end, not once their sessions have: a forced drop
        // at once ends those sessions itself, and a client still ending reports that as an error nobody listens for
        // any more (an unhandled 57P01 in whichever test runs then). The sessions go within milliseconds; a test
        // that left one open is ended by the drop after 2 s.
        for (let waited = 0; waited < DROP_GRACE_MS; waited += 20) {
          const { rowCount } = await client.query('select 1 from pg_stat_activity where datname = $1', [name]);
          if (!rowCount) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await client.query(`drop database if exists ${name} with (force)`);
      }),
  };
}

/** A connection of its own to `url` for `work`, ended after it. */
export async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
