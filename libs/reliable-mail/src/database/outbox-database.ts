import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import pg from 'pg';
import type { DeadCheckouts } from '../mikro-orm/dead-checkouts.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import { OutboxSchema } from '../schema/outbox-schema.js';
import {
  type AvailabilityChange,
  DatabaseAvailability,
  isOutage,
  PoolExhaustedError,
} from './database-availability.js';
import { type ConnectionPlan, connectionPlan } from './connection-plan.js';
import { type QueryBound, type SqlClient, type Statement, statementsOnClient } from './sql-client.js';
import { statementBoundMs } from './statement-bound.js';
import { sqlStateOf, StatementNotSentError } from './statement-refusal.js';

export { CONNECTION_SETTINGS } from './connection-plan.js';

/** A half-open connection (the server vanished without a reset) is found by TCP keepalive after this idle time. */
const KEEPALIVE_DELAY_MS = 10_000;
/**
 * How long shutdown waits for the pool's connections to come back, after the dispatcher's own bound
 * (`dispatcher.shutdownTimeoutMs`): a healthy server answers what is left in milliseconds, and a connection stuck on
 * a dead socket would never come back.
 */
export const POOL_CLOSE_TIMEOUT_MS = 5_000;

/**
 * The connections reliable-mail's own work runs on: the dispatcher, the wake-up listener, the event publisher,
 * retention, health and metrics. A pool of its own, apart from the app's: a database outage or a hung connection
 * here can neither exhaust the pool the business transactions use nor be stalled by it. Every statement is bounded
 * twice: `statement_timeout` on the server, and a client-side timeout a little longer that catches a server which
 * no longer answers at all (a failover that left the old connection half-open), after which the connection is
 * discarded, and so is every connection idle then that has not answered since: what silenced one (a partition, a
 * vanished primary) silenced them all, and each would otherwise cost a whole bound to find out. A caller may bound a
 * statement more tightly still (`QueryBound`: a settle by its lease), the wait for a connection included.
 * Statements with a name are parsed and planned once per connection (see connection-plan.ts), and how the settings
 * reach the server depends on `database.pooler` (`plan`). Where the connections go is set by the start
 * (`connectTo`): `database.url`, or the app's own MikroORM settings. An outage of the database is logged here, once as
 * it begins and once as it ends (`availability`), rather than by each task it fails.
 */
@Injectable()
export class OutboxDatabase implements SqlClient, OnApplicationShutdown {
  private readonly logger = new Logger('ReliableMail');
  private pool: Promise<pg.Pool> | null = null;
  private config: pg.ClientConfig | null = null;
  /** After shutdown a late statement (a send that outlived the shutdown bound) fails instead of opening a new pool. */
  private closed = false;
  /** The app's pool's connections that died checked out, given back at shutdown so that the app's close returns. */
  private appPoolDeadCheckouts: DeadCheckouts | null = null;
  /** When each connection last answered (or was opened), on the `performance.now()` clock. */
  private readonly answeredAt = new WeakMap<pg.ClientBase, number>();
  /**
   * When a statement last went unanswered for its whole bound. A connection that has not answered since may have been
   * silenced with it, even one that answered after that statement was sent: the fault began at some point between.
   */
  private silentSince = -Infinity;
  /** Whether the database answers, from every statement's outcome: read by the dispatcher's summary. */
  readonly availability = new DatabaseAvailability();
  /** How the connections keep their settings and statements through `database.pooler`. */
  readonly plan: ConnectionPlan;
  /** The connections that have had `plan.onConnect`. */
  private readonly setUp = new WeakSet<pg.ClientBase>();
  /** Connections left in a transaction they could not roll back: never used again. */
  private readonly spoiled = new WeakSet<pg.ClientBase>();

  constructor(
    private readonly schema: OutboxSchema,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: Pick<ResolvedReliableMailOptions, 'database'>,
  ) {
    this.plan = connectionPlan(options.database);
  }

