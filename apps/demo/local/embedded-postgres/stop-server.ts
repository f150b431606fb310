import { readFile, rm } from 'node:fs/promises';
import { type Cluster, clusterError, logger, ownerFileOf, PG_CTL_TIMEOUT_S, runPgCtl, shown } from './cluster.js';

/** Fast shutdown: open sessions are ended rather than waited for, the data is written out cleanly. */
const pgCtlStop = (cluster: Cluster) => runPgCtl(cluster, ['stop', '-w', '-t', String(PG_CTL_TIMEOUT_S), '-m', 'fast']);

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A server left running on the data folder by an earlier demo that was killed (SIGKILL, a closed terminal) would
 * make this start fail on its lock file: it is stopped. One whose demo process is still alive is in use, and this
 * start gives up instead.
 */
export async function stopLeftoverServer(cluster: Cluster): Promise<void> {
  const status = await runPgCtl(cluster, ['status']).catch(() => null);
  if (!status) return; // exit code 3: not running
  let owner: { pid?: number } = {};
  try {
    owner = JSON.parse(await readFile(ownerFileOf(cluster), 'utf8')) as { pid?: number };
  } catch {
    // no owner recorded
  }
  const shownDir = shown(cluster.dataDir);
  if (owner.pid && owner.pid !== process.pid && isAlive(owner.pid)) {
    throw new Error(
      `PostgreSQL is already running on ${shownDir} for another demo process (pid ${owner.pid}). Stop that one first, or set DATABASE_URL.`,
    );
  }
  logger.warn(`Stopping a PostgreSQL server left running on ${shownDir} by an earlier run`);
  try {
    await pgCtlStop(cluster);
  } catch (error) {
    throw await clusterError(cluster, 'Could not stop the PostgreSQL server left running by an earlier run', error);
  }
}

/**
 * The started server's stop(): the same promise however often it is called, and it never throws (a failure is
 * logged). Should the process end without it (an uncaught error, process.exit elsewhere), the server still gets its
 * fast-shutdown signal and finishes shutting down on its own.
 */
export function serverStopper(cluster: Cluster, postmasterPid: number): () => Promise<void> {
  let stopping: Promise<void> | null = null;
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

  return () =>
    (stopping ??= (async () => {
      try {
        await pgCtlStop(cluster);
        logger.log('PostgreSQL stopped');
      } catch (error) {
        logger.error((await clusterError(cluster, 'Stopping PostgreSQL failed', error)).message);
      } finally {
        process.off('exit', onExit);
        await rm(ownerFileOf(cluster), { force: true });
      }
    })());
}
