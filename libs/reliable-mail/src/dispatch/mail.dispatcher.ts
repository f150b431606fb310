import { EntityManager } from '@mikro-orm/postgresql';
import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { MailEventPublisher } from '../events/mail-event.publisher.js';
import { MailMetrics } from '../metrics/mail-metrics.js';
import { OutboxRepository, type Settlement } from '../outbox/outbox.repository.js';
import { DISPATCHER_TIMEOUT_NAME, MAIL_TRANSPORTS, RESOLVED_OPTIONS } from '../reliable-mail.constants.js';
import type { ResolvedReliableMailOptions } from '../reliable-mail.options.js';
import { MailRenderer } from '../templates/mail-renderer.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';
import { Batcher } from './batcher.js';
import { LaneDispatcher, type SettleOutcome } from './lane.dispatcher.js';
import { RecurringTask } from './recurring-task.js';
import { WakeUpListener } from './wake-up.listener.js';

const SETTLE_BATCH = 100;
const REDELIVERY_TIMER = `${DISPATCHER_TIMEOUT_NAME}:event-redelivery`;

/** Runs one `LaneDispatcher` per lane, wakes them on NOTIFY, and re-emits events whose emitter died. */
@Injectable()
export class MailDispatcher implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('ReliableMail');
  private readonly em: EntityManager;
  private readonly lanes = new Map<string, LaneDispatcher>();
  private readonly redelivery: RecurringTask;

  constructor(
    em: EntityManager,
    private readonly repository: OutboxRepository,
    private readonly publisher: MailEventPublisher,
    private readonly wakeUp: WakeUpListener,
    private readonly scheduler: SchedulerRegistry,
    private readonly metrics: MailMetrics,
    @Inject(MAIL_TRANSPORTS) private readonly transports: Map<string, MailTransport>,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedReliableMailOptions,
    private readonly renderer: MailRenderer,
  ) {
    // A fork of its own: the loops must never join a transaction that happens to be open where a timer was armed.
    this.em = em.fork();
    this.redelivery = new RecurringTask(
      scheduler,
      REDELIVERY_TIMER,
      options.dispatcher.pollIntervalMs,
      () => this.publisher.redeliverUnconfirmed(),
      this.logger,
    );
  }

  /** When the least recently active lane last ran its loop; null before every lane has run once. */
  get lastTickAt(): Date | null {
    let oldest: Date | null = null;
    for (const lane of this.lanes.values()) {
      if (!lane.lastTickAt) return null;
      if (!oldest || lane.lastTickAt < oldest) oldest = lane.lastTickAt;
    }
    return oldest;
  }

  get enabled(): boolean {
    return this.options.dispatcher.enabled;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.dispatcher.enabled) return;
    const settler = new Batcher<Settlement, SettleOutcome>(async (settlements) => {
      const recorded = settlements.map((settlement) =>
        settlement.eventName && this.publisher.isListenedTo(settlement.eventName)
          ? settlement
          : { ...settlement, eventName: null },
      );
      const { applied } = await this.repository.settle(this.em, recorded, this.options.dispatcher.eventLeaseMs);
      return settlements.map((settlement) => ({
        applied: applied.has(settlement.id),
        event: applied.get(settlement.id) ?? null,
      }));
    }, SETTLE_BATCH);
    for (const lane of this.options.lanes) {
      this.lanes.set(
        lane.name,
        new LaneDispatcher(lane, {
          em: this.em,
          repository: this.repository,
          publisher: this.publisher,
          scheduler: this.scheduler,
          transport: this.transports.get(lane.name)!,
          renderer: this.renderer,
          settler,
          metrics: this.metrics,
          options: this.options,
          logger: this.logger,
        }),
      );
    }
    await this.wakeUp.start((lane) => this.wake(lane));
    for (const lane of this.lanes.values()) lane.start();
    this.redelivery.start(0);
    this.logger.log({
      msg: 'dispatcher started',
      workerId: this.options.dispatcher.workerId,
      lanes: [...this.lanes.keys()],
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.redelivery.stop();
    await this.wakeUp.stop();
    const unfinished = await Promise.all(
      [...this.lanes.values()].map((lane) => lane.stop(this.options.dispatcher.shutdownTimeoutMs)),
    );
    const inFlight = unfinished.reduce((sum, count) => sum + count, 0);
    if (inFlight > 0) {
      this.logger.warn({
        msg: 'shutdown timeout with sends in flight; their rows are claimed again after the lease',
        inFlight,
      });
    }
    await Promise.all([...new Set(this.transports.values())].map((transport) => transport.close()));
  }

  /** Wakes one lane's loop, or every lane's when no lane is named. */
  wake(lane?: string): void {
    if (lane && this.lanes.has(lane)) this.lanes.get(lane)!.wake();
    else for (const dispatcher of this.lanes.values()) dispatcher.wake();
  }
}
