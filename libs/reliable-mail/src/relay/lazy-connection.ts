/**
 * A broker connection made at its first use and shared by every publication meanwhile. One that fails to connect, or
 * that ends later (`ended`, called by the client's close event: a broker restart), is made again at the next use.
 */
export class LazyConnection<T> {
  private connecting: Promise<T> | null = null;

  constructor(
    private readonly connect: (ended: () => void) => Promise<T>,
    private readonly disconnect: (connection: T) => Promise<void>,
  ) {}

  get(): Promise<T> {
    if (this.connecting) return this.connecting;
    const connecting: Promise<T> = this.connect(() => this.forget(connecting));
    this.connecting = connecting;
    connecting.catch(() => this.forget(connecting));
    return connecting;
  }

  /** Closes the connection, if one was made; the next use would make another. */
  async close(): Promise<void> {
    const connecting = this.connecting;
    this.connecting = null;
    const connection = await connecting?.catch(() => null);
    if (connection) await this.disconnect(connection);
  }

  private forget(connecting: Promise<T>): void {
    if (this.connecting === connecting) this.connecting = null;
  }
}
