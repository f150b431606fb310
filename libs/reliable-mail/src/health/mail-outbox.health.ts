import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { MailDispatcher } from '../dispatch/mail.dispatcher.js';
import { MailEventPublisher } from '../events/mail-event.publisher.js';
import { OutboxDatabase } from '../database/outbox-database.js';
import { MailEventRelay } from '../relay/mail-event-relay.js';
import { MIN_PARTITIONS_AHEAD } from '../schema/partitioned-layout.js';
import { oldestUnconfirmedEvent } from '../outbox/sql/events.js';
import { feedbackFigures, healthFigures, partitionsAhead, rateOf, undeclaredLanes } from '../outbox/sql/health.js';
import { MAIL_TRANSPORTS, RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import type { HealthOptions } from '../options/reliable-mail-options.interface.js';
import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';

/**
 * A terminus indicator for the app's health check: the database answers, the dispatcher's loops run, the backlog and
 * its lag stay under their thresholds, dead letters stay few, events reach their listeners and relay destinations,
 * complaints and hard bounces stay under the rates that get sending accounts suspended, and (optionally) each lane's
 * SMTP server or provider API answers. An outage of either shows here as a growing backlog and a paused lane, never as
 * lost mail.
 */
@Injectable()
export class MailOutboxHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    private readonly database: OutboxDatabase,
    private readonly dispatcher: MailDispatcher,
    private readonly publisher: MailEventPublisher,
    private readonly relay: MailEventRelay,
    @Inject(MAIL_TRANSPORTS) private readonly transports: Map<string, MailTransport>,
    @Inject(RELIABLE_MAIL_OPTIONS) private readonly options: ResolvedReliableMailOptions,
  ) {}

  async isHealthy<const Key extends string = 'mail'>(
    key: Key = 'mail' as Key,
    overrides: HealthOptions = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const thresholds = { ...this.options.health, ...overrides };
    const indicator = this.health.check(key);
    const failing: string[] = [];

    let figures;
    let undeclared: Record<string, number>;
    let feedback;
    let oldestEvent;
    let daysAhead;
    let relayBacklogs;
    let abandonedDestinations;
    try {
      [figures, undeclared, feedback, oldestEvent, daysAhead, relayBacklogs, abandonedDestinations] = await Promise.all(
        [
          healthFigures(this.database, thresholds.deadLetterWindowMs),
          undeclaredLanes(
            this.database,
            this.options.lanes.map((lane) => lane.name),
          ),
          feedbackFigures(this.database, thresholds.feedbackWindowMs),
          oldestUnconfirmedEvent(this.database, this.publisher.listenedNames()),
          partitionsAhead(this.database),
          this.relay.backlogs(),
          this.relay.abandoned(),
        ],
      );
    } catch (error) {
      return indicator.down({ failing: ['database'], database: { reachable: false, error: String(error) } });
    }

    // A provider's daily quota spent stops a lane until the day's first sends leave it: the reason the backlog and
    // lag grow, so said first.
    const quotas = this.quotaData();
    if (Object.values(quotas).some((quota) => quota.exhausted === 'daily')) failing.push('quota');
    const lastActiveAt = this.dispatcher.lastActiveAt;
    const idleMs = lastActiveAt ? Date.now() - lastActiveAt.getTime() : null;
    if (this.dispatcher.enabled && (idleMs === null || idleMs > thresholds.maxDispatcherIdleMs))
      failing.push('dispatcher');
    if (figures.backlog > thresholds.maxBacklog) failing.push('backlog');
    if (figures.lagMs > thresholds.maxLagMs) failing.push('lag');
    if (figures.deadLetters > thresholds.maxDeadLetters) failing.push('deadLetters');
    if (oldestEvent && oldestEvent.ageMs > thresholds.maxEventAgeMs) failing.push('events');
    // A broker down, or refusing: its events wait in the table, and this says so before their number does harm.
    const maxBacklogAgeMs = this.options.relay?.maxBacklogAgeMs ?? 0;
    // A destination nobody publishes to any more is owed every event recorded: its copies grow until it is removed.
    if (
      Object.values(relayBacklogs).some(({ oldestAgeMs }) => oldestAgeMs !== null && oldestAgeMs > maxBacklogAgeMs) ||
      Object.keys(abandonedDestinations).length > 0
    )
      failing.push('relay');
    const lanes = this.laneData();
    // A lane whose server refuses every session sends nothing: that is down, whatever the backlog says yet.
    if (Object.values(lanes).some((lane) => lane.paused && lane.reason === 'outage')) failing.push('lanes');
    // Rows in a lane nobody declares are never sent.
    if (Object.keys(undeclared).length > 0) failing.push('undeclaredLanes');
    // A partitioned outbox refuses the enqueues of a day it has no partition for: retention (or the CLI) makes them
    // ahead, and fewer than 2 days left means it has stopped doing so.
    if (daysAhead !== null && daysAhead < MIN_PARTITIONS_AHEAD) failing.push('partitions');
    const complaintRate = rateOf(feedback.complaints, feedback.sent);
    const hardBounceRate = rateOf(feedback.hardBounces, feedback.sent);
    if (feedback.sent >= thresholds.minSentForRates) {
      if (complaintRate > thresholds.maxComplaintRate) failing.push('complaintRate');
      if (hardBounceRate > thresholds.maxHardBounceRate) failing.push('hardBounceRate');
    }

    // `smtp`: the name the check had before it asked every kind of transport (`verifySmtp`, deprecated).
    const transportsNamed = thresholds.verifyTransports ? 'transports' : thresholds.verifySmtp ? 'smtp' : null;
    const transports = transportsNamed === null ? null : await this.verifyTransports();
    if (transports?.reachable === false) failing.push(transportsNamed!);

    const data = {
      database: { reachable: true },
      dispatcher: {
        enabled: this.dispatcher.enabled,
        lastActiveAt: lastActiveAt?.toISOString() ?? null,
        idleMs,
        maxIdleMs: thresholds.maxDispatcherIdleMs,
        ...(this.dispatcher.enabled ? { wakeUp: this.wakeUpData(), lanes } : {}),
        ...(Object.keys(quotas).length > 0 ? { quotas } : {}),
      },
      backlog: {
        count: figures.backlog,
        max: thresholds.maxBacklog,
        lagMs: figures.lagMs,
        maxLagMs: thresholds.maxLagMs,
      },
      ...(Object.keys(undeclared).length > 0 ? { undeclaredLanes: undeclared } : {}),
      ...(daysAhead !== null ? { partitions: { daysAhead, min: MIN_PARTITIONS_AHEAD } } : {}),
      events: {
        oldestUnconfirmedAgeMs: oldestEvent?.ageMs ?? 0,
        oldestUnconfirmedName: oldestEvent?.name ?? null,
        maxAgeMs: thresholds.maxEventAgeMs,
      },
      ...(this.options.relay || Object.keys(abandonedDestinations).length > 0
        ? {
            relay: {
              destinations: relayBacklogs,
              maxBacklogAgeMs,
              ...(Object.keys(abandonedDestinations).length > 0 ? { abandoned: abandonedDestinations } : {}),
            },
          }
        : {}),
      deadLetters: {
        count: figures.deadLetters,
        windowMs: thresholds.deadLetterWindowMs,
        max: thresholds.maxDeadLetters,
      },
      feedback: {
        windowMs: thresholds.feedbackWindowMs,
        ...feedback,
        complaintRate,
        maxComplaintRate: thresholds.maxComplaintRate,
        hardBounceRate,
        maxHardBounceRate: thresholds.maxHardBounceRate,
        minSentForRates: thresholds.minSentForRates,
      },
      ...(transports ? { [transportsNamed!]: transports } : {}),
    };
    return failing.length > 0 ? indicator.down({ failing, ...data }) : indicator.up(data);
  }

  /**
   * Each lane's pause: `paused` while it waits, `probing` after a pause until one send goes through; `reason` is
   * the server's outage (it refused the session) or its request to slow down.
   */
  private laneData() {
    const now = Date.now();
    return Object.fromEntries(
      Object.entries(this.dispatcher.lanePauses).map(([name, pause]) => [
        name,
        pause === null
          ? { paused: false, probing: false }
          : {
              paused: pause.until.getTime() > now,
              probing: pause.until.getTime() <= now,
              reason: pause.reason,
              until: pause.until.toISOString(),
              repeats: pause.repeats,
            },
      ]),
    );
  }

  /**
   * Each quota lane's shared limits as its latest take found them: `exhausted: 'daily'` (failing) until `resetsAt`,
   * a provider's Retry-After (`pausedUntil`) that any instance set, and a provider's limits that could not be read.
   */
  private quotaData() {
    return Object.fromEntries(
      Object.entries(this.dispatcher.laneQuotas).map(([name, quota]) => [
        name,
        {
          exhausted: quota.exhausted,
          resetsAt: quota.resetsAt?.toISOString() ?? null,
          pausedUntil: quota.pausedUntil?.toISOString() ?? null,
          sentToday: quota.sentToday,
          perSecond: quota.limits.perSecond,
          perDay: quota.limits.perDay,
          providerReadFailure: quota.providerReadFailure,
        },
      ]),
    );
  }

  /** Informational: while the listener is down the dispatchers still poll, so it never fails the check. */
  private wakeUpData() {
    const { listening, since, failures, lastError } = this.dispatcher.wakeUpState;
    return { listening, since: since.toISOString(), failures, lastError };
  }

  private async verifyTransports(): Promise<{ reachable: boolean; error?: string }> {
    try {
      await Promise.all([...new Set(this.transports.values())].map((transport) => transport.verify()));
      return { reachable: true };
    } catch (error) {
      return { reachable: false, error: String(error) };
    }
  }
}
