import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { access, chmod, constants, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../support/private-postgres.js';

const execFileAsync = promisify(execFile);

/** Debian's `pgbouncer` package (.ci/run installs it). */
const PGBOUNCER = '/usr/sbin/pgbouncer';
/** PgBouncer refuses to run as root; the package's own service runs it as this user. */
const OS_USER = 'postgres';
const READY_TIMEOUT_MS = 10_000;

export interface PgBouncerOptions {
  poolMode: 'session' | 'transaction';
  /** Where the server connections go, as `postgres://user@host:port/…`: every database name maps to that server. */
  server: string;
  /**
   * Server connections per database and user: fewer than the clients, so that one client's statements meet several
   * server sessions, and several clients one.
   */
  poolSize: number;
}

/**
 * A PgBouncer of one test's own on a free port, from a temporary folder (trust authentication for the users of its
 * auth file), started as a child of the test process through `setpriv --pdeathsig`, so that it ends with the test
 * process however that ends. The strict case: no prepared statements across transactions
 * (`max_prepared_statements = 0` where the version has it, 1.21 on; before it there are none), no startup parameter
 * it does not track (`options`, `statement_timeout` are refused), and no session kept between transactions.
 */
export class PgBouncer {
  private constructor(
    private readonly child: ChildProcess,
    private readonly exited: Promise<void>,
    private readonly folder: string,
    readonly port: number,
  ) {}

  static async start({ poolMode, server, poolSize }: PgBouncerOptions): Promise<PgBouncer> {
    await access(PGBOUNCER, constants.X_OK).catch((error: unknown) => {
      throw new Error(`no ${PGBOUNCER}: install pgbouncer (apt-get install pgbouncer)`, { cause: error });
    });
    const target = new URL(server);
    const folder = await mkdtemp(join(tmpdir(), 'pgbouncer-'));
    // The folder is read after the switch to the postgres user.
    await chmod(folder, 0o755);
    const port = await freePort();
    const config = join(folder, 'pgbouncer.ini');
    // The password is the one PgBouncer logs in to the server with; its clients are trusted.
    const quoted = (value: string) => `"${decodeURIComponent(value).replaceAll('"', '""')}"`;
    await writeFile(join(folder, 'users.txt'), `${quoted(target.username || 'postgres')} ${quoted(target.password)}\n`);
    await writeFile(
      config,
      [
        '[databases]',
        `* = host=${target.hostname} port=${target.port || 5432}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${join(folder, 'users.txt')}`,
        `pool_mode = ${poolMode}`,
        `default_pool_size = ${poolSize}`,
        'max_client_conn = 500',
        ...((await version()) >= 121 ? ['max_prepared_statements = 0'] : []),
      ].join('\n'),
    );
    const user = process.getuid?.() === 0 ? [`--reuid=${OS_USER}`, `--regid=${OS_USER}`, '--clear-groups'] : [];
    const child = spawn('setpriv', [...user, '--pdeathsig=SIGTERM', PGBOUNCER, config], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
    // 'error' (setpriv could not be run) must be listened to, or it would end the test process.
    const exited = new Promise<void>((resolve) =>
      child
        .once('exit', () => resolve())
        .once('error', (error) => {
          log += String(error);
          resolve();
        }),
    );
    const bouncer = new PgBouncer(child, exited, folder, port);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!(await bouncer.accepts())) {
      if (!bouncer.running() || Date.now() > deadline) {
        await bouncer.stop();
        throw new Error(`pgbouncer did not start:\n${log}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return bouncer;
  }

  /** `url`, a database of the server, reached through this PgBouncer. */
  urlOf(url: string): string {
    const through = new URL(url);
    through.hostname = '127.0.0.1';
    through.port = String(this.port);
    return through.toString();
  }

  /** Kills it (SIGINT would wait for its clients to leave) and removes its folder. */
  async stop(): Promise<void> {
    if (this.running()) this.child.kill('SIGKILL');
    await this.exited;
    await rm(this.folder, { recursive: true, force: true });
  }

  /** Whether the process runs: it has a process id (it was spawned) and has not exited. */
  private running(): boolean {
    return this.child.pid !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Whether it takes connections on its port: it still runs, and what answers there is not another process. */
  private accepts(): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = connect(this.port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(this.running());
      });
      socket.once('error', () => resolve(false));
    });
  }
}

/** The installed PgBouncer's major and minor version as one number: 118 for "PgBouncer 1.18.0". */
async function version(): Promise<number> {
  const { stdout } = await execFileAsync(PGBOUNCER, ['--version']);
  const [, major, minor] = /PgBouncer (\d+)\.(\d+)/.exec(stdout) ?? [];
  return Number(major) * 100 + Number(minor);
}
