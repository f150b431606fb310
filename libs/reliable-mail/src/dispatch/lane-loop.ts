import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import { claimRows } from '../outbox/sql/claim.js';
import { releaseRows } from '../outbox/sql/release.js';
import type { SqlClient } from '../database/sql-client.js';
import { DISPATCHER_TIMEOUT_NAME } from '../reliable-mail.constants.js';
import type { ResolvedLane, ResolvedReliableMailOptions } from '../options/resolve-options.js';
import type { Delivery } from './delivery.js';
import { LaneThrottle, type SendSignal } from './lane-throttle.js';
import type { Settler } from './settler.js';
import type { SmtpVerdict } from './smtp-reply.js';

/** Settles that may wait per send slot before the lane stops claiming: a slow database slows the lane down. */
const PENDING_SETTLES_PER_SLOT = 4;
/** A settle gives up this long before the row's lease ends, rather than race another worker's claim. */
const SETTLE_MARGIN_MS = 1_000;

export interface LaneLoopDependencies {
  database: SqlClient;
  scheduler: SchedulerRegistry;
  /** Sends one row and decides its settlement; the loop never sees SQL or SMTP. */
  delivery: Delivery;
  settler: Settler;
  publisher: MailEventPublisher;
  metrics: MailMetrics;
  options: ResolvedReliableMailOptions;
  logger: Logger;
}

function signalOf(verdict: SmtpVerdict): SendSignal | null {
  if (verdict.kind === 'sent') return 'ok';
  if (verdict.kind === 'sender' || (verdict.kind === 'transient' && verdict.slowDown)) return 'slow-down';
  if (verdict.kind === 'transient' && verdict.replyCode === null) return 'connection-failure';
  return null;
}

/**
 * The claim-send-settle loop of one lane. It reschedules itself through the scheduler registry so that two claims
 * of the lane never overlap, and keeps at most one slot's worth of rows claimed ahead of its free send slots (and
 * rate tokens), so a claimed row waits in memory for one send at most.
 */
export class LaneLoop {
  /** SMTP conversations under way: at most `lane.concurrency`. */
  private readonly inFlight = new Set<Promise<void>>();
  /** Settles (and their events) of finished sends, which no longer hold a send slot. */
  private readonly settling = new Set<Promise<void>>();
  /**
   * Claimed rows waiting for a slot: up to `lane.concurrency` are claimed ahead, so a slot that frees starts its
   * next send at once instead of waiting for a claim. Handed back untouched at shutdown.
   */
  private readonly ready: ClaimedRow[] = [];
  private readonly throttle: LaneThrottle;
  private readonly timerName: string;
  /** The tick under way, if any: shutdown waits for its claim before handing rows back. */
  private running: Promise<void> | null = null;
  private stopping = false;
  private rerunRequested = false;
  /** The last claim filled its limit, so a freed slot should claim again without waiting for a poll. */
  private backlogSeen = false;
  lastTickAt: Date | null = null;

  constructor(
    readonly lane: ResolvedLane,
    private readonly deps: LaneLoopDependencies,
  ) {
    this.throttle = new LaneThrottle(lane.ratePerSecond, Date.now());
    this.timerName = `${DISPATCHER_TIMEOUT_NAME}:${lane.name}`;
  }

  start(): void {
    this.schedule(0);
  }

  /**
   * Stops claiming, hands back the prefetched rows that were not started, and waits up to `timeoutMs` for the sends
   * in flight and their settles; returns how many did not finish.
   */
  async stop(timeoutMs: number): Promise<number> {
    this.stopping = true;
    this.clearTimer();
    // Whatever the database does, shutdown takes no longer than timeoutMs: a claim or a hand-back that hangs on a
    // dead connection is left behind, and its rows come back after their lease.
    const deadline = sleep(timeoutMs, undefined, { ref: false });
    const drained = (async () => {
      await this.running;
      await this.handBackReady();
      while (this.inFlight.size + this.settling.size > 0)
        await Promise.allSettled([...this.inFlight, ...this.settling]);
    })();
    await Promise.race([drained, deadline]);
    return this.inFlight.size + this.settling.size + this.ready.length;
  }

  /** Returns the rows claimed ahead to the queue untouched, as if they had never been claimed. */
  private async handBackReady(): Promise<void> {
    const unstarted = this.ready.splice(0);
    if (unstarted.length === 0) return;
    try {
      await releaseRows(this.deps.database, unstarted);
    } catch (error) {
      this.deps.logger.warn({
        msg: 'could not hand back unstarted rows; they are claimed again after the lease',
        count: unstarted.length,
        error: String(error),
      });
    }
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
    if (this.stopping) return;
    // A timer's shortest delay is a millisecond: work that is due now runs on the next turn of the event loop.
    if (delayMs <= 0) setImmediate(() => void this.tick());
    else
      this.deps.scheduler.addTimeout(
        this.timerName,
        setTimeout(() => void this.tick(), delayMs),
      );
  }

