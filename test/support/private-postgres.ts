import { execFile } from 'node:child_process';
import { access, chown, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { reachableInstallation } from '../../apps/demo/local/embedded-postgres/reachable-installation.js';
import { logTail, type RunningServer, startLoggedServer } from './server-process.js';

const execFileAsync = promisify(execFile);
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const OS_USER = 'postgres';
const READY_TIMEOUT_MS = 30_000;

// Without fsync a commit still reaches the kernel before it is acknowledged, so it survives a crash of the server
// (stop 'immediate', SIGKILL), just not one of the machine. synchronous_commit stays on: with it off, a server
// crash loses the last acknowledged commits, which a fault test would take for a bug.
const SERVER_SETTINGS = [
  'fsync=off',
  'full_page_writes=off',
  'shared_buffers=16MB',
  'listen_addresses=127.0.0.1',
  // The tests read reliable-mail's tables by their bare names, as the shared server's test databases have it.
  'search_path=public,reliable_mail',
];

export interface PrivatePostgresOptions {
  /**
   * Folder of initdb, postgres and pg_basebackup; by default the newest version under /usr/lib/postgresql. The
   * `@embedded-postgres/<platform>` packages' `native/bin` works too, but has no pg_basebackup: no `createStandby`.
   * From a checkout the `postgres` user cannot enter, their installation is copied into the cluster's folder.
   */
  binDir?: string;
}

export type StopMode = 'fast' | 'immediate';

export interface BackendFilter {
  applicationName?: string;
  /** An SQL condition on the columns of pg_stat_activity, e.g. `state = 'idle in transaction'`. */
  where?: string;
}

/**
 * A PostgreSQL cluster of one test's own, in a fresh temporary folder, which the test may stop, crash, restart,
 * replicate and fail over without disturbing the shared server other test files use.
 *
 * initdb and postgres refuse to run as root, so when the tests run as root every command runs as the `postgres` OS
 * user, which owns the folder (data, sockets and log are all in it). That user may not reach binaries inside the
 * checkout (in root's home, or a 0700 folder such as `mktemp -d` makes): those are then run from a copy in the
 * folder, as the demo does for its embedded PostgreSQL (`reachableInstallation`). The server is started without pg_ctl, as a child of the test process, through
 * `setpriv --pdeathsig`: the kernel then sends it an immediate-shutdown signal whenever the test process ends,
 * even by SIGKILL or a worker's forced exit, where an 'exit' handler would not run.
 */
export class PrivatePostgres {
  private server: RunningServer | undefined;

  private constructor(
    private readonly folder: string,
    private readonly binDir: string,
    readonly port: number,
  ) {}

  /** initdb (trust authentication, replication allowed from 127.0.0.1) and a started server. */
  static async start(options: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
    const binDir = options.binDir ?? (await newestInstalledBinDir());
    return PrivatePostgres.create(binDir, (runnable, folder) =>
      run(
        join(runnable, 'initdb'),
        ['-D', dataDirIn(folder), '-U', 'postgres', '--auth=trust', '--no-sync', '--encoding=UTF8', '--locale=C'],
        folder,
      ),
    );
  }

  /** The postmaster's process id while the server runs, for faults no method covers (a SIGKILL, say). */
  get pid(): number | undefined {
    return this.isRunning() ? this.server!.child.pid : undefined;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** Starts the server again, on the same port and data, after `stop`. */
  async start(): Promise<void> {
    if (this.isRunning()) throw new Error(`the cluster on port ${this.port} is already running`);
    const settings = [...SERVER_SETTINGS, `unix_socket_directories=${this.folder}`].flatMap((setting) => [
      '-c',
      setting,
    ]);
    const { server, logStart } = await startLoggedServer(
      this.folder,
      ...asOwner(join(this.binDir, 'postgres'), ['-D', this.dataDir, '-p', String(this.port), ...settings]),
    );
    this.server = server;
    try {
      await waitUntilReady(this.dataDir, server);
    } catch (error) {
      await this.stop('immediate');
      const tail = await logTail(this.folder, logStart);
      throw new Error(`PostgreSQL on port ${this.port} did not start: ${(error as Error).message}\n  ${tail}`, {
        cause: error,
      });
    }
  }

  /** 'fast' ends the sessions and checkpoints; 'immediate' is a crash, recovered from the WAL on the next start. */
  async stop(mode: StopMode = 'fast'): Promise<void> {
    const server = this.server;
    if (!server) return;
    if (this.isRunning()) server.child.kill(mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
    await server.exited;
    this.server = undefined;
  }

  /** Terminates the other client sessions (those `filter` selects) and returns once they are gone; returns how many. */
  async terminateBackends(filter: BackendFilter = {}): Promise<number> {
    return this.withClient(async (client) => {
      const { rows } = await client.query<{ pid: number }>(
        `select pid, pg_terminate_backend(pid) from pg_stat_activity
          where backend_type = 'client backend' and pid <> pg_backend_pid()
            and ($1::text is null or application_name = $1) and (${filter.where ?? 'true'})`,
        [filter.applicationName ?? null],
      );
      // pg_terminate_backend only signals the backend; a caller that acts next expects the sessions to be gone.
      const pids = rows.map((row) => row.pid);
      while ((await client.query('select 1 from pg_stat_activity where pid = any($1)', [pids])).rowCount)
        await delay(10);
      return pids.length;
    });
  }

  /** A hot standby streaming from this cluster (pg_basebackup -R), started on a port of its own. */
  async createStandby(): Promise<PrivatePostgres> {
    return PrivatePostgres.create(this.binDir, (runnable, folder) =>
      run(
        join(runnable, 'pg_basebackup'),
        [
          '-D',
          dataDirIn(folder),
          '-h',
          '127.0.0.1',
          '-p',
          String(this.port),
          '-U',
          'postgres',
          '-R',
          '-X',
          'stream',
          '--checkpoint=fast',
          '--no-sync',
        ],
        folder,
      ),
    );
  }

  /** Ends recovery on a standby; returns once it accepts writes. */
  async promote(): Promise<void> {
    const promoted = await this.withClient(
      async (client) => (await client.query<{ done: boolean }>('select pg_promote(true, 60) as done')).rows[0].done,
    );
    if (!promoted) throw new Error(`the standby on port ${this.port} was not promoted within 60 s`);
  }

  /** Stops the server (as a crash: the data is thrown away) and deletes its folder; safe to call again. */
  async destroy(): Promise<void> {
    await this.stop('immediate');
    await rm(this.folder, { recursive: true, force: true });
  }

  private static async create(
    binDir: string,
    initialise: (binDir: string, folder: string) => Promise<void>,
  ): Promise<PrivatePostgres> {
    const folder = await ownedTempFolder();
    let cluster: PrivatePostgres | undefined;
    try {
      const runnable = await runnableBinDir(binDir, folder);
      await initialise(runnable, folder);
      // The port is taken only now, so that it stays free for as short a time as possible before the server binds it.
      cluster = new PrivatePostgres(folder, runnable, await freePort());
      await cluster.start();
      return cluster;
    } catch (error) {
      await cluster?.stop('immediate');
      await rm(folder, { recursive: true, force: true });
      throw error;
    }
  }

  private get dataDir(): string {
    return dataDirIn(this.folder);
  }

  private isRunning(): boolean {
    return this.server !== undefined && this.server.child.exitCode === null && this.server.child.signalCode === null;
  }

  private async withClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: this.url });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  }
}

