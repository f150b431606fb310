import { Inject, Injectable, Logger } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { Batcher } from '../shared/batcher.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import type { StoredEvent } from '../outbox/queue.types.js';
import { claimUnconfirmedEvents, confirmEvents } from '../outbox/sql/events.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { EMAIL_FAILED_EVENT, EmailFailedEvent } from './email-failed.event.js';
import { EMAIL_SENT_EVENT, EmailSentEvent } from './email-sent.event.js';

const EVENT_CLASSES: Record<string, { fromJSON(json: Record<string, unknown>): object }> = {
  [EMAIL_SENT_EVENT]: EmailSentEvent,
  [EMAIL_FAILED_EVENT]: EmailFailedEvent,
};

const REDELIVERY_BATCH = 100;
const CONFIRM_BATCH = 500;
// Confirming an event only spares its redelivery, so confirmations wait a little to share one statement.
const CONFIRM_LINGER_MS = 25;

/**
 * Emits the events that settles recorded in `mail_outbox_event`, and deletes each once its listeners have run.
 * An event whose emitter died first stays in the table; after its lease any instance emits it again.
 */
@Injectable()
export class MailEventPublisher {
  private readonly logger = new Logger('ReliableMail');
  private readonly confirmer: Batcher<string, void>;

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
   * Whether anything in this process listens for the event. Events are emitted in-process only, so one that no
   * listener here would receive is neither recorded nor emitted: a row write saved per email.
   */
  isListenedTo(name: string): boolean {
    return Boolean(this.emitter.hasListeners(name));
  }

  /** Emits events whose status changes have committed, then confirms them. */
  async publish(events: StoredEvent[]): Promise<void> {
    const confirmations: Promise<void>[] = [];
    for (const event of events) {
      const eventClass = EVENT_CLASSES[event.name];
      if (!eventClass) {
        this.logger.error({ msg: 'unknown stored event, left in place', eventId: event.id, name: event.name });
        continue;
      }
      try {
        await this.emitter.emitAsync(event.name, eventClass.fromJSON(event.payload));
        confirmations.push(this.confirmer.add(event.id));
      } catch (error) {
        // A throwing listener gets the event again after the lease, like any unconfirmed event.
        this.logger.error({
          msg: 'event listener failed; the event will be emitted again',
          eventId: event.id,
          name: event.name,
          error: String(error),
        });
      }
    }
    try {
      await Promise.all(confirmations);
    } catch (error) {
      this.logger.warn({ msg: 'event confirmation failed; the events will be emitted again', error: String(error) });
    }
  }

  /** Emits the events that were recorded but never confirmed: their emitter crashed or a listener threw. */
  async redeliverUnconfirmed(): Promise<number> {
    // Only events this process has listeners for: another instance's would be confirmed here unheard.
    const names = Object.keys(EVENT_CLASSES).filter((name) => this.isListenedTo(name));
    if (names.length === 0) return 0;
    const events = await claimUnconfirmedEvents(
      this.database,
      names,
      REDELIVERY_BATCH,
      this.options.dispatcher.eventLeaseMs,
    );
    if (events.length > 0) {
      this.logger.warn({ msg: 'emitting unconfirmed events again', count: events.length });
      await this.publish(events);
    }
    return events.length;
  }
}
