import { execFile } from 'node:child_process';
import { appendFile, readFile } from 'node:fs/promises';
import { isAbsolute, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { Logger } from '@nestjs/common';

export const execFileAsync = promisify(execFile);

/** The cluster's superuser, and the system user the server runs as when the demo is started by root. */
export const USER = 'postgres';
export const PASSWORD = 'postgres';
export const PG_CTL_TIMEOUT_S = 60;
const LOG_TAIL_LINES = 30;

export const logger = new Logger('EmbeddedPostgres');

export interface PosixIds {
  uid: number;
  gid: number;
}

/** The PostgreSQL binaries: the folder holding bin/, lib/ and share/, and the version of their package. */
export interface Binaries {
  root: string;
  version: string;
}

/** Where a cluster is, and what runs it: what each step of the start and stop takes. */
export interface Cluster {
  binaries: Binaries;
  dataDir: string;
  logFile: string;
  /** The user the server runs as when the demo runs as root; null: as the demo's own user. */
  serverUser: PosixIds | null;
}

/** Who started the server on the data folder: which demo process, so that another one can tell it is in use. */
export const ownerFileOf = (cluster: Cluster) => `${cluster.dataDir}.owner`;

/** Runs one of the cluster's binaries as the server's user, with messages in English for the errors we show. */
export function runBinary(cluster: Cluster, name: string, args: string[]) {
  return execFileAsync(join(cluster.binaries.root, 'bin', name), args, {
    ...(cluster.serverUser ?? {}),
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
}

export const runPgCtl = (cluster: Cluster, args: string[]) =>
  runBinary(cluster, 'pg_ctl', ['-D', cluster.dataDir, ...args]);

/** The server's log is where a user looks when it will not start, so the demo's own notes about it go there too. */
export function appendToLog(cluster: Cluster, message: string): void {
  void appendFile(cluster.logFile, `${message}\n`).catch(() => undefined);
}

/** A path as the user best finds it: relative when it is inside the working folder. */
export function shown(path: string): string {
  const fromHere = relative(process.cwd(), path);
  return fromHere === '' || fromHere.startsWith('..') || isAbsolute(fromHere) ? path : fromHere;
}

async function tailOf(file: string): Promise<string> {
  try {
    const lines = (await readFile(file, 'utf8')).split('\n').filter((line) => line.trim().length > 0);
    return lines.slice(-LOG_TAIL_LINES).join('\n  ');
  } catch {
    return '(no log)';
  }
}

/**
 * The error for a failed step, with the end of the server's log: pg_ctl's own message rarely says why ("could not
 * start server"), the log does.
 */
export async function clusterError(cluster: Cluster, what: string, error: unknown): Promise<Error> {
  const stderr = (error as { stderr?: string }).stderr?.trim();
  const reason = stderr || (error instanceof Error ? error.message : String(error));
  return new Error(
    `${what}: ${reason}\nLast lines of ${shown(cluster.logFile)}:\n  ${await tailOf(cluster.logFile)}\n` +
      `If the data folder is damaged or was made by another PostgreSQL version, delete ${shown(cluster.dataDir)} and start again.`,
  );
}
