import { createServer } from 'node:net';

function tryListen(port: number, host: string): Promise<number | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(null));
    server.listen({ port, host, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : null;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * The preferred port if nothing listens on it, else the next free one of the following few, else any free port.
 * Another process can still take the port before the caller binds it; callers bind right away.
 */
export async function findFreePort(preferred: number, host = '127.0.0.1', attempts = 10): Promise<number> {
  for (let port = preferred; port < preferred + attempts && port <= 65_535; port++) {
    const free = await tryListen(port, host);
    if (free !== null) return free;
  }
  const any = await tryListen(0, host);
  if (any === null) throw new Error(`No free TCP port on ${host}`);
  return any;
}
