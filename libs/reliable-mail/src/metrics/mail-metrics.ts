import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { type BatchObservableCallback, metrics, type Observable } from '@opentelemetry/api';
import { reportedAsOutage } from '../database/database-availability.js';
import { OutboxDatabase } from '../database/outbox-database.js';

import type { ResolvedReliableMailOptions } from '../options/resolve-options.js';
import { feedbackFigures, healthFigures, openCounts, rateOf } from '../outbox/sql/health.js';
import { RELIABLE_MAIL_OPTIONS } from '../reliable-mail.constants.js';
import { relayBacklog } from '../relay/sql/relay-events.js';
import type { DispatchTally } from '../dispatch/dispatch-summary.js';
import type { ReplyFacts } from '../shared/logged-reply.js';

/**
 * reliable-mail's metrics through the OpenTelemetry API: a no-op until the app installs an OpenTelemetry SDK, which
 * then exports them to Prometheus, OTLP or whatever it is set up for. Gauges are read from the outbox's indexes
 * when the SDK collects, never on the send path.
 */
@Injectable()
export class MailMetrics implements OnModuleDestroy {
  private readonly logger = new Logger('ReliableMail');
  private readonly meter = metrics.getMeter('reliable-mail');
  private readonly sends = this.meter.createCounter('reliable_mail.sends', {
    description:
      'Send attempts (SMTP or a provider API) by lane and outcome (sent, partial, transient, permanent, unknown, outage)',
  });
  private readonly sendDuration = this.meter.createHistogram('reliable_mail.send.duration', {
    description: 'Duration of one send attempt, its rendering included',
    unit: 'ms',
  });
  private readonly attemptsPerEmail = this.meter.createHistogram('reliable_mail.attempts', {
    description: 'Attempts an email took to reach a final status, by status',
  });
  private readonly feedback = this.meter.createCounter('reliable_mail.feedback', {
    description:
      'Delivery feedback stored, by source, kind (delivered, bounced, complained, delayed), bounce type, and whether it named a known row',
  });
  private readonly rows = this.meter.createObservableGauge('reliable_mail.outbox.rows', {
    description: 'Rows by status (pending, sending, failed, dead) and lane',
  });
  private readonly lag = this.meter.createObservableGauge('reliable_mail.outbox.lag', {
    description: 'How long the oldest due row has waited',
    unit: 'ms',
  });
  private readonly feedbackRate = this.meter.createObservableGauge('reliable_mail.feedback.rate', {
    description:
      'Complaints and hard bounces per mail sent in health.feedbackWindowMs, by kind (complaint, hard_bounce)',
  });
  private readonly relayPublications = this.meter.createCounter('reliable_mail.relay.publications', {
    description:
      'Events published to a relay destination, by destination and outcome (confirmed, or deferred: not confirmed by its broker, published again later)',
  });
  private readonly relayOwed = this.meter.createObservableGauge('reliable_mail.relay.owed', {
    description: "Events a relay destination of this instance's is owed (counted up to 100,001)",
  });
  private readonly observe: BatchObservableCallback;
  /** What was attempted since the dispatcher's last summary line (see `takeTally`). */
  private tally = emptyTally();

  constructor(database: OutboxDatabase, @Inject(RELIABLE_MAIL_OPTIONS) options: ResolvedReliableMailOptions) {
    this.observe = async (result) => {
      try {
        const destinations = (options.relay?.destinations ?? []).map(({ destination }) => destination.name);
        const [counts, figures, feedback, backlogs] = await Promise.all([
          openCounts(database),
          healthFigures(database, 60_000),
          feedbackFigures(database, options.health.feedbackWindowMs),
          Promise.all(destinations.map((name) => relayBacklog(database, name, RELAY_OWED_COUNT_CAP))),
        ]);
        for (const { status, lane, count } of counts) result.observe(this.rows, count, { status, lane });
        result.observe(this.lag, figures.lagMs);
        result.observe(this.feedbackRate, rateOf(feedback.complaints, feedback.sent), { kind: 'complaint' });
        result.observe(this.feedbackRate, rateOf(feedback.hardBounces, feedback.sent), { kind: 'hard_bounce' });
        backlogs.forEach(({ owed }, index) =>
          result.observe(this.relayOwed, owed, { destination: destinations[index] }),
        );
      } catch (error) {
        if (!reportedAsOutage(error)) this.logger.warn({ msg: 'metrics collection failed', error: String(error) });
      }
    };
    this.meter.addBatchObservableCallback(this.observe, this.observed());
  }

  private observed(): Observable[] {
    return [this.rows, this.lag, this.feedbackRate, this.relayOwed];
  }

  /** One attempt, with the server's reply: the last of each outcome but `sent` goes into the summary line. */
  recordAttempt(
    lane: string,
    outcome: string,
    durationMs: number,
    { replyCode, enhancedStatus, reply }: ReplyFacts,
  ): void {
    this.sends.add(1, { lane, outcome });
    this.sendDuration.record(durationMs, { lane, outcome });
    this.tally.attempts[outcome] = (this.tally.attempts[outcome] ?? 0) + 1;
    if (outcome !== 'sent') this.tally.lastReplies[outcome] = { replyCode, enhancedStatus, reply };
  }

  recordFinal(lane: string, status: string, attempts: number): void {
    this.attemptsPerEmail.record(attempts, { lane, status });
    if (status === 'dead') this.tally.deadLettered += 1;
  }

  /** The attempts by outcome, their last replies and the dead letters since the last call, for the summary line. */
  takeTally(): DispatchTally {
    const taken = this.tally;
    this.tally = emptyTally();
    return taken;
  }

  /** One round of a relay destination: the events its broker confirmed, and those put off. */
  recordRelayRound(destination: string, confirmed: number, deferred: number): void {
    if (confirmed > 0) this.relayPublications.add(confirmed, { destination, outcome: 'confirmed' });
    if (deferred > 0) this.relayPublications.add(deferred, { destination, outcome: 'deferred' });
  }

  recordFeedback(source: string, kind: string, bounceType: string | null, linked: boolean): void {
    this.feedback.add(1, { source, kind, bounce_type: bounceType ?? 'none', linked });
  }

  onModuleDestroy(): void {
    this.meter.removeBatchObservableCallback(this.observe, this.observed());
  }
}

/** The relay's gauge counts a backlog as health does: up to this, so that one of millions costs a collection no more. */
const RELAY_OWED_COUNT_CAP = 100_000;

function emptyTally(): DispatchTally {
  return { attempts: {}, lastReplies: {}, deadLettered: 0 };
}