  async query<R>(statement: Statement, values: readonly unknown[], bound?: QueryBound): Promise<R[]> {
    if (this.closed)
      throw new StatementNotSentError("reliable-mail's database connections are closed: the app has shut down");
    const { name, text } = statement.in(await this.schema.tables());
    const { statementTimeoutMs } = this.options.database;
    const ownBoundMs = statementBoundMs(statementTimeoutMs);
    const timeoutMs = Math.min(bound?.timeoutMs ?? Infinity, ownBoundMs);
    if (!(timeoutMs > 0)) throw new StatementNotSentError('no time left for the statement');
    const deadline = performance.now() + timeoutMs;
    // As of the connection (see below), a caller's tighter bound passing says nothing of the database's availability.
    const ownBound = timeoutMs === ownBoundMs;
    const pool = await (this.pool ??= this.createPool());
    let client: pg.PoolClient;
    try {
      client = await this.checkOutAnswering(pool, deadline);
    } catch (error) {
      if (ownBound) this.noteAvailability(this.availability.failed(error, Date.now()));
      throw error;
    }
    const config: TimedQuery = {
      name: this.plan.namedStatements ? name : undefined,
      text,
      values: [...values],
      // pg reads 0 as no timeout at all.
      query_timeout: Math.max(1, Math.ceil(deadline - performance.now())),
    };
    // Only the client's own bound, with the statement itself given more than statement_timeout, shows the connection
    // silent when it passes: a live server would have cancelled the statement and said so (57014) within the client's
    // margin. A caller's tighter bound (a settle near its lease's end) passing says nothing of the connection.
    const silentIfUnanswered = ownBound && config.query_timeout > statementTimeoutMs;
    const sentAt = performance.now();
    try {
      const result = await this.run<R & pg.QueryResultRow>(client, config, deadline);
      this.answeredAt.set(client, performance.now());
      client.release();
      this.noteAvailability(this.availability.answered(Date.now()));
      return result.rows;
    } catch (error) {
      const answered = sqlStateOf(error) !== null;
      if (answered || ownBound) this.noteAvailability(this.availability.failed(error, Date.now()));
      if (answered) this.answeredAt.set(client, performance.now());
      else if (silentIfUnanswered && performance.now() - sentAt >= config.query_timeout)
        this.silentSince = performance.now();
      // A refusal leaves the connection as it was (pg-pool drops one whose session ended, a FATAL, all the same).
      // Without an answer it is never reused, as pool.query() would have it: pg-pool ends a connection released with
      // an error, and pg destroys the socket of one whose statement is still unanswered (a timeout) rather than wait
      // for goodbye.
      client.release(answered && !this.spoiled.has(client) ? undefined : error instanceof Error ? error : true);
      throw error;
    }
  }

  /**
   * Runs one statement on `client` as `plan` has it: after the connection's session settings, or in a transaction
   * of its own that sets them. Each step is bounded by what is left until `deadline`.
   */
  private async run<R extends pg.QueryResultRow>(
    client: pg.PoolClient,
    config: TimedQuery,
    deadline: number,
  ): Promise<pg.QueryResult<R>> {
    // PostgreSQL itself (pooler 'none'): the settings came at connect, and the statement goes as it is.
    if (this.plan.onConnect === null && !this.plan.statementInTransaction) return client.query<R>(config);
    const left = () => Math.max(1, Math.ceil(deadline - performance.now()));
    const step = (text: string): TimedQuery => ({ text, query_timeout: left() });
    await this.setUpSession(client, left());
    if (!this.plan.statementInTransaction) return client.query<R>(config);
    try {
      await client.query(step(this.plan.begin));
      const statement: TimedQuery = { ...config, query_timeout: left() };
      const result = await client.query<R>(statement);
      await client.query(step('commit'));
      return result;
    } catch (error) {
      // A refused statement leaves its transaction open and aborted; one unanswered leaves the connection unused.
      if (sqlStateOf(error) !== null) {
        const rolledBack = await client.query(step('rollback')).then(
          () => true,
          () => false,
        );
        if (!rolledBack) this.spoiled.add(client);
      }
      throw error;
    }
  }

  /** Sends `plan.onConnect` on a connection that has not had it. */
  private async setUpSession(client: pg.ClientBase, timeoutMs: number): Promise<void> {
    if (this.plan.onConnect === null || this.setUp.has(client)) return;
    const setUp: TimedQuery = { text: this.plan.onConnect, query_timeout: timeoutMs };
    await client.query(setUp);
    this.setUp.add(client);
  }

