// The enqueueing side of each queue system, as an application would use it, run by bench/run.ts.
import 'reflect-metadata';
import { MikroORM } from '@mikro-orm/postgresql';
import { EntityManager } from '@mikro-orm/postgresql';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { MailOutboxService, ReliableMailModule } from '@reliable-mail/nestjs';
import { makeWorkerUtils, runMigrations, type WorkerUtils } from 'graphile-worker';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { GRAPHILE_TASK, type JobPayload, mailFor, PG_BOSS_QUEUE, queueMessageId, type SystemName } from './common.js';
import { graphileLogger } from './graphile-logger.js';
import { ormConfig, reliableMailOptions } from './reliable-mail-config.js';

/** Producers share this pool size, so that 16 concurrent producers never wait for a connection. */
const PRODUCER_POOL = 20;

export interface Producer {
  readonly system: SystemName;
  /** Creates the schema (migrations). */
  setup(): Promise<void>;
  /** One email in one transaction of its own; resolves after the commit with the Message-ID. */
  enqueueOne(index: number, tag: string, lane?: string): Promise<string>;
  /** The same through a client whose commit the system cannot see (reliable-mail with a pg client), where it differs. */
  enqueueOneWithoutCommitHook?(index: number, tag: string): Promise<string>;
  /** Emails `start .. start+count-1` in one call of the system's batch API; resolves with their Message-IDs. */
  enqueueBatch(start: number, count: number, tag: string, lane?: string): Promise<string[]>;
  /** Removes every queued email, sent or not. */
  clear(): Promise<void>;
  /** Emails still to be sent (of a lane, where the system has lanes). */
  pending(lane?: string): Promise<number>;
  close(): Promise<void>;
}

const quietNestLogger: LoggerService = {
  log: () => undefined,
  error: (...parts: unknown[]) => console.error('[reliable-mail producer]', ...parts),
  warn: (...parts: unknown[]) => console.warn('[reliable-mail producer]', ...parts),
};

/** An app with ReliableMailModule whose dispatcher is off: it only enqueues, like a web instance. */
export class ReliableMailProducer implements Producer {
  readonly system = 'reliable-mail' as const;
  private app: INestApplicationContext | null = null;
  private outbox!: MailOutboxService;
  private em!: EntityManager;
  private pool: pg.Pool | null = null;

  constructor(
    private readonly databaseUrl: string,
    private readonly smtpPort: number,
  ) {}

  async setup(): Promise<void> {
    const orm = await MikroORM.init(ormConfig(this.databaseUrl));
    try {
      await orm.migrator.up();
    } finally {
      await orm.close();
    }
    const moduleRef = await Test.createTestingModule({
      imports: [
        MikroOrmModule.forRoot(ormConfig(this.databaseUrl, PRODUCER_POOL)),
        EventEmitterModule.forRoot(),
        ScheduleModule.forRoot(),
        ReliableMailModule.forRoot(reliableMailOptions(this.smtpPort, false)),
      ],
    })
      .setLogger(quietNestLogger)
      .compile();
    this.app = await moduleRef.init();
    this.outbox = this.app.get(MailOutboxService);
    this.em = this.app.get(EntityManager);
  }

  async enqueueOne(index: number, tag: string, lane?: string): Promise<string> {
    const result = await this.em.transactional(() => this.outbox.enqueue(mailFor(index, tag), lane ? { lane } : {}));
    return result.messageId;
  }

  /** As an app on plain pg (or Prisma, Drizzle, Kysely): no commit hook, so each insert NOTIFYs in its statement. */
  async enqueueOneWithoutCommitHook(index: number, tag: string): Promise<string> {
    this.pool ??= producerPool(this.databaseUrl, 'reliable-mail');
    const result = await inTransaction(this.pool, (client) => this.outbox.enqueue(mailFor(index, tag), { tx: client }));
    return result.messageId;
  }

  async enqueueBatch(start: number, count: number, tag: string, lane?: string): Promise<string[]> {
    const mails = Array.from({ length: count }, (_, offset) => ({ mail: mailFor(start + offset, tag) }));
    const results = await this.outbox.enqueueMany(mails, lane ? { lane } : {});
    return results.map((result) => result.messageId);
  }

  async clear(): Promise<void> {
    await this.em
      .fork()
      .execute(
        'truncate reliable_mail.mail_outbox, reliable_mail.mail_outbox_attempt, reliable_mail.mail_outbox_event, reliable_mail.mail_outbox_feedback, reliable_mail.mail_suppression',
      );
  }

  /** Puts `count` addresses that no bench email goes to on the suppression list, as hard bounces would. */
  async addSuppressions(count: number): Promise<void> {
    const em = this.em.fork();
    await em.execute(
      `insert into reliable_mail.mail_suppression (address, reason, source)
       select 'bounced' || g || '@example.com', '550 5.1.1 no such user', 'bounce' from generate_series(1, ?) g`,
      [count],
    );
    await em.execute('analyze reliable_mail.mail_suppression');
  }

  async pending(lane?: string): Promise<number> {
    const [row] = await this.em
      .fork()
      .execute<{ count: string }[]>(
        `select count(*) as count from reliable_mail.mail_outbox where status in ('pending', 'sending')${lane ? ' and lane = ?' : ''}`,
        lane ? [lane] : [],
      );
    return Number(row.count);
  }

