import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxDatabase } from '../database/outbox-database.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import { DestinationRelay } from './destination-relay.js';
import { RelayedEvents } from './relayed-events.js';
import { registerDestinations, relayedEventNames } from './sql/destinations.js';
import { type RelayBacklog, relayBacklog } from './sql/relay-events.js';

/** A health check counts a destination's backlog up to this, so that one of millions costs it no more. */
const BACKLOG_COUNT_CAP = 100_000;

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

  constructor(
    private readonly database: OutboxDatabase,
    private readonly relayed: RelayedEvents,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const relay = this.options.relay;
    if (relay) {
      // Loads each client's packages: one missing stops the start, before any event is owed to its destination.
      await Promise.all(relay.destinations.map(({ destination }) => destination.open()));
      await registerDestinations(
        this.database,
        relay.destinations.map(({ destination, events }) => ({ name: destination.name, events })),
      );
    }
    await this.relayed.readWith(() => relayedEventNames(this.database));
    if (!relay || !this.options.dispatcher.enabled) return;
    for (const destination of relay.destinations) {
      this.relays.push(new DestinationRelay(this.database, destination, relay, this.logger));
    }
    this.stopListening = this.relayed.whenRecorded(() => {
      for (const destinationRelay of this.relays) destinationRelay.nudge();
    });
    for (const destinationRelay of this.relays) destinationRelay.start();
    this.logger.log({ msg: 'event relay started', destinations: this.relays.map(({ name }) => name) });
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
