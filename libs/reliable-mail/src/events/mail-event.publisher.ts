import { Inject, Injectable, Logger } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
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

const REDELIVERY_BATCH = 100;
const CONFIRM_BATCH = 500;
// Confirming an event only spares its redelivery, so confirmations wait a little to share one statement.
const CONFIRM_LINGER_MS = 25;
/** Emissions under way at once: listeners that wait on I/O overlap, and a stuck one holds one place of these. */
const CONCURRENT_EMISSIONS = 16;

/**
 * Emits the events that settles and delivery feedback recorded in `mail_outbox_event`, and deletes each once its
 * listeners have run.
 * An event whose emitter died first stays in the table; after its lease any instance emits it again.
 *
 * Emission runs apart from the dispatcher: `publish` only queues (a bounded queue; what does not fit is left to
 * redelivery), and each emission gives its listeners `events.listenerTimeoutMs`. A listener that throws or does not
 * finish in time leaves its event unconfirmed, so it comes again after its lease; it never holds a send or a settle.
 */
@Injectable()
export class MailEventPublisher {
  private readonly logger = new Logger('ReliableMail');
  private readonly confirmer: Batcher<string, void>;
  private readonly queue: StoredEvent[] = [];
  /** Emissions whose listeners are still running (a timed-out one no longer counts: it has been given up on). */
  private emitting = 0;

  constructor(
    private readonly database: OutboxDatabase,
    private readonly emitter: EventEmitter2,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
  ) {
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
    if (this.options.events.record === 'all') return true;
    return this.emitter.listeners(name).length > 0 || this.emitter.listenersAny().length > 0;
  }

  /** Queues an event whose status change has committed; it is emitted, then confirmed, in the background. */
  publish(event: StoredEvent): void {
    if (this.queue.length >= this.options.events.maxQueued) {
      // It is recorded: after its lease, redelivery emits it. Memory stays bounded whatever the listeners do.
      this.logger.warn({ msg: 'event queue full; the event is emitted by redelivery', eventId: event.id });
      return;
    }
    this.queue.push(event);
    this.drain();
  }

  /** Emits the events that were recorded but never confirmed: their emitter crashed or a listener failed. */
  async redeliverUnconfirmed(): Promise<number> {
    // Only events this process has listeners for: another instance's would be confirmed here unheard.
    const names = Object.keys(EVENT_CLASSES).filter((name) => this.isListenedTo(name));
    const room = this.options.events.maxQueued - this.queue.length;
    if (names.length === 0 || room <= 0) return 0;
    const events = await claimUnconfirmedEvents(
      this.database,
      names,
      Math.min(REDELIVERY_BATCH, room),
      this.options.dispatcher.eventLeaseMs,
    );
    if (events.length > 0) {
      this.logger.warn({ msg: 'emitting unconfirmed events again', count: events.length });
      for (const event of events) this.publish(event);
    }
    return events.length;
  }

  private drain(): void {
    while (this.emitting < CONCURRENT_EMISSIONS && this.queue.length > 0) {
      const event = this.queue.shift()!;
      this.emitting++;
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        this.emitting--;
        this.drain();
      };
      void this.emit(event, release).finally(release);
    }
  }

  /** Emits one event and confirms it once every listener finished; `giveUp` frees its place at the timeout. */
  private async emit(event: StoredEvent, giveUp: () => void): Promise<void> {
    const eventClass = EVENT_CLASSES[event.name];
    if (!eventClass) {
      this.logger.error({ msg: 'unknown stored event, left in place', eventId: event.id, name: event.name });
      return;
    }
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
        giveUp();
        return;
      }
      await this.confirmer.add(event.id);
    } catch (error) {
      // A throwing listener gets the event again after the lease, like any unconfirmed event; so does one whose
      // confirmation could not be written.
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
