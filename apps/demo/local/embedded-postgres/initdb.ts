import { chown, rm, writeFile } from 'node:fs/promises';
import { appendToLog, type Cluster, clusterError, logger, PASSWORD, runBinary, shown, USER } from './cluster.js';

/** Makes a new cluster in the (empty) data folder, with the superuser's password from a file no one else can read. */
export async function initdb(cluster: Cluster): Promise<void> {
  const { dataDir, serverUser } = cluster;
  logger.log(`Initialising a new PostgreSQL cluster in ${shown(dataDir)} (first start only)`);
  const passwordFile = `${dataDir}.password`;
  await writeFile(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
  if (serverUser) await chown(passwordFile, serverUser.uid, serverUser.gid);
  try {
    const { stdout, stderr } = await runBinary(cluster, 'initdb', [
      `--pgdata=${dataDir}`,
      `--username=${USER}`,
      `--pwfile=${passwordFile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--no-instructions',
    ]);
    appendToLog(cluster, `${stdout}${stderr}`);
  } catch (error) {
    throw await clusterError(cluster, 'initdb failed', error);
  } finally {
    await rm(passwordFile, { force: true });
  }
}
