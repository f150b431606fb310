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

/**
 * Emits the events that settles and delivery feedback recorded in `mail_outbox_event`, and deletes each once its
 * listeners have run.
 * An event whose emitter died first stays in the table; after its lease any instance emits it again.
 *
 * Each event is emitted on its own as soon as the change it reports has committed, outside the settle that
 * recorded it, and its listeners get `events.listenerTimeoutMs`. A listener that throws or does not finish in time
 * leaves its event unconfirmed, so it comes again after its lease; nothing else waits for it: no send, no settle,
 * no other event. There is no fixed number of emissions at once, because a stuck listener would hold its places
 * until the timeout (16 places held for 30 s let 16 events through in 30 s). What is bounded is memory: at most
 * `events.maxQueued` events whose listeners are still running; past it an event waits in the table.
 */
@Injectable()
export class MailEventPublisher {
  private readonly logger = new Logger('ReliableMail');
  private readonly confirmer: Batcher<string, void>;
  /** Events whose listeners are running here, until they finish or time out: redelivery leaves them alone. */
  private readonly running = new Map<string, Promise<void>>();

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

  /** Emits, in the background, an event whose status change has committed, and confirms it once heard. */
  publish(event: StoredEvent): void {
    if (this.running.has(event.id)) return;
    if (this.running.size >= this.options.events.maxQueued) {
      // It is recorded: after its lease, redelivery emits it. Memory stays bounded whatever the listeners do.
      this.logger.warn({ msg: 'too many events in emission; this one is emitted by redelivery', eventId: event.id });
      return;
    }
    // On a later turn of the event loop: a listener's synchronous work (or throw) is not the settle's.
    const emission = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.emit(event))
      .finally(() => this.running.delete(event.id));
    this.running.set(event.id, emission);
  }

  /**
   * Waits until the emissions under way have finished, or until `deadline` (epoch ms): at shutdown, the listeners
   * hear what the last settles recorded before the emitter lets them go. What is left is redelivered later.
   */
  async finishEmissions(deadline: number): Promise<void> {
    const left = deadline - Date.now();
    if (this.running.size === 0 || left <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, left)));
    await Promise.race([Promise.allSettled(this.running.values()), timeout]);
    clearTimeout(timer);
  }

  /** Emits the events that were recorded but never confirmed: their emitter crashed or a listener failed. */
  async redeliverUnconfirmed(): Promise<number> {
    // Only events this process has listeners for: another instance's would be confirmed here unheard.
    const names = Object.keys(EVENT_CLASSES).filter((name) => this.isListenedTo(name));
    const room = this.options.events.maxQueued - this.running.size;
    if (names.length === 0 || room <= 0) return 0;
    const events = await claimUnconfirmedEvents(this.database, {
      names,
      limit: Math.min(REDELIVERY_BATCH, room),
      leaseMs: this.options.dispatcher.eventLeaseMs,
      // Still being emitted here: a listener is slow, not failed; its timeout decides.
      except: [...this.running.keys()],
    });
    if (events.length > 0) {
      this.logger.warn({ msg: 'emitting unconfirmed events again', count: events.length });
      for (const event of events) this.publish(event);
    }
    return events.length;
  }

  /** Emits one event and confirms it once every listener finished; gives up on it at the timeout. */
  private async emit(event: StoredEvent): Promise<void> {
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
