import type { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { reportedAsOutage } from '../database/database-availability.js';
import type { SqlClient } from '../database/sql-client.js';
import { cutText, storableText } from '../database/storable.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { ResolvedRelay, ResolvedRelayDestination } from '../options/resolve-relay.js';
import { backoffDelayMs } from '../shared/retry-policy.js';
import type { RelayedEvent } from './relay-destination.interface.js';
import { paceAfter, type RelayRound } from './relay-pace.js';
import {
  claimOwedEvents,
  confirmRelayed,
  type DeferredCopy,
  deferRelayed,
  type OwedEvent,
} from './sql/relay-events.js';

/**
 * A copy the broker did not confirm is due again after 1 s, doubling per publication to 1 min (equal jitter): one the
 * broker keeps refusing costs a publication a minute, and the rest of the backlog goes by it.
 */
const COPY_BACKOFF = { baseDelayMs: 1_000, maxDelayMs: 60_000 };

/** A round that shows the broker down (see `paceAfter`) pauses the loop, doubling up to 30 s. */
const OUTAGE_BACKOFF = { baseDelayMs: 1_000, maxDelayMs: 30_000 };

/**
 * Publishes one destination's events from this instance: claim a batch of its due copies, publish them all at once,
 * then in one statement each delete those the broker confirmed and put off the others. At least once: a copy is
 * deleted only after its confirmation, so a crash between the two publishes it again, with the same message id.
 *
 * The copy's lease is twice the publication's timeout: another instance takes it only once this one has given up
 * on it (or died), and a late confirmation still finds it to delete.
 */
export class DestinationRelay {
  private readonly leaseMs: number;
  private loop: Promise<void> | null = null;
  private stopped = false;
  private due = false;
  private wakeUp: (() => void) | null = null;
  /** Consecutive rounds that showed the broker (or the database) down. */
  private failedRounds = 0;
  private readonly publications = new Set<AbortController>();

  constructor(
    private readonly database: SqlClient,
    private readonly target: ResolvedRelayDestination,
    private readonly settings: Pick<ResolvedRelay, 'batchSize' | 'publishTimeoutMs' | 'pollIntervalMs'>,
    private readonly logger: Logger,
    private readonly metrics: Pick<MailMetrics, 'recordRelayRound'>,
    private readonly random: () => number = Math.random,
  ) {
    this.leaseMs = 2 * settings.publishTimeoutMs;
  }

  get name(): string {
    return this.target.destination.name;
  }

  start(): void {
    this.stopped = false;
    this.loop = this.run();
  }

  /** An event for this destination committed: look now rather than at the next poll. */
  nudge(): void {
    this.due = true;
    this.wakeUp?.();
  }

  /**
   * Stops claiming, and waits for the publications under way until `deadline` (epoch ms); those still unconfirmed
   * then are given up on, and published again after their lease, here or by another instance.
   */
  async stop(deadline: number): Promise<void> {
    this.stopped = true;
    this.wakeUp?.();
    const left = Math.max(0, deadline - Date.now());
    const timer = sleep(left, 'late' as const, { ref: false });
    if ((await Promise.race([this.loop, timer])) === 'late') {
      for (const publication of this.publications) publication.abort(new Error('shutdown'));
      await this.loop;
    }
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      this.due = false;
      let round: RelayRound | null = null;
      try {
        round = await this.relayBatch();
      } catch (error) {
        if (!reportedAsOutage(error)) {
          this.logger.error({
            msg: 'event relay failed; it tries again',
            destination: this.name,
            error: String(error),
          });
        }
      }
      if (this.stopped) break;
      const pace = paceAfter(round, this.failedRounds, this.settings.batchSize, this.due);
      this.failedRounds = pace.failedRounds;
      if (pace.next === 'backoff')
        await this.pause(backoffDelayMs(this.failedRounds, OUTAGE_BACKOFF, this.random), false);
      else if (pace.next === 'poll') await this.pause(this.settings.pollIntervalMs, true);
    }
  }

  /** Waits `ms`, or until stopped; or nudged, when `nudgeable`. */
  private async pause(ms: number, nudgeable: boolean): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      this.wakeUp = () => {
        if (!nudgeable && !this.stopped) return;
        clearTimeout(timer);
        resolve();
      };
    });
    this.wakeUp = null;
  }

  private async relayBatch(): Promise<RelayRound> {
    const owed = await claimOwedEvents(this.database, this.name, this.settings.batchSize, this.leaseMs);
    if (owed.length === 0) return { claimed: 0, confirmed: 0, firstTries: 0 };
    const failures = await Promise.all(owed.map((event) => this.publish(event)));
    const confirmed: string[] = [];
    const deferred: DeferredCopy[] = [];
    owed.forEach((event, index) => {
      const failure = failures[index];
      if (failure === null) confirmed.push(event.id);
      else
        deferred.push({
          id: event.id,
          delayMs: backoffDelayMs(event.attempts, COPY_BACKOFF, this.random),
          error: storedError(failure),
        });
    });
    await confirmRelayed(this.database, confirmed);
    await deferRelayed(this.database, deferred);
    this.metrics.recordRelayRound(this.name, confirmed.length, deferred.length);
    if (deferred.length > 0) {
      this.logger.warn({
        msg: 'events not confirmed by their broker; published again later',
        destination: this.name,
        count: deferred.length,
        error: deferred[0].error,
      });
    }
    return {
      claimed: owed.length,
      confirmed: confirmed.length,
      // The claim counted this publication: 1 is its first.
      firstTries: owed.filter((event) => event.attempts === 1).length,
    };
  }

  /** Publishes one event within the timeout; null once the broker confirmed it, else why not. */
  private async publish(owed: OwedEvent): Promise<string | null> {
    const controller = new AbortController();
    this.publications.add(controller);
    const timer = setTimeout(
      () => controller.abort(new Error(`not confirmed within ${this.settings.publishTimeoutMs} ms`)),
      this.settings.publishTimeoutMs,
    );
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener('abort', () => reject(controller.signal.reason as Error), { once: true });
    });
    try {
      await Promise.race([this.target.destination.publish(relayedEvent(owed), controller.signal), aborted]);
      return null;
    } catch (error) {
      return String(error instanceof Error ? error.message : error);
    } finally {
      clearTimeout(timer);
      this.publications.delete(controller);
    }
  }
}

/** The longest broker error kept with a copy (`last_error`): the start of it says what went wrong. */
const STORED_ERROR_LENGTH = 1_000;

/**
 * A broker's error as the defer can store it: a NUL or half a character in one copy's error would otherwise fail the
 * statement that puts off the whole batch.
 */
const storedError = (error: string): string => cutText(storableText(error), STORED_ERROR_LENGTH);

function relayedEvent(owed: OwedEvent): RelayedEvent {
  return {
    messageId: `${owed.mailId}:${owed.eventId}`,
    eventId: owed.eventId,
    mailId: owed.mailId,
    name: owed.name,
    recordedAt: owed.recordedAt,
    payload: owed.payload,
  };
}
