import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findFreePort } from '../free-port.js';
import { appendToLog, type Cluster, clusterError, ownerFileOf, PG_CTL_TIMEOUT_S, runPgCtl } from './cluster.js';

const START_ATTEMPTS = 3;

export interface StartedServer {
  port: number;
  /** The postmaster's pid, from postmaster.pid: signalled should the demo end without stopping the server. */
  postmasterPid: number;
}

/**
 * Starts the server with pg_ctl, which gives it a session of its own: a Ctrl-C in the terminal then reaches only the
 * demo, and the database stays up while the app drains its sends. Records which demo process owns the server.
 */
export async function startServer(cluster: Cluster, preferredPort: number): Promise<StartedServer> {
  // The port can be taken between the check and the bind: try a few.
  let port = preferredPort;
  for (let attempt = 1; ; attempt++) {
    port = await findFreePort(attempt === 1 ? preferredPort : port + 1);
    // TCP on loopback only: no Unix socket, whose default folder may not exist or be writable here.
    const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`;
    try {
      await runPgCtl(cluster, [
        'start',
        '-w',
        '-t',
        String(PG_CTL_TIMEOUT_S),
        '-l',
        cluster.logFile,
        '-o',
        serverOptions,
      ]);
      break;
    } catch (error) {
      if (attempt >= START_ATTEMPTS) throw await clusterError(cluster, 'PostgreSQL did not start', error);
      appendToLog(cluster, `start on port ${port} failed; trying another port`);
    }
  }
  const postmasterPid = Number.parseInt(
    (await readFile(join(cluster.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0] ?? '',
    10,
  );
  await writeFile(ownerFileOf(cluster), JSON.stringify({ pid: process.pid, port, postmasterPid }));
  return { port, postmasterPid };
}
