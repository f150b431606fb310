import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';

interface ProxiedConnection {
  client: Socket;
  upstream: Socket;
  blackHoled: boolean;
  closedSides: number;
}

/**
 * A TCP proxy on 127.0.0.1 in front of a server, for network faults: connections that go silent while they stay
 * open (`blackHole`), and connections reset at once (`resetAll`). An upstream that refuses the connection is passed
 * on as a reset of the accepted client connection.
 */
export class TcpProxy {
  /** Client connections accepted since the start. */
  connectionsOpened = 0;
  private readonly connections = new Set<ProxiedConnection>();

  private constructor(
    private readonly server: Server,
    private readonly targetPort: number,
    private readonly targetHost: string,
  ) {}

  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server, targetPort, targetHost);
    server.on('connection', (client) => proxy.forward(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    // Errors of an accepting server (EMFILE) must not end the test process; the client sees its connect fail.
    server.on('error', () => undefined);
    return proxy;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Connections of which at least one side (client or upstream) is still open. */
  get open(): number {
    return this.connections.size;
  }

  /**
   * The connections open now stop forwarding in both directions, and stay open: what each side sends is read and
   * dropped, so writes keep succeeding and a closed side is not passed on, as with a peer that went silent (a
   * network partition, a frozen host). The proxy's own TCP stack still acknowledges, so TCP keepalive does not
   * notice; only the client's timeouts can. Connections opened afterwards are forwarded normally.
   */
  blackHole(): void {
    for (const connection of this.connections) {
      connection.blackHoled = true;
      connection.client.unpipe(connection.upstream);
      connection.upstream.unpipe(connection.client);
      // unpipe paused them; flowing without a 'data' listener discards what arrives.
      connection.client.resume();
      connection.upstream.resume();
    }
  }

  /** Resets (RST) both sides of every connection, black-holed ones included. */
  resetAll(): void {
    for (const { client, upstream } of this.connections) {
      client.resetAndDestroy();
      upstream.resetAndDestroy();
    }
  }

  /** Resets every connection and stops accepting new ones. */
  async close(): Promise<void> {
    this.resetAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(client: Socket): void {
    this.connectionsOpened++;
    const upstream = connect(this.targetPort, this.targetHost);
    const connection: ProxiedConnection = { client, upstream, blackHoled: false, closedSides: 0 };
    this.connections.add(connection);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ]) {
      from.pipe(to);
      // A side that fails (reset, refused) is passed on as a reset, unless the connection is black-holed. Without
      // this listener the error would end the test process.
      from.on('error', () => {
        if (!connection.blackHoled) to.resetAndDestroy();
      });
      from.on('close', () => {
        if (++connection.closedSides === 2) this.connections.delete(connection);
      });
    }
  }
}
