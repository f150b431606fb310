import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { reportedAsOutage } from '../database/database-availability.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import type { StoredEvent } from '../outbox/queue.types.js';
import { claimUnconfirmedEvents, confirmEvents } from '../outbox/sql/events.js';
import {
  EMAIL_BOUNCED_EVENT,
  EMAIL_COMPLAINED_EVENT,
  EMAIL_DELIVERED_EVENT,
  EMAIL_FAILED_EVENT,
  EMAIL_SENT_EVENT,
  RELIABLE_MAIL_OPTIONS,
} from '../reliable-mail.constants.js';
import { RelayedEvents } from '../relay/relayed-events.js';
import { Batcher } from '../shared/batcher.js';
import { EmailBouncedEvent } from './email-bounced.event.js';
import { EmailComplainedEvent } from './email-complained.event.js';
import { EmailDeliveredEvent } from './email-delivered.event.js';
import { EmailFailedEvent } from './email-failed.event.js';
import { EmailSentEvent } from './email-sent.event.js';

const EVENT_CLASSES: Record<string, { fromJSON(json: Record<string, unknown>, eventId: string): object }> = {
  [EMAIL_SENT_EVENT]: EmailSentEvent,
  [EMAIL_FAILED_EVENT]: EmailFailedEvent,
  [EMAIL_BOUNCED_EVENT]: EmailBouncedEvent,
  [EMAIL_COMPLAINED_EVENT]: EmailComplainedEvent,
  [EMAIL_DELIVERED_EVENT]: EmailDeliveredEvent,
};

/** See `MailEventPublisher.recordingOf`. */
export type EventRecording = 'listeners' | 'relay' | null;

const REDELIVERY_BATCH = 100;
const CONFIRM_BATCH = 500;
// Confirming an event only spares its redelivery, so confirmations wait a little to share one statement.
const CONFIRM_LINGER_MS = 25;

/**
 * Emits the events that settles and delivery feedback recorded in `mail_outbox_event`, and deletes each once its
 * listeners have run. An event whose emitter died first stays in the table; after its lease any instance that
 * listens for it emits it again.
 *
 * Emission runs apart from the dispatcher: `publish` only queues, on a later turn of the event loop, so nothing a
 * listener does (its synchronous work, a throw, a hang) is the settle's. At most `events.concurrency` emissions run
 * at once, so that listeners writing to the app's database cannot take all of its pool; each gets
 * `events.listenerTimeoutMs`, after which its place goes to the next event and the event, unconfirmed, comes again
 * after its lease. At most `events.maxQueued` events wait or run here; past that an event waits in the table.
 */
@Injectable()
export class MailEventPublisher {
  private readonly logger = new Logger('ReliableMail');
  private readonly confirmer: Batcher<string, void>;
  private readonly queue: StoredEvent[] = [];
  /** Emissions whose listeners are running and not yet given up on. */
  private readonly running = new Map<string, Promise<void>>();
  /** Every event queued or running here, by id: redelivery leaves them alone. */
  private readonly held = new Set<string>();
  /** Set once shutdown has let the last emissions finish: what comes later waits in the table. */
  private stopped = false;
  /** A drain is due on a later turn: one for every event published meanwhile. */
  private drainScheduled = false;
  /** The queue was found full, and has taken no event since: the next refused says nothing. */
  private fullSaid = false;

  private readonly emitter: EventEmitter2;

  constructor(
    private readonly database: OutboxDatabase,
    // Named: the type of an optional parameter is no token once compiled (swc writes Object).
    @Optional() @Inject(EventEmitter2) emitter: EventEmitter2 | undefined,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
    private readonly relayed: RelayedEvents,
  ) {
    // Without EventEmitterModule the start fails before anything is published, naming it (ReliableMailStartup).
    this.emitter = emitter as EventEmitter2;
    this.confirmer = new Batcher(
      async (ids) => {
        await confirmEvents(this.database, ids);
        return ids.map(() => undefined);
      },
      CONFIRM_BATCH,
      CONFIRM_LINGER_MS,
    );
  }

  /**
   * Whether an event is recorded for at-least-once emission. With `events.record: 'listened'` only those that
   * something in this process would receive, by name, by a wildcard pattern or through `onAny`: a row write
   * saved per email otherwise.
   */
  isListenedTo(name: string): boolean {
    return this.options.events.record === 'all' || this.hasListeners(name);
  }

  /**
   * For whom an event of this name is recorded: `listeners` (the app's, and any relay destination that takes it),
   * `relay` (only relay destinations take it: nothing here emits it), or null: nobody, and nothing is written.
   */
  recordingOf(name: string | null): EventRecording {
    if (name === null) return null;
    if (this.isListenedTo(name)) return 'listeners';
    return this.relayed.has(name) ? 'relay' : null;
  }

  /** An event of this name committed: this instance's relay destinations that take it publish it before their poll. */
  committed(name: string): void {
    if (this.relayed.has(name)) this.relayed.recorded();
  }