  private clearTimer(): void {
    if (this.deps.scheduler.doesExist('timeout', this.timerName)) this.deps.scheduler.deleteTimeout(this.timerName);
  }

  private tick(): Promise<void> {
    this.clearTimer();
    if (this.stopping || this.running) return Promise.resolve();
    this.running = this.claimAndStart().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async claimAndStart(): Promise<void> {
    this.rerunRequested = false;
    this.pump();
    const { batchSize, leaseMs, workerId, pollIntervalMs } = this.deps.options.dispatcher;
    // -1: the slots and the prefetch are full, and the next finished send or settle wakes the loop.
    let next = pollIntervalMs;
    try {
      const settlesBehind = this.settling.size >= this.lane.concurrency * PENDING_SETTLES_PER_SLOT;
      const room = settlesBehind ? 0 : 2 * this.lane.concurrency - this.inFlight.size - this.ready.length;
      const granted = room > 0 ? this.throttle.take(Math.min(batchSize, room), Date.now()) : 0;
      if (room <= 0) {
        this.backlogSeen = true;
        next = -1;
      } else if (granted === 0) {
        // A paused lane still ticks at the poll interval, so the health indicator sees its loop alive.
        next = Math.max(1, Math.min(this.throttle.waitMs(Date.now()), pollIntervalMs));
      } else {
        const rows = await claimRows(this.deps.database, {
          lane: this.lane.name,
          limit: granted,
          lockToken: randomUUID(),
          workerId,
          leaseMs,
          maxAgeMs: this.deps.options.retry.maxAgeMs,
        });
        this.throttle.giveBack(granted - rows.length);
        if (rows.length > 0)
          this.deps.logger.debug({ msg: 'claimed', lane: this.lane.name, count: rows.length, workerId });
        this.ready.push(...rows);
        this.pump();
        this.backlogSeen = rows.length === granted;
        if (this.backlogSeen)
          next =
            this.inFlight.size + this.ready.length < 2 * this.lane.concurrency ? this.throttle.waitMs(Date.now()) : -1;
      }
    } catch (error) {
      this.deps.logger.error({
        msg: 'claim failed; trying again after the poll interval',
        lane: this.lane.name,
        error: String(error),
      });
    } finally {
      this.lastTickAt = new Date();
    }
    if (this.stopping) return;
    if (this.rerunRequested && next !== -1) next = Math.min(next, this.throttle.waitMs(Date.now()));
    // Scheduled once this tick is no longer running, so that an immediate rerun is not refused as an overlap.
    if (next >= 0) setImmediate(() => this.schedule(next));
  }

  /** Starts sends from the prefetched rows while there are free slots and the lane is not paused. */
  private pump(): void {
    while (
      !this.stopping &&
      !this.throttle.isPaused(Date.now()) &&
      this.inFlight.size < this.lane.concurrency &&
      this.ready.length > 0
    ) {
      this.track(this.process(this.ready.shift()!));
    }
  }

  private track(work: Promise<void>, set = this.inFlight): void {
    set.add(work);
    void work.finally(() => {
      set.delete(work);
      this.pump();
      if (this.backlogSeen) this.wake();
    });
  }

  /** The send holds a slot; its settle and event follow without it, so the slot takes the next row at once. */
  private async process(row: ClaimedRow): Promise<void> {
    const { settlement, verdict } = await this.deps.delivery.deliver(row);
    const signal = verdict && signalOf(verdict);
    if (signal) {
      this.throttle.record(signal, Date.now());
      // A paused lane sends nothing more, so the rows it claimed ahead go back rather than wait out the pause.
      if (this.throttle.isPaused(Date.now())) this.track(this.handBackReady(), this.settling);
    }
    this.track(this.finish(row, settlement), this.settling);
  }

  private async finish(row: ClaimedRow, settlement: Settlement): Promise<void> {
    const outcome = await this.deps.settler.settle(settlement, row.leaseEndsAt - SETTLE_MARGIN_MS);
    if (!outcome?.applied) return;
    if (settlement.status !== 'pending')
      this.deps.metrics.recordFinal(row.lane, settlement.status, row.attempts - settlement.refundAttempt);
    if (outcome.event) await this.deps.publisher.publish([outcome.event]);
  }
}
