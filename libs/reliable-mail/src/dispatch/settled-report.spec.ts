import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import type { MailEventPublisher } from '../events/mail-event.publisher.js';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { ClaimedRow, StoredEvent } from '../outbox/queue.types.js';
import type { RetryPolicy } from '../shared/retry-policy.js';
import type { RecipientStatus } from '../transport/mail-transport.interface.js';
import { reportSettled } from './settled-report.js';
import { type AttemptResult, settlementFor } from './settlement.js';
import type { SettleOutcome } from './settler.js';
import { claimedRow } from '../../../../test/support/settlements.js';

const policy: RetryPolicy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };
const ENVELOPE = ['ann@example.com', 'bob@example.com'];

const everyRecipient = (status: RecipientStatus, replyCode: number, reply: string): AttemptResult => ({
  kind: 'attempted',
  recipients: ENVELOPE.map((address) => ({
    address,
    status,
    replyCode,
    enhancedStatus: null,
    reply,
    perRecipient: true,
  })),
  reply: status === 'accepted' ? reply : null,
  providerMessageId: null,
  slowDown: false,
});
const outage: AttemptResult = {
  kind: 'outage',
  replyCode: 421,
  enhancedStatus: null,
  reply: '421 4.3.2 shutting down',
};

/** What reportSettled did: its log lines, the metrics it recorded and the events it published. */
function reporting(perMail: boolean) {
  const logged: Array<{ level: string; entry: Record<string, unknown> }> = [];
  const log = (level: string) => (entry: Record<string, unknown>) => logged.push({ level, entry });
  const recorded: string[] = [];
  const published: StoredEvent[] = [];
  const deps = {
    logger: { debug: log('debug'), log: log('log'), warn: log('warn'), error: log('error') } as unknown as Logger,
    metrics: {
      recordAttempt: (lane: string, outcome: string) => recorded.push(`attempt ${lane} ${outcome}`),
      recordFinal: (lane: string, status: string, attempts: number) =>
        recorded.push(`final ${lane} ${status} ${attempts}`),
    } as unknown as MailMetrics,
    publisher: { publish: (event: StoredEvent) => published.push(event) } as unknown as MailEventPublisher,
    perMail,
  };
  return { deps, logged, recorded, published };
}

const event: StoredEvent = { id: 'event-1', name: 'reliable-mail.email.sent', payload: {} };
const applied: SettleOutcome = { applied: true, event };

describe('reportSettled', () => {
  describe('its log', () => {
    it.each([
      {
        name: 'sent',
        result: everyRecipient('accepted', 250, '250 2.0.0 queued'),
        attempts: 2,
        quiet: [],
        perMail: [['debug', 'settled']],
      },
      {
        name: 'deferred',
        result: everyRecipient('deferred', 451, '451 4.7.1 greylisted'),
        attempts: 2,
        quiet: [],
        perMail: [['warn', 'settled']],
      },
      {
        name: 'refused',
        result: everyRecipient('refused', 550, '550 5.1.1 no such user'),
        attempts: 2,
        quiet: [],
        perMail: [['warn', 'settled']],
      },
      {
        name: "the lane's server refusing the session (its loop says so, once)",
        result: outage,
        attempts: 2,
        quiet: [],
        perMail: [['warn', 'the lane cannot send: its server refuses the session']],
      },
      {
        name: 'dead-lettered, out of attempts',
        result: everyRecipient('deferred', 451, '451 4.7.1 greylisted'),
        attempts: 3,
        quiet: [['error', 'dead-lettered']],
        perMail: [['error', 'dead-lettered']],
      },
    ])('$name: no line but for a dead letter, unless perMail', ({ result, attempts, quiet, perMail }) => {
      const row = claimedRow({ attempts });
      const settlement = settlementFor(row, result, policy, new Date(), 12);
      for (const [asked, expected] of [
        [false, quiet],
        [true, perMail],
      ] as const) {
        const { deps, logged } = reporting(asked);
        reportSettled(deps, row, settlement, applied);
        expect(logged.map(({ level, entry }) => [level, entry.msg])).toEqual(expected);
      }
    });

    it.each([
      { skipReason: 'dead', expected: [['error', 'dead-lettered', 'row-1']] },
      { skipReason: 'cancelled', expected: [] },
      { skipReason: 'expired', expected: [] },
      { skipReason: 'suppressed', expected: [] },
    ] as const)(
      'closed at its claim as $skipReason: a line only for a dead letter (a mail whose workers kept stopping), perMail or not',
      ({ skipReason, expected }) => {
        const row = claimedRow({ skipReason, attemptId: null });
        const settlement = settlementFor(row, { kind: 'skipped', reason: skipReason }, policy, new Date(), 0);
        for (const perMail of [false, true]) {
          const { deps, logged } = reporting(perMail);
          reportSettled(deps, row, settlement, applied);
          expect(logged.map(({ level, entry }) => [level, entry.msg, entry.id])).toEqual(expected);
        }
      },
    );
  });

  it.each<{ name: string; written: SettleOutcome | null; row?: Partial<ClaimedRow>; recorded: string[] }>([
    {
      name: 'a settle that applied: the attempt and the final status counted, the event published',
      written: applied,
      recorded: ['attempt default transient', 'final default dead 3'],
    },
    {
      name: 'a settle whose lease was lost: the attempt counted (it happened), nothing said of the row',
      written: { applied: false, event: null },
      recorded: ['attempt default transient'],
    },
    {
      name: 'a settle not written before its lease ended: the same',
      written: null,
      recorded: ['attempt default transient'],
    },
  ])('$name', ({ written, recorded }) => {
    const row = claimedRow({ attempts: 3 });
    const settlement = settlementFor(
      row,
      everyRecipient('deferred', 451, '451 4.7.1 greylisted'),
      policy,
      new Date(),
      12,
    );
    const report = reporting(false);
    reportSettled(report.deps, row, settlement, written);
    expect(report.recorded).toEqual(recorded);
    expect(report.published).toEqual(written?.applied ? [event] : []);
    expect(report.logged.map(({ entry }) => entry.msg)).toEqual(written?.applied ? ['dead-lettered'] : []);
  });

  it('a row closed at its claim made no attempt: only its final status is counted', () => {
    const row = claimedRow({ skipReason: 'cancelled', attemptId: null });
    const settlement = settlementFor(row, { kind: 'skipped', reason: 'cancelled' }, policy, new Date(), 0);
    const report = reporting(false);
    reportSettled(report.deps, row, settlement, applied);
    expect(report.recorded).toEqual(['final default cancelled 1']);
  });
});
