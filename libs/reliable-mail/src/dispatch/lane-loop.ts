// Longer than most files here, on purpose: claiming, the prefetch, the send slots, lease renewal, pacing and
// shutdown all read and change one lane's state (its slots, its claimed-ahead rows, its throttle). What needs no
// such state is apart: sending one row (delivery.ts) and writing the outcome (settler.ts).
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import { anyDue } from '../outbox/sql/any-due.js';
import { claimRows } from '../outbox/sql/claim.js';
import { extendLease } from '../outbox/sql/extend-lease.js';
import { releaseRows } from '../outbox/sql/release.js';
import { releaseUnansweredClaims } from '../outbox/sql/release-unanswered.js';
import { reportedAsOutage } from '../database/database-availability.js';
import type { SqlClient } from '../database/sql-client.js';
import { mayHaveCommittedUnanswered, sqlStateOf } from '../database/statement-refusal.js';
import { DISPATCHER_TIMEOUT_NAME } from '../reliable-mail.constants.js';
import type { ResolvedLane, ResolvedReliableMailOptions } from '../options/resolve-options.js';
import type { Attempt, Delivery } from './delivery.js';
import { reportSettled } from './settled-report.js';
import { leaseForSendAndSettleMs, SETTLE_MARGIN_MS } from './lease.js';
import type { LanePriorities } from './lane-priorities.js';
import { type LanePause, LaneThrottle, type SendSignal } from './lane-throttle.js';
import { loggedReply, type ReplyFacts } from '../shared/logged-reply.js';
import { type AttemptResult, acceptingReply, settlementFor } from './settlement.js';
import type { Settler } from './settler.js';
import { GRANT_TO_SEND_MS, type QuotaTake, type SendQuotaState, type SharedSendQuota } from '../quota/index.js';
import { keptWithinGrant, quotaChargeOf } from '../quota/quota-charge.js';
import { envelopeOf } from './envelope.js';

/** PostgreSQL's answers to a statement that met another transaction's change: a serialization failure, a deadlock. */
const CONCURRENT_CHANGE = new Set(['40001', '40P01']);
/** Settles that may wait per send slot before the lane stops claiming: a slow database slows the lane down. */
const PENDING_SETTLES_PER_SLOT = 4;
/**
 * How long past its deadline a send may still run before the loop counts as stuck: the deadline aborts it, and the
 * transport must stop at once and report; a moment more is its own cleanup on a busy machine.
 */
const SEND_ABORT_SLACK_MS = 1_000;

export interface LaneLoopDependencies {
  database: SqlClient;
  scheduler: SchedulerRegistry;
  /** Makes one attempt at a row; the loop never sees SQL or SMTP. */
  delivery: Delivery;
  settler: Settler;
  /** Shared by the lanes of the instance: a lane starts no send while one of a higher priority is busy. */
  priorities: LanePriorities;
  /** The provider's limits the lane shares with every instance (`lanes.<name>.quota`); null for none. */
  quota: SharedSendQuota | null;
  publisher: MailEventPublisher;
  metrics: MailMetrics;
  options: ResolvedReliableMailOptions;
  logger: Logger;
}

/**
 * What an attempt says about the lane's server; null when it says nothing (a refusal, a mail not rendered, now or
 * ever). A Retry-After is a request to slow down, whatever the answer that carried it.
 */
export function signalOf(result: AttemptResult): SendSignal | null {
  if (result.kind === 'outage') return 'outage';
  if (result.kind === 'unrenderable' || 'renderDeferred' in result) return null;
  if (result.slowDown || (result.retryAfterMs ?? 0) > 0) return 'slow-down';
  if (result.recipients.some((recipient) => recipient.status === 'accepted')) return 'ok';
  const connectionLost = result.recipients.some(
    (recipient) => recipient.replyCode === null && recipient.status !== 'refused',
  );
  return connectionLost ? 'connection-failure' : null;
}

/**
 * What the server answered that paused the lane, as a log shows a reply (`loggedReply`: a reply to a recipient often
 * names it): a refused session's reply, or the first reply not taking the mail.
 */
function replyOf(result: AttemptResult): ReplyFacts | null {
  if (result.kind === 'outage') return loggedReply(result);
  if (result.kind === 'unrenderable') return null;
  const shown = result.recipients.find((recipient) => recipient.status !== 'accepted') ?? acceptingReply(result);
  return shown ? loggedReply(shown) : null;
}

