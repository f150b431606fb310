import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { EntityManager } from '@mikro-orm/postgresql';
import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { MailEventPublisher } from '../events/mail-event.publisher.js';
import { type ClaimedRow, OutboxRepository, type Settlement } from '../outbox/outbox.repository.js';
import { DISPATCHER_TIMEOUT_NAME, MAIL_TRANSPORT, RESOLVED_OPTIONS } from '../reliable-mail.constants.js';
import type { ResolvedReliableMailOptions } from '../reliable-mail.options.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';
import { settlementFor } from './settlement.js';
import { classifyDelivery, classifyFailure, type SmtpVerdict } from './smtp-reply.js';
import { WakeUpListener } from './wake-up.listener.js';

const SETTLE_RETRIES = 5;

/**
 * Claims due rows, sends them and settles each. One loop per instance, rescheduling itself through the
 * scheduler registry so that two claims never overlap; a claim takes only as many rows as there are free send
 * slots, so no claimed row waits in memory while its lease runs.
 */
@Injectable()
export class MailDispatcher implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('ReliableMail');
  private readonly em: EntityManager;
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private stopping = false;
  private rerunRequested = false;
  /** The last claim filled its limit, so a freed slot should claim again without waiting for a poll. */
  private backlogSeen = false;
  private lastRedeliveryAt = 0;
  /** When the loop last completed a tick; the health indicator reads it. */
  lastTickAt: Date | null = null;

  constructor(
    em: EntityManager,
    private readonly repository: OutboxRepository,
    private readonly publisher: MailEventPublisher,
    private readonly wakeUp: WakeUpListener,
    private readonly scheduler: SchedulerRegistry,
    @Inject(MAIL_TRANSPORT) private readonly transport: MailTransport,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedReliableMailOptions,
  ) {
    // A fork of its own: the loop must never join a transaction that happens to be open where a timer was armed.
    this.em = em.fork();
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.dispatcher.enabled) return;
    await this.wakeUp.start(() => this.wake());
    this.schedule(0);
    this.logger.log({ msg: 'dispatcher started', workerId: this.options.dispatcher.workerId });
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.clearTimer();
    await this.wakeUp.stop();
    const drained = await Promise.race([
      Promise.all(this.inFlight).then(() => true),
      sleep(this.options.dispatcher.shutdownTimeoutMs, false, { ref: false }),
    ]);
    if (!drained) {
      this.logger.warn({
        msg: 'shutdown timeout with sends in flight; their rows are claimed again after the lease',
        inFlight: this.inFlight.size,
      });
    }
    await this.transport.close();
  }

  /** Runs the loop now unless it is already running, in which case it runs again right after. */
  wake(): void {
    if (this.stopping) return;
    if (this.running) {
      this.rerunRequested = true;
      return;
    }
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    this.clearTimer();
    const timer = setTimeout(() => void this.tick(), delayMs);
    this.scheduler.addTimeout(DISPATCHER_TIMEOUT_NAME, timer);
  }

  private clearTimer(): void {
    if (this.scheduler.doesExist('timeout', DISPATCHER_TIMEOUT_NAME)) {
      this.scheduler.deleteTimeout(DISPATCHER_TIMEOUT_NAME);
    }
  }

  private async tick(): Promise<void> {
    this.clearTimer();
    if (this.stopping || this.running) return;
    this.running = true;
    this.rerunRequested = false;
    let next = this.options.dispatcher.pollIntervalMs;
    try {
      await this.redeliverEventsWhenDue();
      const { concurrency, batchSize, leaseMs, workerId } = this.options.dispatcher;
      const free = concurrency - this.inFlight.size;
      if (free > 0) {
        const limit = Math.min(batchSize, free);
        const rows = await this.repository.claim(this.em, limit, leaseMs, workerId, randomUUID());
        if (rows.length > 0) {
          this.logger.debug({ msg: 'claimed', count: rows.length, workerId });
        }
        for (const row of rows) this.track(this.deliver(row));
        this.backlogSeen = rows.length === limit;
        if (this.backlogSeen) next = this.inFlight.size < concurrency ? 0 : -1;
      } else {
        next = -1;
      }
    } catch (error) {
      this.logger.error({ msg: 'dispatcher tick failed; trying again after the poll interval', error: String(error) });
    } finally {
      this.running = false;
      this.lastTickAt = new Date();
    }
    if (this.stopping) return;
    if (this.rerunRequested) next = 0;
    // -1: every slot is busy; the next finished send wakes the loop.
    if (next >= 0) this.schedule(next);
  }

  private async redeliverEventsWhenDue(): Promise<void> {
    const now = Date.now();
    if (now - this.lastRedeliveryAt < this.options.dispatcher.pollIntervalMs) return;
    this.lastRedeliveryAt = now;
    await this.publisher.redeliverUnconfirmed();
  }

  private track(delivery: Promise<void>): void {
    this.inFlight.add(delivery);
    void delivery.finally(() => {
      this.inFlight.delete(delivery);
      if (this.backlogSeen) this.wake();
    });
  }

  private async deliver(row: ClaimedRow): Promise<void> {
    const started = performance.now();
    let verdict: SmtpVerdict;
    try {
      verdict = classifyDelivery(await this.transport.send({ messageId: row.messageId, payload: row.payload }));
    } catch (error) {
      verdict = classifyFailure(error as Parameters<typeof classifyFailure>[0]);
    }
    const settlement = settlementFor(row, verdict, this.options.retry, new Date(), Math.round(performance.now() - started));
    this.logSettlement(row, settlement, verdict);
    const eventId = await this.settle(settlement);
    if (eventId) {
      await this.publisher.publish([{ id: eventId, name: settlement.eventName, payload: settlement.eventPayload }]);
    }
  }

  /** Settles with a few retries, since the statement is idempotent; returns the recorded event's id if it applied. */
  private async settle(settlement: Settlement): Promise<string | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        const { applied } = await this.repository.settle(this.em, [settlement], this.options.dispatcher.eventLeaseMs);
        const result = applied.get(settlement.id);
        if (!result) {
          this.logger.warn({
            msg: 'settle ignored: the lease was lost and another worker owns the row',
            id: settlement.id,
            outcome: settlement.outcome,
          });
        }
        return result?.eventId ?? null;
      } catch (error) {
        if (attempt >= SETTLE_RETRIES) {
          this.logger.error({
            msg: 'settle failed; the row is claimed again after its lease',
            id: settlement.id,
            outcome: settlement.outcome,
            error: String(error),
          });
          return null;
        }
        await sleep(100 * 2 ** attempt);
      }
    }
  }

  private logSettlement(row: ClaimedRow, settlement: Settlement, verdict: SmtpVerdict): void {
    const entry = {
      msg: 'settled',
      id: row.id,
      messageId: row.messageId,
      attempt: row.attempts,
      status: settlement.status,
      outcome: settlement.outcome,
      replyCode: verdict.replyCode,
      enhancedStatus: verdict.enhancedStatus,
      nextAttemptAt: settlement.nextAttemptAt?.toISOString(),
      durationMs: settlement.durationMs,
    };
    if (settlement.status === 'dead') {
      this.logger.error({ ...entry, msg: 'dead-lettered', reason: settlement.lastError });
    } else if (verdict.kind === 'sender') {
      this.logger.error({ ...entry, msg: 'the SMTP server refused the sender: check credentials and configuration', reply: verdict.reply });
    } else if (settlement.status === 'sent') {
      this.logger.debug(entry);
    } else {
      this.logger.warn({ ...entry, reply: verdict.reply });
    }
  }
}
