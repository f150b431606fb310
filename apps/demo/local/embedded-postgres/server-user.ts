import { lchown, lstat, readdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { execFileAsync, logger, type PosixIds, USER } from './cluster.js';

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

/**
 * The user the server must run as: PostgreSQL refuses to run as root, so a demo started by root runs it as
 * `postgres` (created if missing). Null for anyone else, who runs it as themselves.
 */
export async function serverUser(): Promise<PosixIds | null> {
  if (process.getuid?.() !== 0) return null;
  return (await idsOf(USER)) ?? (await createPostgresUser());
}

/** lchown: a link in the tree is never followed, so none can hand one of root's files to the server's user. */
export async function chownTree(path: string, { uid, gid }: PosixIds): Promise<void> {
  const info = await lstat(path);
  if (info.uid !== uid || info.gid !== gid) await lchown(path, uid, gid);
  if (info.isDirectory()) {
    for (const entry of await readdir(path)) await chownTree(join(path, entry), { uid, gid });
  }
}

/** The first folder on the way to `path` that the user `ids` cannot enter (by its primary group only), or null. */
export async function unreachableFolder(path: string, ids: PosixIds): Promise<string | null> {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const info = await stat(dir);
    const searchable =
      info.uid === ids.uid ? info.mode & 0o100 : info.gid === ids.gid ? info.mode & 0o010 : info.mode & 0o001;
    if (!searchable) return dir;
    if (dirname(dir) === dir) return null;
  }
}

/** As root the server runs as `postgres`, which must be able to reach its files through every parent folder. */
export async function checkReachable(path: string, ids: PosixIds): Promise<void> {
  const dir = await unreachableFolder(path, ids);
  if (dir !== null) {
    throw new Error(
      `PostgreSQL runs as the "${USER}" user when started by root, and that user cannot enter ${dir} (on the way ` +
        `to ${path}). Point TMPDIR at a folder it can enter, or set DATABASE_URL.`,
    );
  }
}
