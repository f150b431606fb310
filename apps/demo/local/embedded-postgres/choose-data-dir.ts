import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Binaries, type Cluster, logger, type PosixIds, USER } from './cluster.js';
import { reachableInstallation } from './reachable-installation.js';
import { checkReachable } from './server-user.js';

/** The temp dir is open to every user, so the folder must be root's and writable by no one else. */
async function ensureRootOnlyFolder(dir: string, ids: PosixIds): Promise<void> {
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
}

/**
 * Where the cluster lives: in the checkout's `dataDir`, unless the server runs as another user (as root: see
 * `serverUser`). That user often cannot enter the checkout (in root's home, or any 0700 folder): neither the data
 * folder there nor the binaries in its node_modules. So then the cluster lives in a folder of its own under the
 * system temp dir, one per checkout (named by a hash of `dataDir`): the data folder (owned by `postgres`), the
 * server's log and, when that user cannot reach them where npm put them, a copy of the binaries.
 */
export async function chooseDataDir(
  checkout: { dataDir: string; logFile: string },
  binaries: Binaries,
  serverUser: PosixIds | null,
): Promise<Cluster> {
  if (!serverUser) return { binaries, dataDir: checkout.dataDir, logFile: checkout.logFile, serverUser };
  const hash = createHash('sha256').update(checkout.dataDir).digest('hex').slice(0, 12);
  const dir = join(tmpdir(), `reliable-mail-demo-${hash}`);
  await ensureRootOnlyFolder(dir, serverUser);
  const copy = join(dir, `postgresql-${binaries.version}`);
  const root = await reachableInstallation(binaries.root, serverUser, copy, () =>
    logger.log(`Copying the PostgreSQL binaries to ${copy}, where the "${USER}" user can run them (first start only)`),
  );
  return {
    binaries: { root, version: binaries.version },
    dataDir: join(dir, 'data'),
    logFile: join(dir, 'postgres.log'),
    serverUser,
  };
}
