import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';

/** What a connection does with what either side sends. */
type Passage = 'forwarding' | 'black-holed' | 'held';

interface Direction {
  from: Socket;
  to: Socket;
  /** What `from` sent while the connection was held, delivered at `heal`. */
  held: Buffer[];
  /** `from` ended while the connection was held: the end is passed on after the held data. */
  endHeld: boolean;
}

interface ProxiedConnection {
  passage: Passage;
  directions: [Direction, Direction];
  closedSides: number;
}

/**
 * A TCP proxy on 127.0.0.1 in front of a server, for network faults: connections that go silent while they stay
 * open (`blackHole`), a partition whose held traffic arrives late once it heals (`partition`, `heal`), and
 * connections reset at once (`resetAll`). An upstream that refuses the connection is passed on as a reset of the
 * accepted client connection.
 */
export class TcpProxy {
  /** Client connections accepted since the start. */
  connectionsOpened = 0;
  private readonly connections = new Set<ProxiedConnection>();
  private partitioned = false;

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
      connection.passage = 'black-holed';
      for (const direction of connection.directions) direction.held = [];
    }
  }

  /**
   * Cuts the clients off from the server until `heal`, as a network partition does, where TCP keeps retransmitting:
   * nothing passes either way, on the connections open now or on those opened meanwhile (so a client's connect
   * timeout ends those), and what each side sends, or a close, is held for delivery when the partition heals.
   */
  partition(): void {
    this.partitioned = true;
    for (const connection of this.connections) if (connection.passage === 'forwarding') connection.passage = 'held';
  }

  /**
   * Ends the partition: what was held arrives, late (a statement its client gave up on runs then), and the held
   * connections forward again; a side that closed meanwhile is closed after its data, as TCP delivers it.
   */
  heal(): void {
    this.partitioned = false;
    for (const connection of this.connections) {
      if (connection.passage !== 'held') continue;
      connection.passage = 'forwarding';
      for (const direction of connection.directions) {
        for (const chunk of direction.held.splice(0)) if (direction.to.writable) direction.to.write(chunk);
        if (direction.endHeld) direction.to.end();
      }
    }
  }

  /** Resets (RST) both sides of every connection, black-holed and held ones included. */
  resetAll(): void {
    for (const { directions } of this.connections) for (const { from } of directions) from.resetAndDestroy();
  }

  /** Resets every connection and stops accepting new ones. */
  async close(): Promise<void> {
    this.resetAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(client: Socket): void {
    this.connectionsOpened++;
    const upstream = connect(this.targetPort, this.targetHost);
    const connection: ProxiedConnection = {
      passage: this.partitioned ? 'held' : 'forwarding',
      directions: [
        { from: client, to: upstream, held: [], endHeld: false },
        { from: upstream, to: client, held: [], endHeld: false },
      ],
      closedSides: 0,
    };
    this.connections.add(connection);
    for (const direction of connection.directions) {
      const { from, to } = direction;
      from.on('data', (chunk: Buffer) => {
        if (connection.passage === 'forwarding') to.write(chunk);
        else if (connection.passage === 'held') direction.held.push(chunk);
      });
      from.on('end', () => {
        if (connection.passage === 'forwarding') to.end();
        else if (connection.passage === 'held') direction.endHeld = true;
      });
      // A side that fails (reset, refused) is passed on as a reset while the connection forwards. Without this
      // listener the error would end the test process.
      from.on('error', () => {
        if (connection.passage === 'forwarding') to.resetAndDestroy();
      });
      from.on('close', () => {
        if (++connection.closedSides === 2) this.connections.delete(connection);
      });
    }
  }
}
