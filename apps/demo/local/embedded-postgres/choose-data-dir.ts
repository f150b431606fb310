import { createHash } from 'node:crypto';
import { chmod, cp, lstat, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Binaries, type Cluster, logger, type PosixIds, USER } from './cluster.js';
import { checkReachable } from './server-user.js';

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

/** Copied once per version; the copy is made beside its place and renamed, so an interrupted one is never used. */
async function copyBinaries(binaries: Binaries, dir: string): Promise<Binaries> {
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
  return { root: copy, version: binaries.version };
}

/**
 * Where the cluster lives: in the checkout's `dataDir`, unless the server runs as another user (as root: see
 * `serverUser`). That user often cannot enter the checkout (in root's home, or any 0700 folder): neither the data
 * folder there nor the binaries in its node_modules. So then the cluster lives in a folder of its own under the
 * system temp dir, one per checkout (named by a hash of `dataDir`): a copy of the binaries, the data folder (owned by
 * `postgres`) and the server's log.
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
  return {
    binaries: await copyBinaries(binaries, dir),
    dataDir: join(dir, 'data'),
    logFile: join(dir, 'postgres.log'),
    serverUser,
  };
}
