import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { findFreePort } from '../apps/demo/local/free-port.js';
import { waitFor } from './support/test-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** Whether something accepts connections on the port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

// `npm start` as a user (or a process manager) runs and stops it: npm starts the script's shell, which must hand
// its process over to the app (`exec`), or npm's SIGTERM ends npm and the shell and leaves the app running, with
// its port and the capture server's taken.
describe('npm start', () => {
  let database: TestDatabase;
  let npm: ChildProcess | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    npm?.kill('SIGKILL');
    await database.drop();
  });

  it('stops the app, and frees its port, when npm is sent SIGTERM', async () => {
    const port = await findFreePort(3_100);
    npm = spawn('npm', ['start'], {
      cwd: REPO,
      env: { ...process.env, PORT: String(port), DATABASE_URL: database.url, NODE_OPTIONS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npm.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitFor('the demo listening', async () => output.includes(`listening on http://localhost:${port}`), 60_000);
    expect(await listening(port)).toBe(true);

    const exited = once(npm, 'exit');
    npm.kill('SIGTERM');
    await exited;
    await waitFor('the port freed', async () => !(await listening(port)), 15_000);
    expect(output).toContain('SIGTERM received: shutting down');
  }, 90_000);
});