/**
 * The claim-send-settle loop of one lane. It reschedules itself through the scheduler registry so that two claims
 * of the lane never overlap, and keeps at most one slot's worth of rows claimed ahead of its free send slots (and
 * rate tokens), so a claimed row waits in memory for one send at most.
 */
export class LaneLoop {
  /** Sends under way (SMTP conversations or provider requests): at most `lane.concurrency`. */
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
  /** Aborted at stop: a send in several requests or transactions makes no further one (`OutboundMessage.stopping`). */
  private readonly stopSignal = new AbortController();
  private rerunRequested = false;
  /** The last claim filled its limit, so a freed slot should claim again without waiting for a poll. */
  private backlogSeen = false;
  /** The last claim found no row: a lane with a quota asks whether any is due before its next poll takes a grant. */
  private foundNoneDue = false;
  /** Woken (an enqueue's NOTIFY, a freed slot) since the last claim: rows are likely due, and the claim asks not. */
  private wokenUp = false;
  /** When each send under way started (`performance.now()`). */
  private readonly sendsStartedAt = new Map<ClaimedRow, number>();
  /**
   * When the loop last showed that it runs: its start, the end of a tick (a claim, or a failed one), or the end of a
   * send (a freed slot's next row may wait for a lease renewal before the loop ticks again).
   */
  private lastSignOfLife: Date | null = null;
  /**
   * The tokens of claims that failed but may have committed all the same (the answer lost on a connection that
   * went silent), with when their lease ends (`performance.now()`): their rows are handed back at the next ticks,
   * at most once per poll interval, until that lease would free them anyway. Kept after a hand-back succeeds, since
   * a claim may still reach the server late.
   */
  private readonly unansweredClaims = new Map<string, number>();
  private nextHandBackAt = 0;
  /** When the shared quota, found spent or paused, may grant again (`performance.now()`); 0 when it may now. */
  private quotaReadyAt = 0;
  /**
   * What the lane's claimed rows cost its quota on average, recently (1 where it counts messages, or for mails to one
   * recipient): a claim takes the rows its grant can cover, not one per grant, so that few go back unsent.
   */
  private chargePerRow = 1;
  /**
   * Rows of a rate-limited lane whose send waits for its grant's time (`performance.now()`, so that a step of the
   * wall clock neither holds them longer nor lets them go early). They take no slot while held: a lane's sends are
   * not made fewer by the hold, only later.
   */
  private readonly heldUntil = new WeakMap<ClaimedRow, number>();
  /** The pump that starts the first held row when its time comes. */
  private heldRowTimer: NodeJS.Timeout | null = null;

  constructor(
    readonly lane: ResolvedLane,
    private readonly deps: LaneLoopDependencies,
  ) {
    this.throttle = new LaneThrottle(lane.ratePerSecond, Date.now());
    this.timerName = `${DISPATCHER_TIMEOUT_NAME}:${lane.name}`;
    deps.priorities.onResume(lane.name, () => {
      this.pump();
      if (this.backlogSeen) this.wakeForRoom();
    });
  }

  private get stopping(): boolean {
    return this.stopSignal.signal.aborted;
  }

  start(): void {
    this.lastSignOfLife = new Date();
    this.schedule(0);
  }

  /**
   * Stops claiming, hands back the prefetched rows that were not started, and waits up to `timeoutMs` for the sends
   * in flight and their settles; returns how many did not finish.
   */
  async stop(timeoutMs: number): Promise<number> {
    this.stopSignal.abort();
    this.clearTimer();
    if (this.heldRowTimer) clearTimeout(this.heldRowTimer);
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
    this.noteBusy();
    if (unstarted.length === 0) return;
    try {
      await releaseRows(this.deps.database, unstarted);
    } catch (error) {
      if (reportedAsOutage(error)) return;
      this.deps.logger.warn({
        msg: 'could not hand back unstarted rows; they are claimed again after the lease',
        count: unstarted.length,
        error: String(error),
      });
    }
  }

