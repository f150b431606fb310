import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxDatabase } from '../database/outbox-database.js';
import { MailMetrics } from '../metrics/mail-metrics.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { DISPATCHER_TIMEOUT_NAME, RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import { RecurringTask } from '../shared/recurring-task.js';
import { requireScheduler } from '../shared/require-scheduler.js';
import { DestinationRelay } from './destination-relay.js';
import { RelayedEvents } from './relayed-events.js';
import { abandonedDestinations, registerDestinations, relayedEventNames } from './sql/destinations.js';
import { type RelayBacklog, relayBacklog } from './sql/relay-events.js';

/** A health check counts a destination's backlog up to this, so that one of millions costs it no more. */
const BACKLOG_COUNT_CAP = 100_000;

const HEARTBEAT_TIMER = `${DISPATCHER_TIMEOUT_NAME}:relay-heartbeat`;

/** How often an instance that publishes to its destinations says so (`seen_at`). */
const HEARTBEAT_MS = 60_000;

/**
 * How far health counts an abandoned destination's backlog: any copy makes it abandoned, and this says roughly how
 * bad it is for a few hundred reads, where a backlog's count up to its own cap could read 100,001 on every probe.
 */
const ABANDONED_COUNT_CAP = 1_000;

/** A registered destination no instance has said it publishes to for this long is abandoned (health fails on it). */
export const ABANDONED_AFTER_MS = 10 * 60_000;

/**
 * The event relay of this instance: registers its destinations at start (from then on every instance copies the
 * events they take, see 0014-event-relay.ts), has `RelayedEvents` read which names the registered destinations take
 * (every instance, with or without destinations of its own: one that records an event only a destination takes must
 * record it), and where the dispatcher runs, runs one `DestinationRelay` per destination.
 */
@Injectable()
export class MailEventRelay implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('ReliableMail');
  private readonly relays: DestinationRelay[] = [];
  private stopListening: (() => void) | null = null;
  private heartbeat: RecurringTask | null = null;

  constructor(
    private readonly database: OutboxDatabase,
    private readonly relayed: RelayedEvents,
    private readonly metrics: MailMetrics,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
    @Optional() private readonly scheduler?: SchedulerRegistry,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const relay = this.options.relay;
    if (relay) {
      // Loads each client's packages: one missing stops the start, before any event is owed to its destination.
      await Promise.all(relay.destinations.map(({ destination }) => destination.open()));
      await this.register();
    }
    await this.relayed.readWith(() => relayedEventNames(this.database));
    if (!relay || !this.options.dispatcher.enabled) return;
    const scheduler = requireScheduler(this.scheduler, 'dispatcher.enabled');
    for (const destination of relay.destinations) {
      this.relays.push(new DestinationRelay(this.database, destination, relay, this.logger, this.metrics));
    }
    this.stopListening = this.relayed.whenRecorded(() => {
      for (const destinationRelay of this.relays) destinationRelay.nudge();
    });
    for (const destinationRelay of this.relays) destinationRelay.start();
    this.heartbeat = new RecurringTask(scheduler, HEARTBEAT_TIMER, HEARTBEAT_MS, () => this.register(), this.logger);
    this.heartbeat.start();
    this.logger.log({ msg: 'event relay started', destinations: this.relays.map(({ name }) => name) });
  }

  /** Registers this instance's destinations, or says again that it publishes to them. */
  private async register(): Promise<void> {
    await registerDestinations(
      this.database,
      (this.options.relay?.destinations ?? []).map(({ destination, events }) => ({ name: destination.name, events })),
    );
  }

  /**
   * Registered destinations no instance publishes to, that are still owed events (see `ABANDONED_AFTER_MS`); read only
   * where some destination is registered.
   */
  async abandoned(): Promise<Record<string, number>> {
    if (!this.relayed.anyRegistered) return {};
    return abandonedDestinations(this.database, ABANDONED_AFTER_MS, ABANDONED_COUNT_CAP);
  }

  /** Each of this instance's destinations' backlog, for health: its oldest event's age, and how many are owed. */
  async backlogs(): Promise<Record<string, RelayBacklog>> {
    const destinations = this.options.relay?.destinations ?? [];
    const backlogs = await Promise.all(
      destinations.map(({ destination }) => relayBacklog(this.database, destination.name, BACKLOG_COUNT_CAP)),
    );
    return Object.fromEntries(destinations.map(({ destination }, index) => [destination.name, backlogs[index]]));
  }

  async beforeApplicationShutdown(): Promise<void> {
    const deadline = Date.now() + this.options.dispatcher.shutdownTimeoutMs;
    this.stopListening?.();
    this.heartbeat?.stop();
    await Promise.all(this.relays.map((destinationRelay) => destinationRelay.stop(deadline)));
    // A client's close is waited for until the shutdown bound, no longer.
    const closed = Promise.all(
      (this.options.relay?.destinations ?? []).map(({ destination }) =>
        destination.close().catch((error: unknown) => {
          this.logger.warn({
            msg: 'a relay destination failed to close',
            destination: destination.name,
            error: String(error),
          });
        }),
      ),
    );
    await Promise.race([closed, sleep(Math.max(0, deadline - Date.now()), undefined, { ref: false })]);
  }
}