  /**
   * A connection of the pool that has answered since a statement last went unanswered. Throws
   * `StatementNotSentError` when there is none within the deadline, or none at all (refused, the pool closed).
   */
  private async checkOutAnswering(pool: pg.Pool, deadline: number): Promise<pg.PoolClient> {
    for (;;) {
      const left = deadline - performance.now();
      if (left <= 0) throw new StatementNotSentError('no time left for the statement');
      const client = await checkOut(pool, left, this.options.database);
      if ((this.answeredAt.get(client) ?? -Infinity) >= this.silentSince) return client;
      client.release(true);
    }
  }

  /**
   * Runs `work` in a transaction of reliable-mail's own, on one connection of the pool: an enqueueMany outside the
   * caller's transaction, which must keep nothing of a batch that fails.
   */
  async transaction<T>(work: (client: SqlClient) => Promise<T>): Promise<T> {
    if (this.closed)
      throw new StatementNotSentError("reliable-mail's database connections are closed: the app has shut down");
    const tables = await this.schema.tables();
    const pool = await (this.pool ??= this.createPool());
    const client = await this.checkOutAnswering(pool, performance.now() + this.options.database.connectTimeoutMs);
    try {
      await this.setUpSession(client, statementBoundMs(this.options.database.statementTimeoutMs));
      await client.query(this.plan.begin);
      const result = await work(statementsOnClient(client, tables));
      await client.query('commit');
      client.release();
      return result;
    } catch (error) {
      const rolledBack = await client.query('rollback').then(
        () => true,
        () => false,
      );
      // A connection that could not roll back is in no state to be used again.
      client.release(rolledBack ? undefined : true);
      throw error;
    }
  }

  /**
   * A connection outside the pool, for the start's own statements; the caller ends it. Under a pooler it has none of
   * the settings: the migration sets its own in each of its transactions, and the client's bound stays.
   */
  client(): pg.Client {
    return quietClient(this.connectionConfig());
  }

  /**
   * A connection outside every pool for LISTEN, a session that must stay open: where the pool connects, or to
   * `database.listenUrl` (`plan.listen`); the caller ends it. Not for a plan with no LISTEN (`plan.listen` null):
   * this would be a connection to the transaction pooler, where LISTEN hears nothing.
   */
  listenClient(): pg.Client {
    const { listenUrl } = this.options.database;
    const config = this.connectionConfig();
    if (listenUrl === null) return quietClient(config);
    // Only the bounds are kept: the pooler's address, credentials and TLS settings are not PostgreSQL's.
    const { application_name, keepAlive, keepAliveInitialDelayMillis, connectionTimeoutMillis, query_timeout } = config;
    return quietClient({
      connectionString: listenUrl,
      application_name,
      keepAlive,
      keepAliveInitialDelayMillis,
      connectionTimeoutMillis,
      query_timeout,
    });
  }

  /** The figures of the pool, for health and the soak test. */
  async poolFigures(): Promise<{ total: number; idle: number; waiting: number } | null> {
    if (!this.pool) return null;
    const pool = await this.pool;
    return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
  }

  /**
   * Where the connections go, with reliable-mail's bounds added (keepalive, timeouts); and, where the app's pool is
   * MikroORM's, its connections to give back at shutdown (see DeadCheckouts).
   */
  connectTo(base: pg.ClientConfig, appPoolDeadCheckouts: DeadCheckouts | null): void {
    const { statementTimeoutMs, connectTimeoutMs } = this.options.database;
    this.appPoolDeadCheckouts = appPoolDeadCheckouts;
    const { startup } = this.plan;
    this.config = {
      ...base,
      ...(startup && {
        options: `${base.options ?? ''} ${startup.options}`.trim(),
        statement_timeout: startup.statementTimeoutMs,
      }),
      application_name: 'reliable-mail',
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      connectionTimeoutMillis: connectTimeoutMs,
      query_timeout: statementBoundMs(statementTimeoutMs),
    };
  }

  /**
   * Runs before MikroOrmModule's shutdown, which ends the app's pool: Nest shuts global modules down last, the last
   * imported first, and ReliableMailModule is imported after MikroOrmModule or is not global.
   */
  async onApplicationShutdown(): Promise<void> {
    this.closed = true;
    const givenBack = (await this.appPoolDeadCheckouts?.giveBack()) ?? 0;
    if (givenBack > 0) {
      this.logger.warn({
        msg: "gave back connections of the app's pool that were killed while checked out and never given back (kysely-org/kysely#1990), so that it can close",
        connections: givenBack,
      });
    }
    if (!this.pool) return;
    const pool = await this.pool;
    this.pool = null;
    // pool.end() waits for every client, and a client stuck on a dead socket never comes back: bounded.
    const ended = pool.end().then(() => true);
    const timeout = new Promise<false>((resolve) => setTimeout(resolve, POOL_CLOSE_TIMEOUT_MS, false).unref());
    if (!(await Promise.race([ended, timeout]))) {
      this.logger.warn({ msg: 'the database pool did not close in time; its connections are left to the OS' });
    }
  }