  /** Hands back the rows of claims that failed but may have committed (see `unansweredClaims`). */
  private async handBackUnanswered(): Promise<void> {
    const now = performance.now();
    for (const [token, leaseEndsAt] of this.unansweredClaims)
      if (leaseEndsAt <= now) this.unansweredClaims.delete(token);
    if (this.unansweredClaims.size === 0 || now < this.nextHandBackAt) return;
    this.nextHandBackAt = now + this.deps.options.dispatcher.pollIntervalMs;
    try {
      const count = await releaseUnansweredClaims(this.deps.database, this.lane.name, [
        ...this.unansweredClaims.keys(),
      ]);
      if (count > 0)
        this.deps.logger.warn({
          msg: 'handed back rows of a claim whose answer was lost; they were not sent',
          lane: this.lane.name,
          count,
        });
    } catch (error) {
      // The database is still away: the claim that follows fails too, and this is tried again at a later tick.
      if (!reportedAsOutage(error))
        this.deps.logger.debug({ msg: 'could not hand back the rows of unanswered claims', error: String(error) });
    }
  }

  /**
   * A mail was committed to this lane (its NOTIFY). An idle lane claims at once, in a microtask ahead of the other I/O
   * callbacks of this turn of the event loop: on the next turn, a login code's claim waited for the replies of the
   * bulk lane's sends first, its wake-up to its claim taking 1.0-1.1 ms at p90 and 2.7-5.7 ms at p99 while a bulk
   * backlog drained, against 0.04 and 0.07-0.12 ms in a microtask (docs/benchmarks.md, 2026-12-06). A lane that is
   * claiming runs again once that claim is done; a draining lane (its last claim filled its limit) is woken by its
   * freed slots already, and waits for the next turn as they do, since a claim at once would take only the room freed
   * so far.
   */
  wake(): void {
    this.runAgain(!this.backlogSeen);
  }

  /**
   * Slots or a hold were freed: the loop runs on the event loop's next turn, so that the sends finishing in this one
   * share one claim rather than each making a claim of its own.
   */
  private wakeForRoom(): void {
    this.runAgain(false);
  }

