import { appendFile, chown, mkdir, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Cluster } from './cluster.js';
import { chownTree, checkReachable } from './server-user.js';
import { stopLeftoverServer } from './stop-server.js';

/**
 * Makes the data folder and the log ready for the server's user, and tells whether the cluster exists already
 * (then a server left running on it by an earlier demo has been stopped) or still has to be made by `initdb`.
 */
export async function prepareDataDir(cluster: Cluster): Promise<{ initialised: boolean }> {
  const { dataDir, logFile, serverUser } = cluster;
  await mkdir(dirname(dataDir), { recursive: true });
  await appendFile(logFile, '');
  if (serverUser) await chown(logFile, serverUser.uid, serverUser.gid);

  const initialised = await stat(join(dataDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
  if (initialised) {
    await stopLeftoverServer(cluster);
  } else {
    // A folder without PG_VERSION is an initdb that did not finish: nothing in it is worth keeping.
    await rm(dataDir, { recursive: true, force: true });
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (serverUser) {
    await checkReachable(dataDir, serverUser);
    await chownTree(dataDir, serverUser);
  }
  return { initialised };
}