  /** Queues an event whose change has committed; it is emitted, then confirmed, in the background. */
  publish(event: StoredEvent): void {
    if (this.stopped || this.held.has(event.id)) return;
    if (this.held.size >= this.options.events.maxQueued) {
      // It is recorded: after its lease, redelivery emits it. Memory stays bounded whatever the listeners do. Said
      // once until the queue takes an event again, not for every mail settled meanwhile.
      if (!this.fullSaid) {
        this.logger.warn({
          msg: 'event queue full; the events settled until it has room are emitted by redelivery',
          maxQueued: this.options.events.maxQueued,
        });
      }
      this.fullSaid = true;
      return;
    }
    this.fullSaid = false;
    this.held.add(event.id);
    this.queue.push(event);
    if (this.drainScheduled) return;
    this.drainScheduled = true;
    setImmediate(() => {
      this.drainScheduled = false;
      this.drain();
    });
  }

  /**
   * At shutdown, once the last settles are written: waits until the events queued and running here have been
   * heard, or until `deadline` (epoch ms), before the emitter lets its listeners go. Events published afterwards,
   * and those left, wait in the table for redelivery.
   */
  async finishEmissions(deadline: number): Promise<void> {
    await this.emissionsHeard(deadline);
    this.stopped = true;
  }

  /** Waits until the events queued and running here have been heard, or until `deadline` (epoch ms). */
  async emissionsHeard(deadline: number): Promise<void> {
    while ((this.queue.length > 0 || this.running.size > 0) && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadline - Date.now())));
      // Queued events start as places free, so wait for the running ones and look again.
      await Promise.race([Promise.allSettled(this.running.values()), timeout]);
      clearTimeout(timer);
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Emits the events that were recorded but never confirmed: their emitter crashed or a listener failed. */
  async redeliverUnconfirmed(): Promise<number> {
    if (this.stopped) return 0;
    // Only events something here listens for: with `record: 'all'` an instance without listeners records events
    // for the others, and must not take them.
    const names = this.listenedNames();
    const room = this.options.events.maxQueued - this.held.size;
    if (names.length === 0 || room <= 0) return 0;
    const events = await claimUnconfirmedEvents(this.database, {
      names,
      limit: Math.min(REDELIVERY_BATCH, room),
      leaseMs: this.options.dispatcher.eventLeaseMs,
      // Still waiting or being emitted here: a listener is slow, not failed; its timeout decides.
      except: [...this.held],
    });
    if (events.length > 0) {
      this.logger.warn({ msg: 'emitting unconfirmed events again', count: events.length });
      for (const event of events) this.publish(event);
    }
    return events.length;
  }

  /** The names of reliable-mail's events that something in this process listens for. */
  listenedNames(): string[] {
    return Object.keys(EVENT_CLASSES).filter((name) => this.hasListeners(name));
  }

  private hasListeners(name: string): boolean {
    return this.emitter.listeners(name).length > 0 || this.emitter.listenersAny().length > 0;
  }

  private drain(): void {
    while (this.running.size < this.options.events.concurrency && this.queue.length > 0) {
      const event = this.queue.shift()!;
      const emission = this.emit(event)
        // emit reports its own failures; this only keeps a failing logger from becoming an unhandled rejection.
        .catch(() => undefined)
        .finally(() => {
          this.running.delete(event.id);
          this.held.delete(event.id);
          this.drain();
        });
      this.running.set(event.id, emission);
    }
  }

  /** Emits one event and confirms it once every listener finished; gives up on it at the timeout. */
  private async emit(event: StoredEvent): Promise<void> {
    const eventClass = EVENT_CLASSES[event.name];
    if (!eventClass) {
      this.logger.error({ msg: 'unknown stored event, left in place', eventId: event.id, name: event.name });
      return;
    }
    // Nobody here to hear it (the listeners were let go at shutdown, or this instance records for others): an
    // emission now would confirm it unheard, so it waits in the table for an instance that listens.
    if (!this.hasListeners(event.name)) return;
    const { listenerTimeoutMs } = this.options.events;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), listenerTimeoutMs);
      timer.unref();
    });
    try {
      const emitted = this.emitter.emitAsync(event.name, eventClass.fromJSON(event.payload, event.id));
      if ((await Promise.race([emitted, timedOut])) === 'timeout') {
        this.logger.error({
          msg: 'event listeners did not finish in time; the event will be emitted again',
          eventId: event.id,
          name: event.name,
          listenerTimeoutMs,
        });
        return;
      }
      await this.confirmer.add(event.id);
    } catch (error) {
      // A throwing listener gets the event again after the lease, like any unconfirmed event; so does one whose
      // confirmation could not be written (said by the database when it is an outage).
      if (reportedAsOutage(error)) return;
      this.logger.error({
        msg: 'event not confirmed; it will be emitted again',
        eventId: event.id,
        name: event.name,
        error: String(error),
      });
    } finally {
      clearTimeout(timer);
    }
  }
}