  private runAgain(atOnce: boolean): void {
    if (this.stopping) return;
    this.wokenUp = true;
    if (this.running) {
      this.rerunRequested = true;
      return;
    }
    if (atOnce) queueMicrotask(() => void this.tick());
    else this.schedule(0);
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
      this.noteBusy();
    });
    this.noteBusy();
    return this.running;
  }

  private async claimAndStart(): Promise<void> {
    this.rerunRequested = false;
    this.pump();
    const { batchSize, pollIntervalMs } = this.deps.options.dispatcher;
    // -1: the slots and the prefetch are full, and the next finished send or settle wakes the loop.
    let next = pollIntervalMs;
    try {
      const settlesBehind = this.settling.size >= this.lane.concurrency * PENDING_SETTLES_PER_SLOT;
      const room = settlesBehind ? 0 : this.prefetch * this.slots - this.inFlight.size - this.unheldReady();
      const granted = room > 0 ? this.throttle.take(Math.min(batchSize, room), Date.now()) : 0;
      if (room <= 0) {
        this.backlogSeen = true;
        next = -1;
      } else if (granted === 0) {
        // A paused lane still ticks at the poll interval, so the health indicator sees its loop alive.
        next = Math.max(1, Math.min(this.throttle.waitMs(Date.now()), pollIntervalMs));
      } else {
        next = await this.claim(granted);
      }
    } catch (error) {
      if (CONCURRENT_CHANGE.has(sqlStateOf(error) ?? '')) {
        // Another transaction changed a row under the claim (retention moving a kept row to today's partition, an
        // operator's requeue): nothing is wrong, and the claim, which took nothing, runs again at the next poll.
        this.deps.logger.debug({ msg: 'claim met a concurrent change', lane: this.lane.name, error: String(error) });
      }
      // An outage fails every claim of every lane at every poll: the database logged it once.
      else if (!reportedAsOutage(error))
        this.deps.logger.error({
          msg: 'claim failed; trying again after the poll interval',
          lane: this.lane.name,
          error: String(error),
        });
    } finally {
      this.lastSignOfLife = new Date();
    }
    if (this.stopping) return;
    if (this.rerunRequested && next !== -1) next = Math.min(next, this.throttle.waitMs(Date.now()));
    // Scheduled once this tick is no longer running, so that an immediate rerun is not refused as an overlap.
    if (next >= 0) setImmediate(() => this.schedule(next));
  }

  /**
   * Claims up to `granted` rows (what the lane's own rate allows), within the provider's limits that every instance
   * shares when the lane has a `quota`; returns when to tick again, -1 when a finished send will.
   */
  private async claim(granted: number): Promise<number> {
    const { leaseMs, workerId, pollIntervalMs } = this.deps.options.dispatcher;
    await this.handBackUnanswered();
    // While the last take found the quota spent or paused, a wake-up (every enqueue's NOTIFY) takes nothing more
    // from the one row every instance shares before the next poll.
    const quotaWaitMs = Math.ceil(this.quotaReadyAt - performance.now());
    if (this.deps.quota && quotaWaitMs > 0) {
      this.throttle.giveBack(granted);
      return Math.min(quotaWaitMs, pollIntervalMs);
    }
    const woken = this.wokenUp;
    this.wokenUp = false;
    let shared: QuotaTake | null = null;
    try {
      if (this.deps.quota && this.foundNoneDue && !woken && !(await anyDue(this.deps.database, this.lane.name))) {
        this.throttle.giveBack(granted);
        return pollIntervalMs;
      }
      shared = this.deps.quota ? await this.deps.quota.take(granted) : null;
    } catch (error) {
      this.throttle.giveBack(granted);
      throw error;
    }
    // When a take of the shared quota could grant again, on this process's clock: any lateness costs rate.
    const sharedReadyAt = performance.now() + (shared?.waitMs ?? 0);
    const limit = shared?.granted ?? granted;
    this.throttle.giveBack(granted - limit);
    if (limit === 0) {
      // Over the provider's limits: nothing is claimed, so no attempt is charged.
      // Asked again at the next poll at the latest: another instance may give grants back, or the limits change.
      this.quotaReadyAt = performance.now() + Math.min(shared!.waitMs, pollIntervalMs);
      return Math.max(1, Math.min(shared!.waitMs, pollIntervalMs));
    }
    const lockToken = randomUUID();
    const rowLimit = shared && this.quotaLimited() ? Math.max(1, Math.floor(limit / this.chargePerRow)) : limit;
    const rows = await claimRows(this.deps.database, {
      lane: this.lane.name,
      limit: rowLimit,
      lockToken,
      workerId,
      leaseMs,
      maxAgeMs: this.deps.options.retry.maxAgeMs,
      unsubscribeCategory: this.lane.unsubscribe?.category,
    }).catch((error: unknown) => {
      // Only a claim that may have committed holds rows: one that never left, or that PostgreSQL refused (and
      // so rolled back), has nothing to hand back, and what it was granted goes back.
      if (mayHaveCommittedUnanswered(error)) this.unansweredClaims.set(lockToken, performance.now() + leaseMs);
      else {
        this.throttle.giveBack(limit);
        if (shared) this.settleQuota(shared, 0);
      }
      throw error;
    });
    this.foundNoneDue = rows.length === 0;
    const { kept, charge } = shared ? await this.withinGrant(rows, shared.granted) : { kept: rows, charge: 0 };
    this.throttle.giveBack(limit - kept.length);
    if (kept.length > 0 && this.deps.options.logging.perMail)
      this.deps.logger.debug({ msg: 'claimed', lane: this.lane.name, count: kept.length, workerId });
    // At most GRANT_TO_SEND_MS from now, whatever the clock did since the take; rows closed at their claim send
    // nothing and are not held.
    const holdMs = Math.min(GRANT_TO_SEND_MS, Math.max(0, (shared?.sendsStartAt ?? 0) - Date.now()));
    if (holdMs > 0)
      for (const row of kept) if (row.skipReason === null) this.heldUntil.set(row, performance.now() + holdMs);
    this.ready.push(...kept);
    this.pump();
    if (shared) this.settleQuota(shared, charge);
    // Rows handed back past the grant are due rows too.
    this.backlogSeen = rows.length === rowLimit || kept.length < rows.length;
    if (!this.backlogSeen) return pollIntervalMs;
    if (this.inFlight.size + this.unheldReady() >= this.prefetch * this.slots) return -1;
    return Math.max(this.throttle.waitMs(Date.now()), Math.ceil(sharedReadyAt - performance.now()));
  }

  /** The rows claimed ahead that are not held for their grant's time (only a lane with a quota holds any). */
  private unheldReady(): number {
    if (!this.deps.quota) return this.ready.length;
    const now = performance.now();
    let unheld = 0;
    for (const row of this.ready) if ((this.heldUntil.get(row) ?? 0) <= now) unheld++;
    return unheld;
  }

  /**
   * The claimed rows the quota's grant covers, and what they cost it as its provider counts (`quotaChargeOf`): where
   * it counts recipients, the rows claimed for a grant can hold more recipients than were granted, and those past the
   * grant go back to the queue untouched. Rows closed at their claim (suppressed, unsubscribed, cancelled) cost
   * nothing. A hand-back that fails leaves its rows to their lease.
   */
  private async withinGrant(rows: ClaimedRow[], granted: number): Promise<{ kept: ClaimedRow[]; charge: number }> {
    const quota = this.deps.quota!;
    const copies = this.lane.unsubscribe !== null;
    const charges = rows.map((row) =>
      row.skipReason === null ? quotaChargeOf(envelopeOf(row).length, quota.counts, copies) : 0,
    );
    // With no limit in force the take granted what was asked: nothing to trim.
    const covered = this.quotaLimited() ? keptWithinGrant(charges, granted) : charges.map(() => true);
    // The rows kept that send, not those handed back, which count when they are claimed again.
    const sending = charges.filter((charge, index) => covered[index] && charge > 0);
    if (sending.length > 0) {
      const average = sending.reduce((sum, charge) => sum + charge, 0) / sending.length;
      this.chargePerRow = Math.max(1, (this.chargePerRow * 3 + average) / 4);
    }
    const kept = rows.filter((_row, index) => covered[index]);
    const beyond = rows.filter((_row, index) => !covered[index]);
    if (beyond.length > 0) {
      try {
        await releaseRows(this.deps.database, beyond);
      } catch (error) {
        if (!reportedAsOutage(error))
          this.deps.logger.warn({
            msg: 'could not hand back the rows past the quota; they are claimed again after the lease',
            count: beyond.length,
            error: String(error),
          });
      }
    }
    return { kept, charge: charges.reduce((sum, charge, index) => (covered[index] ? sum + charge : sum), 0) };
  }

  /**
   * Whether the lane's quota had a limit in force at its latest take; without one (none given, or the provider's
   * unread) a take grants what it is asked.
   */
  private quotaLimited(): boolean {
    const { perSecond, perDay } = this.deps.quota!.state().limits;
    return perSecond !== null || perDay !== null;
  }

  /** Settles a take of the shared quota once the rows are in hand: a failure costs only its grants' accuracy. */
  private settleQuota(take: QuotaTake, used: number): void {
    // Nothing to give back or charge: no statement, and no wake-up when it ends.
    if (used === take.granted) return;
    this.track(
      this.deps.quota!.settle(take, used).catch((error: unknown) => {
        if (!reportedAsOutage(error))
          this.deps.logger.warn({
            msg: 'could not settle the quota',
            lane: this.lane.name,
            error: String(error),
          });
      }),
      this.settling,
    );
  }

  /**
   * How many slots' worth of rows the lane holds, sending and claimed ahead: two, so that a freed slot starts its
   * next send at once; one for a lane with a shared quota, whose takes must be followed by their sends at once: a
   * row granted now and sent a send later would put two seconds' grants into one second at the provider.
   */
  private get prefetch(): 1 | 2 {
    return this.deps.quota ? 1 : 2;
  }

  /**
   * The sends the lane may have in flight: its concurrency, or one while a lane of a higher priority is busy. One,
   * not none, so that a lane above that never goes quiet slows this one down without stopping it.
   */
  private get slots(): number {
    return this.deps.priorities.holdsBack(this.lane.name) ? 1 : this.lane.concurrency;
  }

  /**
   * Starts sends from the prefetched rows while there are free slots and the lane is not paused; a row held for its
   * grant's time (and those claimed after it) waits for a timer.
   */
  private pump(): void {
    while (
      !this.stopping &&
      !this.throttle.isPaused(Date.now()) &&
      this.inFlight.size < this.slots &&
      this.ready.length > 0
    ) {
      const heldForMs = (this.heldUntil.get(this.ready[0]) ?? 0) - performance.now();
      if (heldForMs > 0) {
        this.heldRowTimer ??= setTimeout(() => {
          this.heldRowTimer = null;
          this.pump();
        }, heldForMs);
        break;
      }
      this.track(this.process(this.ready.shift()!));
    }
    this.noteBusy();
  }

  /**
   * Claiming, or with a mail in hand: the lanes of a lower priority send one at a time meanwhile. Rows a paused lane
   * holds do not count, as it sends none of them until its pause ends (then its tick pumps, and counts them again).
   */
  private noteBusy(): void {
    const holdsRows = this.ready.length > 0 && !this.throttle.isPaused(Date.now());
    this.deps.priorities.setBusy(this.lane.name, this.running !== null || this.inFlight.size > 0 || holdsRows);
  }

  private track(work: Promise<void>, set = this.inFlight): void {
    set.add(work);
    void work.finally(() => {
      set.delete(work);
      this.pump();
      if (this.backlogSeen) this.wakeForRoom();
    });
  }

  /**
   * When the loop last showed that it runs (null before its start), or now while every slot holds a send still within
   * its deadline (one slot while the lane is held back, see `slots`). The loop then waits for a slot to free rather
   * than tick, and sends to a server that stalls each take up to `sendTimeoutMs` (3 min by default): that is a slow
   * server, which the backlog and lag report, not a dead loop. A send past its deadline and margin means the loop is
   * stuck.
   */
  get activeAt(): Date | null {
    const lastSeen = this.lastSignOfLife;
    if (lastSeen === null || this.sendsStartedAt.size < this.slots) return lastSeen;
    const oldest = Math.min(...this.sendsStartedAt.values());
    const withinDeadline =
      performance.now() - oldest <= this.deps.options.dispatcher.sendTimeoutMs + SEND_ABORT_SLACK_MS;
    return withinDeadline ? new Date() : lastSeen;
  }

  /** The shared quota as the lane's latest take found it; null for a lane without one. */
  get quotaState(): SendQuotaState | null {
    return this.deps.quota?.state() ?? null;
  }

  /** Why the lane is paused, if it is (or was, while it probes with one message). */
  get pausedFor(): LanePause | null {
    return this.throttle.pausedFor;
  }

  /** The SMTP conversations (or provider requests) under way: the rows claimed ahead and settles are not counted. */
  get sendsInFlight(): number {
    return this.inFlight.size;
  }

  /**
   * One row's way from its claim to its settle, top to bottom: its lease checked, one attempt (or none, for a row
   * its claim said not to send), what the attempt says of the lane's server, the settle decision, then the settle
   * and what follows it. The send holds a slot; the settle and its report follow without it, so the slot takes the
   * next row at once.
   */
  private async process(row: ClaimedRow): Promise<void> {
    if (!(await this.holdsLease(row))) return;
    let settlement: Settlement;
    try {
      settlement = row.skipReason
        ? settlementFor(row, { kind: 'skipped', reason: row.skipReason }, this.deps.options.retry, new Date(), 0)
        : await this.attemptAndDecide(row);
    } catch (error) {
      return this.leftToItsLease(row, 'send', error);
    }
    this.track(
      this.settle(row, settlement).catch((error: unknown) => this.leftToItsLease(row, 'settle', error)),
      this.settling,
    );
  }

  /** One attempt, what it says of the lane's server (`pace`), and the settle decision on it. */
  private async attemptAndDecide(row: ClaimedRow): Promise<Settlement> {
    this.sendsStartedAt.set(row, performance.now());
    let attempt: Attempt;
    try {
      attempt = await this.deps.delivery.attempt(row, this.stopSignal.signal);
    } finally {
      this.sendsStartedAt.delete(row);
      this.lastSignOfLife = new Date();
    }
    const resumesAt = this.pace(attempt.result);
    return settlementFor(row, attempt.result, this.deps.options.retry, new Date(), attempt.durationMs, resumesAt);
  }

  /**
   * A send or settle that threw, which neither should: logged, and the row stays `sending` until its lease ends and
   * a claim takes it again. Never a rejected promise, which would end as an unhandled rejection.
   */
  private leftToItsLease(row: ClaimedRow, step: 'send' | 'settle', error: unknown): void {
    this.deps.logger.error({
      msg: `the ${step} of a row threw; a row left unsettled is claimed again after its lease`,
      id: row.id,
      lane: this.lane.name,
      error: error instanceof Error ? (error.stack ?? String(error)) : String(error),
    });
  }

  /**
   * A row claimed ahead may have waited for its slot, for up to one send. Its lease is renewed before its own send
   * once it waited more than half a send timeout, or once what is left would cut its send by more than a tenth of
   * its deadline: the send must leave its settle a statement's whole bound (`leaseForSendAndSettleMs`), and is cut
   * to fit (see `Delivery`). A row whose claim was lost meanwhile is not sent; nor is one whose renewal failed, unless
   * a whole send and its settle's statement still fit in what is left.
   */
  private async holdsLease(row: ClaimedRow): Promise<boolean> {
    const { leaseMs, sendTimeoutMs } = this.deps.options.dispatcher;
    const needed = leaseForSendAndSettleMs(sendTimeoutMs, this.deps.options.database.statementTimeoutMs);
    const left = row.leaseEndsAt - performance.now();
    if (left >= leaseMs - sendTimeoutMs / 2 && left >= needed - sendTimeoutMs / 10) return true;
    const renewedAt = performance.now();
    try {
      // Bounded by the lease it renews: once that ended, the row may be another worker's.
      const bound = { timeoutMs: left - SETTLE_MARGIN_MS };
      if (!(await extendLease(this.deps.database, row, leaseMs, bound))) {
        this.deps.logger.warn({ msg: 'a row claimed ahead lost its lease before its send; not sent', id: row.id });
        return false;
      }
      row.leaseEndsAt = renewedAt + leaseMs;
      return true;
    } catch (error) {
      const fits = row.leaseEndsAt - performance.now() >= needed;
      if (!reportedAsOutage(error))
        this.deps.logger.warn({
          msg: fits
            ? 'could not renew the lease of a row claimed ahead; sent, as a send and its settle still fit in its lease'
            : 'could not renew the lease of a row claimed ahead; not sent, it is claimed again after its lease',
          id: row.id,
          error: String(error),
        });
      return fits;
    }
  }

  /**
   * Records what an attempt said about the server (and how long it asked the lane to wait); returns when the lane
   * sends again. The log says when the lane's trouble begins and when it ends, not each failed probe between.
   */
  private pace(result: AttemptResult): Date {
    const signal = signalOf(result);
    if (signal) {
      const wasPaused = this.throttle.isPaused(Date.now());
      const change = this.throttle.record(signal, Date.now(), result.kind === 'unrenderable' ? 0 : result.retryAfterMs);
      if (change?.kind === 'paused') {
        this.deps.logger.warn({
          msg: 'lane paused',
          lane: this.lane.name,
          reason: change.pause.reason,
          reply: replyOf(result),
          until: change.pause.until.toISOString(),
          probing: 'one mail at a time until one goes through, at intervals doubling up to a minute',
        });
      } else if (change) {
        const { reason, pausedForMs, failedProbes } = change;
        this.deps.logger.log({ msg: 'lane resumed', lane: this.lane.name, reason, pausedForMs, failedProbes });
      }
      // A paused lane sends nothing more, so the rows it claimed ahead go back rather than wait out the pause.
      if (!wasPaused && this.throttle.isPaused(Date.now())) this.track(this.handBackReady(), this.settling);
    }
    // A send held back (`heldBack`) waited for this instance's own request pacing, not for the provider.
    const retryAfterMs =
      result.kind === 'unrenderable' || (result.kind === 'attempted' && result.heldBack)
        ? undefined
        : result.retryAfterMs;
    // The provider's Retry-After holds every instance sending through the same account, not this one alone.
    if (this.deps.quota && retryAfterMs)
      this.track(
        this.deps.quota.pauseFor(retryAfterMs).catch((error: unknown) => {
          if (!reportedAsOutage(error))
            this.deps.logger.warn({
              msg: "could not share the provider's Retry-After with the other instances",
              lane: this.lane.name,
              error: String(error),
            });
        }),
        this.settling,
      );
    return new Date(Date.now() + this.throttle.waitMs(Date.now()));
  }

  /** Writes the settlement; only then is the row's attempt counted, logged and its event emitted. */
  private async settle(row: ClaimedRow, settlement: Settlement): Promise<void> {
    const written = await this.deps.settler.settle(settlement, row.leaseEndsAt - SETTLE_MARGIN_MS);
    reportSettled({ ...this.deps, perMail: this.deps.options.logging.perMail }, row, settlement, written);
  }
}
