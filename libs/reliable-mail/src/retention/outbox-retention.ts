import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { OutboxTables } from '../schema/outbox-tables.js';
import { RecurringTask } from '../shared/recurring-task.js';
import { requireScheduler } from '../shared/require-scheduler.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import { deleteUnlinkedFeedback } from '../feedback/sql/feedback-retention.js';
import { partitionsAhead } from '../outbox/sql/health.js';
import { deleteRetained } from '../outbox/sql/retention.js';
import { type MigrationConnection, migrationConnection } from '../schema/migrate-schema.js';
import { OutboxSchema } from '../schema/outbox-schema.js';
import { retainPartitions } from './partition-retention.js';
import { DISPATCHER_TIMEOUT_NAME, RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';

const RETENTION_TIMER = `${DISPATCHER_TIMEOUT_NAME}:retention`;

/**
 * Deletes sent, cancelled, expired and suppressed rows past their retention (their attempts and feedback with
 * them), in small batches that skip locked rows, so the table stays small without a long lock. Failed and dead rows
 * wait for an operator. Feedback that named no row is deleted after the same time.
 *
 * A partitioned outbox (see schema/partitioned-layout.ts) deletes no row: each run makes the partitions of the days
 * ahead (`partitionsAhead`), then, for each day whose partitions hold only rows past retention once the rows it keeps
 * are moved forward, drops them whole.
 */
@Injectable()
export class OutboxRetention implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('ReliableMail');
  private task: RecurringTask | null = null;
  private stopping = false;

  constructor(
    private readonly database: OutboxDatabase,
    private readonly schema: OutboxSchema,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
    @Optional() private readonly scheduler?: SchedulerRegistry,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.retention.enabled) return;
    // Where the dispatcher runs as well, it is the option to name: retention only follows it, by default.
    const option = this.options.dispatcher.enabled ? 'dispatcher.enabled' : 'retention.enabled';
    const scheduler = requireScheduler(this.scheduler, option);
    this.task = new RecurringTask(
      scheduler,
      RETENTION_TIMER,
      this.options.retention.intervalMs,
      () => this.run(),
      this.logger,
    );
    this.task.start();
  }

  beforeApplicationShutdown(): void {
    this.stopping = true;
    this.task?.stop();
  }

  /**
   * Deletes every row past retention, batch by batch; returns how many. In a partitioned outbox, drops the
   * partitions that hold nothing it keeps, and returns how many days' partitions it dropped.
   */
  async run(): Promise<number> {
    const { keepClosedForMs } = this.options.retention;
    // The layout read through the pool (null days ahead: a plain outbox): a connection of its own, for DDL, is
    // opened only for a partitioned outbox.
    if ((await partitionsAhead(this.database)) !== null) {
      const tables = await this.schema.tables();
      const client = this.database.client();
      await client.connect();
      try {
        return await this.dropPartitions(migrationConnection(client), tables);
      } finally {
        await client.end();
      }
    }
    const deleted = await this.inBatches((batchSize) => deleteRetained(this.database, keepClosedForMs, batchSize));
    if (deleted > 0)
      this.logger.log({ msg: 'retention deleted closed rows', count: deleted, olderThanMs: keepClosedForMs });
    const feedback = await this.inBatches((batchSize) =>
      deleteUnlinkedFeedback(this.database, keepClosedForMs, batchSize),
    );
    if (feedback > 0) {
      this.logger.log({
        msg: 'retention deleted feedback that named no row',
        count: feedback,
        olderThanMs: keepClosedForMs,
      });
    }
    return deleted;
  }

  private async dropPartitions(connection: MigrationConnection, tables: OutboxTables): Promise<number> {
    const { keepClosedForMs } = this.options.retention;
    const { made, dropped, held } = await retainPartitions(
      connection,
      this.database,
      tables,
      this.options.retention,
      () => this.stopping,
    );
    if (made.length > 0) this.logger.log({ msg: 'retention made partitions ahead', days: made });
    if (dropped.length > 0) {
      this.logger.log({ msg: 'retention dropped partitions', partitions: dropped, olderThanMs: keepClosedForMs });
    }
    // A day held by a row being sent waits for its settle; one held run after run is a row stuck in `sending`.
    for (const { partition, rows } of held) {
      this.logger.warn({ msg: 'retention left a partition it keeps rows of', partition, rows });
    }
    return dropped.length;
  }

  private async inBatches(deleteBatch: (batchSize: number) => Promise<number>): Promise<number> {
    const { batchSize } = this.options.retention;
    let deleted = 0;
    for (;;) {
      const count = await deleteBatch(batchSize);
      deleted += count;
      if (count < batchSize || this.stopping) return deleted;
    }
  }
}