async function newestInstalledBinDir(): Promise<string> {
  const root = '/usr/lib/postgresql';
  const versions = (await readdir(root).catch(() => []))
    .filter((name) => /^\d+$/.test(name))
    .sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const binDir = join(root, version, 'bin');
    if (
      await access(join(binDir, 'postgres')).then(
        () => true,
        () => false,
      )
    )
      return binDir;
  }
  throw new Error(`no PostgreSQL server binaries under ${root}; pass binDir`);
}

let ownerIds: Promise<{ uid: number; gid: number } | null> | undefined;

/** The ids of the `postgres` OS user when the tests run as root (who may not run PostgreSQL), else null. */
function runAsIds(): Promise<{ uid: number; gid: number } | null> {
  ownerIds ??= (async () => {
    if (process.getuid?.() !== 0) return null;
    const id = async (flag: string) => Number.parseInt((await execFileAsync('id', [flag, OS_USER])).stdout, 10);
    return { uid: await id('-u'), gid: await id('-g') };
  })();
  return ownerIds;
}

/** The command line that runs `command` as the folder's owner, and ends it when the test process ends. */
function asOwner(command: string, args: string[]): [string, string[]] {
  const user = process.getuid?.() === 0 ? [`--reuid=${OS_USER}`, `--regid=${OS_USER}`, '--clear-groups'] : [];
  return ['setpriv', [...user, '--pdeathsig=SIGQUIT', command, ...args]];
}

async function run(command: string, args: string[], cwd: string): Promise<void> {
  try {
    await execFileAsync(...asOwner(command, args), { cwd });
  } catch (error) {
    const { stderr, stdout } = error as { stderr?: string; stdout?: string };
    throw new Error(`${command} failed: ${(stderr || stdout || String(error)).trim()}`, { cause: error });
  }
}

/**
 * `binDir`, or when the tests run as root and the `postgres` user cannot reach it, the same folder of a copy of its
 * installation in the cluster's `folder` (deleted with it).
 */
async function runnableBinDir(binDir: string, folder: string): Promise<string> {
  const ids = await runAsIds();
  if (!ids) return binDir;
  return join(await reachableInstallation(dirname(binDir), ids, join(folder, 'postgresql')), basename(binDir));
}

/** A new 0700 folder the server's user owns; the data folder and the Unix sockets go in it. */
async function ownedTempFolder(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'private-postgres-'));
  const ids = await runAsIds();
  if (ids) await chown(folder, ids.uid, ids.gid);
  return folder;
}

/** A port the OS has just handed out as free; released again for the server to bind. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Until postmaster.pid, written by this very process, says the server accepts connections ('ready'; a hot standby
 * says so only once it is consistent).
 */
async function waitUntilReady(dataDir: string, { child, exited }: RunningServer): Promise<void> {
  let hasExited = false;
  void exited.then(() => (hasExited = true));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!hasExited) {
    const lines = await readFile(join(dataDir, 'postmaster.pid'), 'utf8').then(
      (text) => text.split('\n'),
      () => [],
    );
    if (Number(lines[0]) === child.pid && lines[7]?.trim() === 'ready') return;
    if (Date.now() > deadline) throw new Error(`not ready after ${READY_TIMEOUT_MS / 1000} s`);
    await delay(20);
  }
  throw new Error(`the server exited (${child.signalCode ?? `code ${child.exitCode}`})`);
}

function dataDirIn(folder: string): string {
  return join(folder, 'data');
}
