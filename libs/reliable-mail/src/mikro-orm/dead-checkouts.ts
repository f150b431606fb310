import type pg from 'pg';

/**
 * How long shutdown waits for a checked-out connection of the app's pool to show that it has ended: a backend that
 * was killed sends its error before it closes the socket, so the caller's statement may fail (and the caller's
 * transaction be left unreleased) a moment before the connection's end is seen; under load that moment was long
 * enough for a close that gave back nothing to hang (2 runs in 8 on two busy cores).
 */
const END_GRACE_MS = 1_000;

/**
 * The connections of the app's own pool (MikroORM's) whose connection ended while they were checked out.
 *
 * A MikroORM transaction whose connection is killed (`pg_terminate_backend`, a failover, a restart) never gives it
 * back: its rollback fails, and Kysely's release comes after the rollback (kysely-org/kysely#1990). pg-pool's
 * `end()`, which `orm.close()` and so MikroOrmModule's shutdown hook await, waits for every checked-out connection
 * to come back, so `app.close()` would never return. Nothing can use such a connection again and nothing will
 * give it back: at shutdown it is given back as broken, which makes pg-pool drop it.
 */
export class DeadCheckouts {
  private readonly checkedOut = new Set<pg.PoolClient>();
  /** Resolves when the connection ends; made when the connection is first checked out. */
  private readonly ends = new WeakMap<pg.PoolClient, Promise<void>>();

  constructor(private readonly pool: pg.Pool) {
    pool.on('acquire', this.acquired);
    pool.on('release', this.released);
    pool.on('remove', this.removed);
  }

  /**
   * Stops watching, and gives back every checked-out connection that has ended, or ends within `END_GRACE_MS`;
   * returns how many. A connection still in use by a live transaction is left to its holder.
   */
  async giveBack(): Promise<number> {
    this.pool.off('acquire', this.acquired);
    this.pool.off('release', this.released);
    this.pool.off('remove', this.removed);
    const held = [...this.checkedOut];
    this.checkedOut.clear();
    if (held.length === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<false>((resolve) => (timer = setTimeout(resolve, END_GRACE_MS, false)));
    const ended = await Promise.all(
      held.map((client) => Promise.race([this.ends.get(client)!.then(() => true), grace])),
    );
    clearTimeout(timer);
    const dead = held.filter((_client, index) => ended[index]);
    for (const client of dead) {
      client.release(new Error('its connection ended while checked out, and nothing gave it back'));
    }
    return dead.length;
  }

  private readonly acquired = (client: pg.PoolClient): void => {
    this.checkedOut.add(client);
    if (!this.ends.has(client)) this.ends.set(client, new Promise((resolve) => client.once('end', resolve)));
  };

  private readonly released = (_error: Error, client: pg.PoolClient): void => {
    this.checkedOut.delete(client);
  };

  private readonly removed = (client: pg.PoolClient): void => {
    this.checkedOut.delete(client);
  };
}
