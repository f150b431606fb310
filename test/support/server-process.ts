import { type ChildProcess, spawn } from 'node:child_process';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';

const LOG_FILE = 'server.log';
const LOG_TAIL_LINES = 20;

/** A server a test started as its child, and when it has exited (or could not be run). */
export interface RunningServer {
  child: ChildProcess;
  exited: Promise<void>;
}

export interface LoggedServerOptions {
  /** The server's environment; the test process's by default. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Runs `command` in `folder`, its output and errors appended to the folder's `server.log`. `logStart` is where in
 * that log this run's lines begin (a restart appends to the previous run's), for `logTail`.
 */
export async function startLoggedServer(
  folder: string,
  command: string,
  args: string[],
  options: LoggedServerOptions = {},
): Promise<{ server: RunningServer; logStart: number }> {
  const log = await open(join(folder, LOG_FILE), 'a');
  const logStart = (await log.stat()).size;
  let child: ChildProcess;
  try {
    child = spawn(command, args, { cwd: folder, env: options.env, stdio: ['ignore', log.fd, log.fd] });
  } finally {
    await log.close();
  }
  // 'error' (the command could not be run) must be listened to, or it would end the test process.
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()).once('error', () => resolve()));
  return { server: { child, exited }, logStart };
}

/** The last lines of the folder's `server.log` from `logStart` on, indented to follow the first line of a message. */
export async function logTail(folder: string, logStart: number): Promise<string> {
  return (await readFile(join(folder, LOG_FILE), 'utf8'))
    .slice(logStart)
    .trim()
    .split('\n')
    .slice(-LOG_TAIL_LINES)
    .join('\n  ');
}
