import { EntityManager } from '@mikro-orm/postgresql';
import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { OutboxOperationsRepository } from '../outbox/outbox-operations.repository.js';
import { DISPATCHER_TIMEOUT_NAME, RESOLVED_OPTIONS } from '../reliable-mail.constants.js';
import type { ResolvedReliableMailOptions } from '../reliable-mail.options.js';

const RETENTION_TIMER = `${DISPATCHER_TIMEOUT_NAME}:retention`;

/**
 * Deletes sent, cancelled, expired and suppressed rows past their retention, in small batches that skip locked
 * rows, so the table stays small without a long lock. Failed and dead rows wait for an operator.
 */
@Injectable()
export class OutboxRetention implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('ReliableMail');
  private readonly em: EntityManager;
  private stopping = false;

  constructor(
    em: EntityManager,
    private readonly operations: OutboxOperationsRepository,
    private readonly scheduler: SchedulerRegistry,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedReliableMailOptions,
  ) {
    this.em = em.fork();
  }

  onApplicationBootstrap(): void {
    if (this.options.retention.enabled) this.schedule(this.options.retention.intervalMs);
  }

  beforeApplicationShutdown(): void {
    this.stopping = true;
    if (this.scheduler.doesExist('timeout', RETENTION_TIMER)) this.scheduler.deleteTimeout(RETENTION_TIMER);
  }

  /** Deletes every row past retention, batch by batch; returns how many. */
  async run(): Promise<number> {
    const { keepClosedForMs, batchSize } = this.options.retention;
    let deleted = 0;
    for (;;) {
      const count = await this.operations.deleteRetained(this.em, keepClosedForMs, batchSize);
      deleted += count;
      if (count < batchSize || this.stopping) break;
    }
    if (deleted > 0) this.logger.log({ msg: 'retention deleted closed rows', count: deleted, olderThanMs: keepClosedForMs });
    return deleted;
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    const timer = setTimeout(async () => {
      this.scheduler.deleteTimeout(RETENTION_TIMER);
      try {
        await this.run();
      } catch (error) {
        this.logger.error({ msg: 'retention failed; trying again at the next interval', error: String(error) });
      }
      this.schedule(this.options.retention.intervalMs);
    }, delayMs);
    timer.unref();
    this.scheduler.addTimeout(RETENTION_TIMER, timer);
  }
}