  async close(): Promise<void> {
    await this.pool?.end();
    await this.app?.close();
  }
}

/**
 * A pool for a producer's transactions whose connections' errors are logged: one that ends under a checked-out
 * client (the database dropped at the end of a run) would otherwise throw from the client's 'error' event.
 */
function producerPool(databaseUrl: string, system: SystemName): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: PRODUCER_POOL });
  pool.on('error', (error) => console.error(`[${system} producer pool]`, String(error)));
  pool.on('connect', (client) =>
    client.on('error', (error) => console.error(`[${system} producer client]`, String(error))),
  );
  return pool;
}

/** Runs `work` in a transaction of a client of `pool`. */
async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const result = await work(client);
    await client.query('commit');
    return result;
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

export class PgBossProducer implements Producer {
  readonly system = 'pg-boss' as const;
  private readonly pool: pg.Pool;
  private readonly boss: PgBoss;

  constructor(databaseUrl: string) {
    this.pool = producerPool(databaseUrl, 'pg-boss');
    // A producer instance: no maintenance or cron of its own (the worker process runs those).
    this.boss = new PgBoss({ connectionString: databaseUrl, max: PRODUCER_POOL, supervise: false, schedule: false });
    this.boss.on('error', (error: unknown) => console.error('[pg-boss producer]', String(error)));
  }

  async setup(): Promise<void> {
    await this.boss.start();
    await this.boss.createQueue(PG_BOSS_QUEUE, { notify: true });
  }

  private payload(index: number, tag: string): JobPayload {
    return { ...mailFor(index, tag), messageId: queueMessageId('pg-boss', tag, index) };
  }

  async enqueueOne(index: number, tag: string): Promise<string> {
    const payload = this.payload(index, tag);
    // pg-boss's way of joining the application's transaction: its statements run through the given `db`.
    await inTransaction(this.pool, (client) =>
      this.boss.send(PG_BOSS_QUEUE, payload, { db: { executeSql: (text, values) => client.query(text, values) } }),
    );
    return payload.messageId;
  }

  async enqueueBatch(start: number, count: number, tag: string): Promise<string[]> {
    const payloads = Array.from({ length: count }, (_, offset) => this.payload(start + offset, tag));
    await this.boss.insert(
      PG_BOSS_QUEUE,
      payloads.map((data) => ({ data })),
    );
    return payloads.map((payload) => payload.messageId);
  }

  async clear(): Promise<void> {
    await this.boss.deleteAllJobs(PG_BOSS_QUEUE);
  }

  async pending(): Promise<number> {
    const queue = await this.boss.getQueue(PG_BOSS_QUEUE);
    return queue ? queue.queuedCount + queue.activeCount : 0;
  }

  async close(): Promise<void> {
    await this.boss.stop({ graceful: false, timeout: 5_000 });
    await this.pool.end();
  }
}

export class GraphileWorkerProducer implements Producer {
  readonly system = 'graphile-worker' as const;
  private readonly pool: pg.Pool;
  private utils: WorkerUtils | null = null;

  constructor(databaseUrl: string) {
    this.pool = producerPool(databaseUrl, 'graphile-worker');
  }

  async setup(): Promise<void> {
    await runMigrations({ pgPool: this.pool, logger: graphileLogger });
    this.utils = await makeWorkerUtils({ pgPool: this.pool, logger: graphileLogger });
  }

  private payload(index: number, tag: string): JobPayload {
    return { ...mailFor(index, tag), messageId: queueMessageId('graphile-worker', tag, index) };
  }

  async enqueueOne(index: number, tag: string): Promise<string> {
    const payload = this.payload(index, tag);
    // graphile-worker's documented way to enqueue from the application's own transaction: the add_job SQL function.
    await inTransaction(this.pool, (client) =>
      client.query(`select graphile_worker.add_job($1, $2::json)`, [GRAPHILE_TASK, JSON.stringify(payload)]),
    );
    return payload.messageId;
  }

  async enqueueBatch(start: number, count: number, tag: string): Promise<string[]> {
    const payloads = Array.from({ length: count }, (_, offset) => this.payload(start + offset, tag));
    await this.utils!.addJobs(payloads.map((payload) => ({ identifier: GRAPHILE_TASK, payload })));
    return payloads.map((payload) => payload.messageId);
  }

  async clear(): Promise<void> {
    await this.pool.query('delete from graphile_worker._private_jobs');
  }

  async pending(): Promise<number> {
    const { rows } = await this.pool.query<{ count: string }>('select count(*) as count from graphile_worker.jobs');
    return Number(rows[0].count);
  }

  async close(): Promise<void> {
    await this.utils?.release();
    await this.pool.end();
  }
}

/**
 * Removes every queued email and vacuums the system's database: pg-boss and graphile-worker clear with DELETE, and
 * with the server's autovacuum off (as it is where the documented figures were taken) the figures that follow would
 * meet the dead rows; reliable-mail's TRUNCATE leaves none.
 */
export async function clearAndVacuum(producer: Producer, url: string): Promise<void> {
  await producer.clear();
  const client = new pg.Client({ connectionString: url });
  client.on('error', (error) => console.error(`[bench] the vacuum's connection failed: ${String(error)}`));
  await client.connect();
  try {
    await client.query('vacuum');
  } finally {
    await client.end();
  }
}
