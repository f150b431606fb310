import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { chmod, cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { PrivatePostgres } from './support/private-postgres.js';
import { TcpProxy } from './support/tcp-proxy.js';

const PRIVATE_POSTGRES = new URL('./support/private-postgres.ts', import.meta.url).href;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function query<T extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met within 10 s');
    await delay(20);
  }
}

/** Whether the process exists and is not a zombie (one the killed test process can no longer reap). */
function isAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('the database fault-test support', () => {
  let primary: PrivatePostgres;

  beforeAll(async () => {
    primary = await PrivatePostgres.start();
  });

  afterAll(async () => {
    await primary?.destroy();
  });

  describe('PrivatePostgres', () => {
    it('stops so that connections are refused, and starts again on the same port with its data, after a crash too', async () => {
      await query(primary.url, 'create table kept (id int)');
      await query(primary.url, 'insert into kept values (1)');

      await primary.stop();
      await expect(query(primary.url, 'select 1')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      await primary.start();
      await query(primary.url, 'insert into kept values (2)');

      await primary.stop('immediate');
      await expect(query(primary.url, 'select 1')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      await primary.start();
      expect(await query(primary.url, 'select id from kept order by id')).toEqual([{ id: 1 }, { id: 2 }]);
    });

    it('terminates the sessions the filter selects, and only those', async () => {
      const connect = async (applicationName: string) => {
        const client = new pg.Client({ connectionString: primary.url, application_name: applicationName });
        // A terminated idle session reports its end as an 'error' event, which would otherwise end the test process.
        client.on('error', () => undefined);
        await client.connect();
        return client;
      };
      const victim = await connect('victim');
      const bystander = await connect('bystander');
      try {
        expect(await primary.terminateBackends({ applicationName: 'victim' })).toBe(1);
        await expect(victim.query('select 1')).rejects.toThrow();
        expect((await bystander.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await Promise.all([victim.end().catch(() => undefined), bystander.end()]);
      }
    });

    it('is shut down by the kernel when the process that started it is killed', async () => {
      // The killed process cannot delete its cluster's folder: it goes in one this test deletes.
      const parent = await mkdtemp(join(tmpdir(), 'fault-support-'));
      await chmod(parent, 0o755);
      const script = `
        const { PrivatePostgres } = await import(${JSON.stringify(PRIVATE_POSTGRES)});
        process.stdout.write((await PrivatePostgres.start()).pid + '\\n');
        setInterval(() => undefined, 1000);`;
      const child = spawn(
        process.execPath,
        ['--import', '@swc-node/register/esm-register', '--input-type=module', '-e', script],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
          env: { ...process.env, NODE_OPTIONS: '', TMPDIR: parent },
        },
      );
      try {
        const [output] = (await Promise.race([
          once(child.stdout, 'data'),
          once(child, 'exit').then(() =>
            Promise.reject(new Error('the child process exited before its cluster started')),
          ),
        ])) as [Buffer];
        const postmasterPid = Number.parseInt(output.toString(), 10);
        expect(isAlive(postmasterPid)).toBe(true);

        child.kill('SIGKILL');
        await until(() => !isAlive(postmasterPid));
      } finally {
        child.kill('SIGKILL');
        await rm(parent, { recursive: true, force: true });
      }
    });

    it('runs binaries from a folder its user cannot enter, as in a checkout inside a 0700 folder', async () => {
      // As root the server runs as `postgres`, who cannot enter a folder of mktemp's (0700, root's): initdb said
      // "invalid binary" for PostgreSQL 13 from node_modules. Run as another user, every folder here is its own.
      const { postgres } = (await import('postgres-13')) as { postgres: string };
      const checkout = await mkdtemp(join(tmpdir(), 'fault-support-checkout-'));
      try {
        const installation = join(checkout, 'node_modules', 'postgres-13', 'native');
        await cp(dirname(dirname(postgres)), installation, { recursive: true, verbatimSymlinks: true });
        const cluster = await PrivatePostgres.start({ binDir: join(installation, 'bin') });
        try {
          const [{ version }] = await query<{ version: string }>(
            cluster.url,
            "select current_setting('server_version_num') as version",
          );
          expect(Math.floor(Number(version) / 10_000)).toBe(13);
        } finally {
          await cluster.destroy();
        }
      } finally {
        await rm(checkout, { recursive: true, force: true });
      }
    });
  });

  describe('a standby', () => {
    let standby: PrivatePostgres | undefined;

    afterAll(async () => {
      await standby?.destroy();
    });

    it('streams and answers reads, refuses LISTEN and writes until promoted, then accepts both', async () => {
      await query(primary.url, 'create table replicated (id int)');
      await query(primary.url, 'insert into replicated values (1)');
      standby = await primary.createStandby();
      await query(primary.url, 'insert into replicated values (2)');
      await until(async () => (await query(standby!.url, 'select id from replicated')).length === 2);

      await expect(query(standby.url, 'listen wake_up')).rejects.toMatchObject({
        message: 'cannot execute LISTEN during recovery',
        code: '25006',
      });
      await expect(query(standby.url, 'insert into replicated values (3)')).rejects.toMatchObject({
        message: 'cannot execute INSERT in a read-only transaction',
      });

      await standby.promote();
      await query(standby.url, 'insert into replicated values (3)');
      const listener = new pg.Client({ connectionString: standby.url });
      await listener.connect();
      try {
        await listener.query('listen wake_up');
        const notified = once(listener, 'notification');
        await query(standby.url, `notify wake_up, 'after promotion'`);
        expect(await notified).toEqual([expect.objectContaining({ channel: 'wake_up', payload: 'after promotion' })]);
      } finally {
        await listener.end();
      }
    });
  });

  describe('TcpProxy', () => {
    let proxy: TcpProxy | undefined;

    afterAll(async () => {
      await proxy?.close();
    });

    it('forwards; after blackHole an open connection hangs without closing while a new one is served; resetAll ends it', async () => {
      proxy = await TcpProxy.start(primary.port);
      const throughProxy = (applicationName: string) => {
        const client = new pg.Client({
          host: '127.0.0.1',
          port: proxy!.port,
          user: 'postgres',
          database: 'postgres',
          application_name: applicationName,
        });
        client.on('error', () => undefined);
        return client;
      };
      const old = throughProxy('old');
      await old.connect();
      expect((await old.query('select 1 as one')).rows).toEqual([{ one: 1 }]);

      proxy.blackHole();
      let settled = false;
      const hanging = old.query('select 2 as two');
      hanging.then(
        () => (settled = true),
        () => (settled = true),
      );
      await delay(1_000);
      expect(settled).toBe(false);

      const fresh = throughProxy('fresh');
      await fresh.connect();
      expect((await fresh.query('select 3 as three')).rows).toEqual([{ three: 3 }]);
      await fresh.end();
      expect(proxy.connectionsOpened).toBe(2);
      // The server still holds the black-holed session: it never learnt that the client went silent.
      expect(await query(primary.url, `select state from pg_stat_activity where application_name = 'old'`)).toEqual([
        { state: 'idle' },
      ]);

      proxy.resetAll();
      await expect(hanging).rejects.toThrow();
      await until(() => proxy!.open === 0);
      await until(
        async () =>
          (await query(primary.url, `select 1 from pg_stat_activity where application_name = 'old'`)).length === 0,
      );
    });

    it('partition holds what an open connection sends and refuses new ones an answer; heal delivers it late', async () => {
      const partitioned = await TcpProxy.start(primary.port);
      try {
        const client = (timeouts: Pick<pg.ClientConfig, 'query_timeout' | 'connectionTimeoutMillis'> = {}) => {
          const connection = new pg.Client({
            host: '127.0.0.1',
            port: partitioned.port,
            user: 'postgres',
            database: 'postgres',
            ...timeouts,
          });
          connection.on('error', () => undefined);
          return connection;
        };
        await query(primary.url, 'create table partition_probe (id int)');
        const old = client({ query_timeout: 500 });
        await old.connect();

        partitioned.partition();
        // Given up on by its client, which then closes the connection: the statement is held, not lost.
        await expect(old.query('insert into partition_probe values (1)')).rejects.toThrow(/timeout/);
        await old.end();
        await expect(client({ connectionTimeoutMillis: 500 }).connect()).rejects.toThrow(/timeout/);
        await delay(500);
        expect(await query(primary.url, 'select id from partition_probe')).toEqual([]);

        partitioned.heal();
        await until(async () => (await query(primary.url, 'select id from partition_probe')).length === 1);
        const fresh = client();
        await fresh.connect();
        expect((await fresh.query('select 3 as three')).rows).toEqual([{ three: 3 }]);
        await fresh.end();
      } finally {
        await partitioned.close();
        await query(primary.url, 'drop table if exists partition_probe');
      }
    });
  });
});