  private async createPool(): Promise<pg.Pool> {
    const { poolSize, connectTimeoutMs } = this.options.database;
    const pool = new pg.Pool({
      ...this.connectionConfig(),
      max: poolSize,
      connectionTimeoutMillis: connectTimeoutMs,
      idleTimeoutMillis: 30_000,
    });
    pool.on('connect', (client) => {
      this.answeredAt.set(client, performance.now());
      // pg-pool leaves a checked-out client's errors to its holder, and the query in flight rejects anyway.
      client.on('error', () => undefined);
    });
    // An idle connection the server ended is dropped by the pool, and the next statement opens another: when the
    // server is going away, that statement's failure reports the outage, once; one session ended alone is no news.
    pool.on('error', (error) => {
      if (!isOutage(error)) this.logger.warn({ msg: 'an idle database connection failed', error: String(error) });
    });
    return pool;
  }

  /**
   * Logs the beginning and the end of an outage of the database; the failures between are only counted. Each is
   * one line of text: what an operator reads first in a console during an incident, printed on one line by any
   * logger (Nest's prints an object over several).
   */
  private noteAvailability(change: AvailabilityChange | null): void {
    if (change?.kind === 'unavailable') {
      this.logger.error(
        `the database is unavailable (${change.error}); reliable-mail keeps trying, quietly, and says when it answers again`,
      );
    } else if (change) {
      this.logger.log(
        `the database answers again after ${(change.unavailableForMs / 1_000).toFixed(1)} s unavailable; ` +
          `${change.failedMeanwhile} failed statements were not logged`,
      );
    }
  }

  private connectionConfig(): pg.ClientConfig {
    if (!this.config)
      throw new StatementNotSentError("reliable-mail's database connection is not set: the app has not started");
    return this.config;
  }
}

/** A statement with pg's client-side bound, which its QueryConfig type leaves out. */
type TimedQuery = pg.QueryConfig & { query_timeout: number };

/** A connection outside every pool whose errors while idle are left to its holder. */
function quietClient(config: pg.ClientConfig): pg.Client {
  const client = new pg.Client(config);
  // An error of an idle connection is an event: without a listener it would take the process down.
  client.on('error', () => undefined);
  return client;
}

/** pg-pool's error for a wait for a busy connection that outlasted its `connectionTimeoutMillis`. */
const POOL_WAIT_TIMEOUT = 'timeout exceeded when trying to connect';

/**
 * A connection of the pool within `timeoutMs` (pg-pool's own bound is `connectTimeoutMs`, which may be longer). One
 * that comes after the caller gave up goes back to the pool unused. A wait that ends without one is a
 * `PoolExhaustedError` when every connection of the pool was busy (pg-pool queues the request for the next one given
 * back), and a `StatementNotSentError` of the database when a new connection could not be opened in time.
 */
function checkOut(
  pool: pg.Pool,
  timeoutMs: number,
  { poolSize, connectTimeoutMs }: Pick<ResolvedReliableMailOptions['database'], 'poolSize' | 'connectTimeoutMs'>,
): Promise<pg.PoolClient> {
  const queued = pool.idleCount === 0 && pool.totalCount >= poolSize;
  const exhausted = (waitedMs: number) =>
    new PoolExhaustedError(
      `no database connection within ${Math.round(waitedMs)} ms: all ${poolSize} of reliable-mail's connections were busy (database.poolSize)`,
    );
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(
        queued
          ? exhausted(timeoutMs)
          : new StatementNotSentError(`no database connection within ${Math.round(timeoutMs)} ms`),
      );
    }, timeoutMs);
    pool.connect().then(
      (client) => {
        clearTimeout(timer);
        if (late) client.release();
        else resolve(client);
      },
      (error: Error) => {
        clearTimeout(timer);
        reject(
          error.message === POOL_WAIT_TIMEOUT
            ? exhausted(connectTimeoutMs)
            : new StatementNotSentError(error.message, { cause: error }),
        );
      },
    );
  });
}
