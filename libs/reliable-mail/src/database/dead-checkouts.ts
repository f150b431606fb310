import type pg from 'pg';

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
  private readonly ended = new WeakSet<pg.PoolClient>();
  private readonly watched = new WeakSet<pg.PoolClient>();

  constructor(private readonly pool: pg.Pool) {
    pool.on('acquire', this.acquired);
    pool.on('release', this.released);
    pool.on('remove', this.removed);
  }

  /** Stops watching, and gives back every checked-out connection that has ended; returns how many. */
  giveBack(): number {
    this.pool.off('acquire', this.acquired);
    this.pool.off('release', this.released);
    this.pool.off('remove', this.removed);
    const dead = [...this.checkedOut].filter((client) => this.ended.has(client));
    for (const client of dead) {
      client.release(new Error('its connection ended while checked out, and nothing gave it back'));
    }
    this.checkedOut.clear();
    return dead.length;
  }

  private readonly acquired = (client: pg.PoolClient): void => {
    this.checkedOut.add(client);
    if (this.watched.has(client)) return;
    this.watched.add(client);
    client.once('end', () => this.ended.add(client));
  };

  private readonly released = (_error: Error, client: pg.PoolClient): void => {
    this.checkedOut.delete(client);
  };

  private readonly removed = (client: pg.PoolClient): void => {
    this.checkedOut.delete(client);
  };
}
