/**
 * A broker connection made at its first use and shared by every publication meanwhile. One that fails to connect, or
 * that ends later (`ended`, called by the client's close event: a broker restart), is made again at the next use. A
 * connect that has not settled within `connectTimeoutMs` (a broker that accepts the socket mid-restart and answers
 * nothing) is given up on, and closed should it connect after all: a hung connect would otherwise hold every later
 * publication.
 */
export class LazyConnection<T> {
  private connecting: Promise<T> | null = null;

  constructor(
    private readonly connect: (ended: () => void) => Promise<T>,
    private readonly disconnect: (connection: T) => Promise<void>,
    private readonly connectTimeoutMs: number,
  ) {}

  get(): Promise<T> {
    if (this.connecting) return this.connecting;
    const connecting: Promise<T> = this.bounded(this.connect(() => this.forget(connecting)));
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

  private bounded(connecting: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        reject(new Error(`not connected within ${this.connectTimeoutMs} ms`));
      }, this.connectTimeoutMs);
      timer.unref();
      connecting.then(
        (connection) => {
          clearTimeout(timer);
          // Through a promise: a disconnect that throws at once is caught too.
          if (late)
            void Promise.resolve(connection)
              .then(this.disconnect)
              .catch(() => undefined);
          else resolve(connection);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  }

  private forget(connecting: Promise<T>): void {
    if (this.connecting === connecting) this.connecting = null;
  }
}
