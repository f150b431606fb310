import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { MailEventPublisher } from '../events/mail-event.publisher.js';
import { MailMetrics } from '../metrics/mail-metrics.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import { statementBoundMs } from '../database/statement-bound.js';
import { DISPATCHER_TIMEOUT_NAME, MAIL_TRANSPORTS, RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import type { ResolvedLane, ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { MailRenderer } from './mail-renderer.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';
import { undeclaredLanes } from '../outbox/sql/health.js';
import { RecurringTask } from '../shared/recurring-task.js';
import { requireScheduler } from '../shared/require-scheduler.js';
import { Delivery } from './delivery.js';
import { type SendQuotaState, SharedSendQuota } from '../quota/index.js';
import { summaryOf } from './dispatch-summary.js';
import { type DrainReport, drainDue } from './due-drain.js';
import { InstanceHeartbeat } from './instance-heartbeat.js';
import { LaneLoop } from './lane-loop.js';
import { LanePriorities } from './lane-priorities.js';
import type { LanePause } from './lane-throttle.js';
import { Settler } from './settler.js';
import { WakeUpListener, type WakeUpState } from './wake-up.listener.js';

const REDELIVERY_TIMER = `${DISPATCHER_TIMEOUT_NAME}:event-redelivery`;
const SUMMARY_TIMER = `${DISPATCHER_TIMEOUT_NAME}:summary`;

/**
 * Runs one `LaneLoop` per lane, wakes them on NOTIFY, re-emits events whose emitter died, and keeps the instance's
 * heartbeat and lane states in the instance table for the console.
 */
@Injectable()
export class MailDispatcher implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('ReliableMail');
  private readonly lanes = new Map<string, LaneLoop>();
  private redelivery: RecurringTask | null = null;
  private summary: RecurringTask | null = null;
  private heartbeat: InstanceHeartbeat | null = null;

  constructor(
    private readonly database: OutboxDatabase,
    private readonly publisher: MailEventPublisher,
    private readonly wakeUp: WakeUpListener,
    private readonly metrics: MailMetrics,
    @Inject(MAIL_TRANSPORTS) private readonly transports: Map<string, MailTransport>,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
    private readonly renderer: MailRenderer,
    @Optional() private readonly scheduler?: SchedulerRegistry,
  ) {}

  /**
   * When the least recently active lane last showed that it runs (`LaneLoop.activeAt`). A lane still in its first
   * tick counts from its start, so that a health check right after start-up does not fail for it, while a first
   * claim that hangs is still found once `health.maxDispatcherIdleMs` has passed. Null before the lanes start.
   */
  get lastActiveAt(): Date | null {
    let oldest: Date | null = null;
    for (const lane of this.lanes.values()) {
      const activeAt = lane.activeAt;
      if (!activeAt) return null;
      if (!oldest || activeAt < oldest) oldest = activeAt;
    }
    return oldest;
  }

  /** Each lane's pause (by its server's outage or its rate limiting), or null while it sends freely. */
  get lanePauses(): Record<string, LanePause | null> {
    return Object.fromEntries([...this.lanes].map(([name, lane]) => [name, lane.pausedFor]));
  }

  /** Each lane's shared quota as its latest take found it; lanes without one are left out. */
  get laneQuotas(): Record<string, SendQuotaState> {
    const states: Record<string, SendQuotaState> = {};
    for (const [name, lane] of this.lanes) {
      const state = lane.quotaState;
      if (state) states[name] = state;
    }
    return states;
  }

  /** Whether the wake-up listener is listening; polling covers for it while it is not. */
  get wakeUpState(): WakeUpState {
    return this.wakeUp.state;
  }

  get enabled(): boolean {
    return this.options.dispatcher.enabled;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.dispatcher.enabled) return;
    const scheduler = requireScheduler(this.scheduler, 'dispatcher.enabled');
    this.redelivery = new RecurringTask(
      scheduler,
      REDELIVERY_TIMER,
      this.options.dispatcher.pollIntervalMs,
      () => this.publisher.redeliverUnconfirmed(),
      this.logger,
    );
    const settler = this.settler();
    const priorities = new LanePriorities(this.options.lanes);
    for (const lane of this.options.lanes) {
      this.lanes.set(
        lane.name,
        new LaneLoop(lane, {
          database: this.database,
          scheduler,
          delivery: this.deliveryFor(lane),
          settler,
          priorities,
          quota: lane.quota
            ? new SharedSendQuota(this.database, {
                lane: lane.name,
                quota: lane.quota,
                transport: this.transports.get(lane.name)!,
                logger: this.logger,
              })
            : null,
          publisher: this.publisher,
          metrics: this.metrics,
          options: this.options,
          logger: this.logger,
        }),
      );
    }
    for (const transport of new Set(this.transports.values())) this.warm(transport);
    this.wakeUp.start((lane) => this.wake(lane));
    for (const lane of this.lanes.values()) lane.start();
    this.redelivery.start(0);
    this.heartbeat = new InstanceHeartbeat(
      this.database,
      scheduler,
      { id: this.options.dispatcher.workerId, host: hostname(), pid: process.pid },
      this.options.dispatcher.heartbeatMs,
      this.lanes,
      this.logger,
    );
    this.heartbeat.start();
    const { summaryIntervalMs } = this.options.logging;
    if (summaryIntervalMs > 0) {
      this.summary = new RecurringTask(
        scheduler,
        SUMMARY_TIMER,
        summaryIntervalMs,
        async () => this.logSummary(summaryIntervalMs),
        this.logger,
      );
      this.summary.start();
    }
    this.logger.log({
      msg: 'dispatcher started',
      workerId: this.options.dispatcher.workerId,
      lanes: [...this.lanes.keys()],
    });
    void this.warnOfUndeclaredLanes();
  }

  private settler(): Settler {
    return new Settler(
      this.database,
      this.publisher,
      this.options.dispatcher.eventLeaseMs,
      statementBoundMs(this.options.database.statementTimeoutMs),
      this.logger,
    );
  }

  private deliveryFor(lane: ResolvedLane): Delivery {
    return new Delivery(
      this.renderer,
      this.transports.get(lane.name)!,
      this.options.dispatcher.sendTimeoutMs,
      statementBoundMs(this.options.database.statementTimeoutMs),
      this.logger,
      this.options.verp,
      lane.unsubscribe,
    );
  }

  /** The interval's one line (`summaryOf`), in place of a line per mail. */
  private logSummary(intervalMs: number): void {
    const summary = summaryOf(
      this.metrics.takeTally(),
      this.lanePauses,
      this.database.availability.unavailableSince,
      intervalMs,
      Date.now(),
    );
    if (summary?.level === 'warn') this.logger.warn(summary.entry);
    else if (summary) this.logger.log(summary.entry);
  }

  /**
   * Sends every row due now, on every lane, until none is left, and waits for their events' listeners: the
   * dispatcher's work done once, on demand, with no timer, for tests (`MailTester.drain`); it keeps to no rate
   * limit. See `drainDue`.
   */
  drain(): Promise<DrainReport> {
    const lanes = this.options.lanes.map((lane) => ({ lane, delivery: this.deliveryFor(lane) }));
    const { database, publisher, metrics, options, logger } = this;
    return drainDue(lanes, { database, settler: this.settler(), publisher, metrics, options, logger });
  }

  /** A transport of the app's own whose `warm` throws costs its first mail a connect, not the start. */
  private warm(transport: MailTransport): void {
    try {
      transport.warm?.();
    } catch (error) {
      this.logger.warn({ msg: 'a transport failed to warm up; its first mail connects', error: String(error) });
    }
  }

  /** Rows in a lane no longer declared would wait for good: said once at start (and by the health indicator). */
  private async warnOfUndeclaredLanes(): Promise<void> {
    try {
      const undeclared = await undeclaredLanes(this.database, [...this.lanes.keys()]);
      if (Object.keys(undeclared).length === 0) return;
      this.logger.warn({
        msg: 'open rows in lanes this instance does not declare: nothing sends them until the lane is declared again',
        lanes: undeclared,
      });
    } catch (error) {
      this.logger.warn({ msg: 'could not look for rows in undeclared lanes', error: String(error) });
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    const deadline = Date.now() + this.options.dispatcher.shutdownTimeoutMs;
    this.redelivery?.stop();
    this.summary?.stop();
    this.wakeUp.stop();
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
    // Only once the lanes have stopped: an instance still draining its sends stays in view.
    const removed = this.heartbeat?.stop(deadline);
    // A transport's close, a custom one's too, is waited for until the shutdown bound, no longer; one that fails
    // does not stop the rest of the shutdown.
    const closed = Promise.all(
      [...new Set(this.transports.values())].map((transport) =>
        transport.close().catch((error: unknown) => {
          this.logger.warn({ msg: 'a transport failed to close', error: String(error) });
        }),
      ),
    );
    await Promise.race([closed, sleep(Math.max(0, deadline - Date.now()), undefined, { ref: false })]);
    await removed;
    await this.publisher.finishEmissions(deadline);
  }

  /** Wakes one lane's loop, or every lane's when no lane is named. */
  wake(lane?: string): void {
    if (lane && this.lanes.has(lane)) this.lanes.get(lane)!.wake();
    else for (const dispatcher of this.lanes.values()) dispatcher.wake();
  }
}
