import { describe, expect, it } from '@jest/globals';
import { EMAIL_FAILED_EVENT, EMAIL_SENT_EVENT } from '../reliable-mail.constants.js';
import type { RetryPolicy } from '../shared/retry-policy.js';
import type { ClaimedRow } from '../outbox/queue.types.js';
import type { RecipientOutcome, SendOutcome } from '../transport/mail-transport.interface.js';
import { envelopeOf } from './envelope.js';
import { type AttemptResult, attemptOutcomeOf, settlementFor } from './settlement.js';

const policy: RetryPolicy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };
const now = new Date('2026-12-01T12:00:00.000Z');
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);
const random = () => 0.5;
const durationMs = 42;

function claimedRow(overrides: Partial<ClaimedRow> = {}): ClaimedRow {
  return {
    id: 'row-1',
    messageId: '<0b1c@mail.example.com>',
    idempotencyKey: 'order-7',
    payload: {
      v: 2,
      from: { address: 'noreply@example.com' },
      to: [{ address: 'Ann@example.com' }],
      cc: [{ address: 'bob@example.com' }],
      bcc: [],
      replyTo: [],
      subject: 'Hi',
      text: 'Hello',
      headers: {},
    },
    metadata: { source: 'unit' },
    attempts: 1,
    maxAttempts: 3,
    ageFrom: at(-60_000),
    lane: 'default',
    expiresAt: null,
    lockToken: 'lock-1',
    partitionDay: '2026-12-01',
    attemptId: 'attempt-1',
    skipReason: null,
    suppressed: [],
    possiblyTakenBefore: [],
    possiblyTakenThrough: null,
    acceptedRecipients: [],
    rejectedRecipients: [],
    leaseEndsAt: 0,
    ...overrides,
  };
}

const ok = '250 2.0.0 Ok: queued as 4BZ1x2';
function recipient(
  address: string,
  status: RecipientOutcome['status'],
  reply: string | null,
  perRecipient = true,
): RecipientOutcome {
  const replyCode = reply === null ? null : Number(reply.slice(0, 3)) || null;
  const enhancedStatus = reply === null ? null : (/^\d{3} (\d\.\d+\.\d+)/.exec(reply)?.[1] ?? null);
  return { address, status, replyCode, enhancedStatus, reply, perRecipient };
}
function attempted(
  recipients: RecipientOutcome[],
  reply: string | null = null,
): Extract<SendOutcome, { kind: 'attempted' }> {
  return { kind: 'attempted', recipients, reply, providerMessageId: reply === ok ? '4BZ1x2' : null, slowDown: false };
}
const settle = (row: ClaimedRow, result: AttemptResult, outageEndsAt = now) =>
  settlementFor(row, result, policy, now, durationMs, outageEndsAt, random);
const skip = (row: ClaimedRow, reason: NonNullable<ClaimedRow['skipReason']>) =>
  settlementFor(row, { kind: 'skipped', reason }, policy, now, 0);

describe('envelopeOf', () => {
  it.each([
    { name: 'every recipient, lower case, each once', row: {}, expected: ['ann@example.com', 'bob@example.com'] },
    {
      name: 'not those that took it before',
      row: { acceptedRecipients: ['ann@example.com'] },
      expected: ['bob@example.com'],
    },
    {
      name: 'not those that refused it before',
      row: { rejectedRecipients: [{ address: 'bob@example.com', reply: '550', replyCode: 550 }] },
      expected: ['ann@example.com'],
    },
    {
      name: 'not those on the suppression list',
      row: { suppressed: ['ann@example.com'] },
      expected: ['bob@example.com'],
    },
  ])('$name', ({ row, expected }) => {
    expect(envelopeOf(claimedRow(row))).toEqual(expected);
  });
});

describe('settlementFor an attempt', () => {
  it('every recipient took it: sent, with the accepting reply and the sent event', () => {
    const result = attempted(
      [recipient('ann@example.com', 'accepted', ok), recipient('bob@example.com', 'accepted', ok)],
      ok,
    );
    expect(settle(claimedRow(), result)).toEqual({
      id: 'row-1',
      lockToken: 'lock-1',
      partitionDay: '2026-12-01',
      attemptId: 'attempt-1',
      durationMs,
      status: 'sent',
      refundAttempt: 0,
      nextAttemptAt: null,
      lastError: null,
      replyCode: 250,
      enhancedStatus: '2.0.0',
      reply: ok,
      providerMessageId: '4BZ1x2',
      providerRequestId: null,
      providerAcceptedAt: null,
      deduplicatedByKey: false,
      transport: null,
      acceptedRecipients: ['ann@example.com', 'bob@example.com'],
      rejectedRecipients: null,
      attemptRecipients: result.recipients,
      sentAt: now,
      outcome: 'sent',
      bounced: [],
      eventName: EMAIL_SENT_EVENT,
      eventPayload: {
        id: 'row-1',
        messageId: '<0b1c@mail.example.com>',
        idempotencyKey: 'order-7',
        accepted: ['ann@example.com', 'bob@example.com'],
        rejected: [],
        attempt: 1,
        reply: ok,
        providerMessageId: '4BZ1x2',
        providerRequestId: null,
        providerAcceptedAt: null,
        sentAt: now,
        metadata: { source: 'unit' },
      },
    });
  });

  const unknownUser = '550 5.1.1 User unknown';
  const greylisted = '451 4.7.1 Greylisted, try again later';
  it.each<{
    name: string;
    row?: Partial<ClaimedRow>;
    result: AttemptResult;
    status: string;
    outcome: string;
    cause?: string;
    accepted: string[] | null;
    rejected?: string[];
    bounced?: string[];
    nextAttemptAt?: Date | null;
    refundAttempt?: 0 | 1;
  }>([
    {
      name: 'one took it, one refused with a 5.1.1 of its own: sent, the refusal recorded and suppressed',
      result: attempted(
        [recipient('ann@example.com', 'accepted', ok), recipient('bob@example.com', 'refused', unknownUser)],
        ok,
      ),
      status: 'sent',
      outcome: 'sent',
      accepted: ['ann@example.com'],
      rejected: ['bob@example.com'],
      bounced: ['bob@example.com'],
    },
    {
      name: 'a 5.1.1 to a transaction of two (after the final dot): failed, nobody suppressed',
      result: attempted([
        recipient('ann@example.com', 'refused', unknownUser, false),
        recipient('bob@example.com', 'refused', unknownUser, false),
      ]),
      status: 'failed',
      outcome: 'permanent',
      cause: 'refused',
      accepted: [],
      rejected: ['ann@example.com', 'bob@example.com'],
      bounced: [],
    },
    {
      name: 'one took it, one greylisted: pending for the other one only',
      result: attempted(
        [recipient('ann@example.com', 'accepted', ok), recipient('bob@example.com', 'deferred', greylisted)],
        ok,
      ),
      status: 'pending',
      outcome: 'partial',
      cause: 'partial',
      accepted: ['ann@example.com'],
      nextAttemptAt: at(750),
    },
    {
      name: 'every recipient deferred: pending, the attempt counted',
      result: attempted([
        recipient('ann@example.com', 'deferred', greylisted),
        recipient('bob@example.com', 'deferred', greylisted),
      ]),
      status: 'pending',
      outcome: 'transient',
      cause: 'deferred',
      accepted: [],
      nextAttemptAt: at(750),
    },
    {
      name: 'the connection lost after the whole message was written: pending, outcome unknown',
      result: attempted([recipient('ann@example.com', 'unknown', null), recipient('bob@example.com', 'unknown', null)]),
      status: 'pending',
      outcome: 'unknown',
      cause: 'unknown',
      accepted: [],
      nextAttemptAt: at(750),
    },
    {
      name: 'deferred on the last attempt: dead',
      row: { attempts: 3 },
      result: attempted([
        recipient('ann@example.com', 'deferred', greylisted),
        recipient('bob@example.com', 'deferred', greylisted),
      ]),
      status: 'dead',
      outcome: 'transient',
      cause: 'attempts',
      accepted: [],
      rejected: ['ann@example.com', 'bob@example.com'],
    },
    {
      name: 'deferred when too old: dead',
      row: { ageFrom: at(-86_400_000) },
      result: attempted([
        recipient('ann@example.com', 'deferred', greylisted),
        recipient('bob@example.com', 'deferred', greylisted),
      ]),
      status: 'dead',
      outcome: 'transient',
      cause: 'age',
      accepted: [],
      rejected: ['ann@example.com', 'bob@example.com'],
    },
    {
      name: 'one took it, the other still deferred on the last attempt: sent, the other given up on',
      row: { attempts: 3 },
      result: attempted(
        [recipient('ann@example.com', 'accepted', ok), recipient('bob@example.com', 'deferred', greylisted)],
        ok,
      ),
      status: 'sent',
      outcome: 'partial',
      accepted: ['ann@example.com'],
      rejected: ['bob@example.com'],
    },
    {
      name: 'the next try would come after the expiry: expired',
      row: { expiresAt: at(100) },
      result: attempted([
        recipient('ann@example.com', 'deferred', greylisted),
        recipient('bob@example.com', 'deferred', greylisted),
      ]),
      status: 'expired',
      outcome: 'transient',
      cause: 'expired',
      accepted: [],
      rejected: ['ann@example.com', 'bob@example.com'],
    },
    {
      name: 'an earlier attempt took it for one, this one for the other: sent to both',
      row: { attempts: 2, acceptedRecipients: ['ann@example.com'] },
      result: attempted([recipient('bob@example.com', 'accepted', ok)], ok),
      status: 'sent',
      outcome: 'sent',
      accepted: ['ann@example.com', 'bob@example.com'],
    },
    {
      name: 'an outage: pending until the lane resumes, the attempt not counted',
      result: { kind: 'outage', replyCode: 554, enhancedStatus: null, reply: '554 No SMTP service here' },
      status: 'pending',
      outcome: 'outage',
      cause: 'outage',
      accepted: null,
      nextAttemptAt: at(30_000),
      refundAttempt: 1,
    },
    {
      name: 'an outage when too old: dead, the attempt not counted',
      row: { ageFrom: at(-86_400_000) },
      result: { kind: 'outage', replyCode: 554, enhancedStatus: null, reply: '554 No SMTP service here' },
      status: 'dead',
      outcome: 'outage',
      cause: 'age',
      accepted: [],
      refundAttempt: 1,
    },
    {
      name: 'a mail not rendered yet (its stored version unreachable): pending, the attempt counted',
      result: {
        ...attempted([recipient('ann@example.com', 'deferred', null), recipient('bob@example.com', 'deferred', null)]),
        renderDeferred: true,
      },
      status: 'pending',
      outcome: 'transient',
      cause: 'deferred',
      accepted: [],
      nextAttemptAt: at(750),
    },
    {
      name: 'a template that cannot render: failed',
      result: { kind: 'unrenderable', reason: 'template "x"@1 failed to render: boom' },
      status: 'failed',
      outcome: 'permanent',
      cause: 'render',
      accepted: [],
      rejected: ['ann@example.com', 'bob@example.com'],
    },
  ])(
    '$name',
    ({
      row,
      result,
      status,
      outcome,
      cause,
      accepted,
      rejected = [],
      bounced = [],
      nextAttemptAt = null,
      refundAttempt = 0,
    }) => {
      const settlement = settle(claimedRow(row), result, at(30_000));
      expect(settlement).toMatchObject({ status, outcome, nextAttemptAt, refundAttempt, acceptedRecipients: accepted });
      expect((settlement.rejectedRecipients ?? []).map((entry) => entry.address)).toEqual(rejected);
      expect(settlement.bounced.map((entry) => entry.address)).toEqual(bounced);
      if (cause !== undefined) {
        expect(settlement.eventName).toBe(EMAIL_FAILED_EVENT);
        expect(settlement.eventPayload).toMatchObject({
          cause,
          status,
          permanent: cause === 'refused',
          deadLettered: status === 'dead',
          outcomeUnknown: cause === 'unknown',
        });
      } else {
        expect(settlement.eventName).toBe(EMAIL_SENT_EVENT);
      }
    },
  );

  it('the event of a partial attempt names who took it and who waits for the next one', () => {
    const result = attempted(
      [recipient('ann@example.com', 'accepted', ok), recipient('bob@example.com', 'deferred', greylisted)],
      ok,
    );
    expect(settle(claimedRow(), result).eventPayload).toMatchObject({
      attempt: 1,
      accepted: ['ann@example.com'],
      deferred: ['bob@example.com'],
      replyCode: 451,
      enhancedStatus: '4.7.1',
      reason: greylisted,
    });
  });

  it('an attempt stopped at shutdown on its last attempt: what went out recorded, the rest at once, not charged', () => {
    const stopped = 'not tried in this attempt: the app shut down after request 1 of 2';
    const result = {
      ...attempted(
        [recipient('ann@example.com', 'accepted', ok), recipient('bob@example.com', 'deferred', stopped)],
        ok,
      ),
      stoppedAtShutdown: true,
    };
    // The row's third attempt of three: deferred recipients would otherwise be given up on.
    const settlement = settle(claimedRow({ attempts: 3 }), result);
    expect(settlement).toMatchObject({
      status: 'pending',
      refundAttempt: 1,
      nextAttemptAt: now,
      acceptedRecipients: ['ann@example.com'],
      eventName: null,
    });
  });

  it('an attempt stopped at shutdown with a recipient whose outcome is unknown: charged, and retried as an unknown outcome', () => {
    const stopped = 'not tried in this attempt: the app shut down after request 1 of 2';
    const result = {
      ...attempted([recipient('ann@example.com', 'unknown', null), recipient('bob@example.com', 'deferred', stopped)]),
      stoppedAtShutdown: true,
    };
    const settlement = settle(claimedRow({ attempts: 1 }), result);
    expect(settlement).toMatchObject({
      status: 'pending',
      refundAttempt: 0,
      outcome: 'unknown',
      eventName: EMAIL_FAILED_EVENT,
    });
    expect(settlement.eventPayload).toMatchObject({ cause: 'unknown', outcomeUnknown: true });
  });

  it('an attempt its transport held back (a Retry-After past its deadline) on its last attempt: not charged, no event, again once the lane resumes', () => {
    const held =
      "not tried in this attempt: the provider's Retry-After or rate limit allows no request before the send deadline";
    const result = {
      ...attempted(
        [recipient('ann@example.com', 'deferred', held), recipient('bob@example.com', 'deferred', held)],
        null,
      ),
      slowDown: true,
      retryAfterMs: 600_000,
      heldBack: true,
    };
    const settlement = settle(claimedRow({ attempts: 3 }), result, at(600_000));
    expect(settlement).toMatchObject({
      status: 'pending',
      refundAttempt: 1,
      nextAttemptAt: at(600_000),
      acceptedRecipients: [],
      eventName: null,
    });
  });

  it('suppressed recipients are reported as rejected once the row is sent', () => {
    const result = attempted([recipient('ann@example.com', 'accepted', ok)], ok);
    const settlement = settle(claimedRow({ suppressed: ['bob@example.com'] }), result);
    expect(settlement.rejectedRecipients).toEqual([
      { address: 'bob@example.com', reply: 'suppressed: not sent', replyCode: null },
    ]);
  });
});

describe('what the decision reads of the transport’s outcome', () => {
  it('a hard bounce from the enhanced status the transport gave a recipient, not from its text', () => {
    const refusal = { ...recipient('bob@example.com', 'refused', '550 no such user here'), enhancedStatus: '5.1.1' };
    const notABounce = { ...recipient('ann@example.com', 'refused', '550 5.1.1 quoted'), enhancedStatus: null };
    const settlement = settle(claimedRow(), attempted([notABounce, refusal]));
    expect(settlement.bounced).toEqual([{ address: 'bob@example.com', reply: '550 no such user here' }]);
  });

  it('the accepting reply from the recipient it was for, with the code the transport read from it', () => {
    const first = { ...recipient('ann@example.com', 'accepted', '250 2.0.0 first'), replyCode: 251 };
    const second = recipient('bob@example.com', 'accepted', ok);
    expect(settle(claimedRow(), attempted([first, second], ok))).toMatchObject({
      replyCode: 250,
      enhancedStatus: '2.0.0',
      reply: ok,
    });
    expect(settle(claimedRow(), attempted([first, second], '250 2.0.0 first'))).toMatchObject({
      replyCode: 251,
      reply: '250 2.0.0 first',
    });
  });

  it.each<{ result: AttemptResult; outcome: string }>([
    { result: attempted([recipient('ann@example.com', 'accepted', ok)], ok), outcome: 'sent' },
    { result: attempted([]), outcome: 'sent' },
    { result: attempted([recipient('ann@example.com', 'refused', '550 5.7.1 no')]), outcome: 'permanent' },
    {
      result: attempted([
        recipient('ann@example.com', 'accepted', ok),
        recipient('bob@example.com', 'deferred', '451'),
      ]),
      outcome: 'partial',
    },
    { result: attempted([recipient('ann@example.com', 'unknown', null)]), outcome: 'unknown' },
    { result: { kind: 'outage', replyCode: 421, enhancedStatus: null, reply: '421 bye' }, outcome: 'outage' },
    { result: { kind: 'unrenderable', reason: 'no template' }, outcome: 'permanent' },
  ])('attemptOutcomeOf: $outcome', ({ result, outcome }) => {
    expect(attemptOutcomeOf(result)).toBe(outcome);
    expect(settle(claimedRow(), result).outcome).toBe(outcome);
  });
});

describe('settlementFor a row its claim said not to send', () => {
  it.each([
    { skipReason: 'cancelled', cause: 'cancelled' },
    { skipReason: 'expired', cause: 'expired' },
    { skipReason: 'suppressed', cause: 'suppressed' },
    { skipReason: 'dead', cause: 'crashes' },
  ] as const)('$skipReason: closed without an attempt, not counted, never "permanent"', ({ skipReason, cause }) => {
    const settlement = skip(claimedRow({ attempts: 2, attemptId: null }), skipReason);
    expect(settlement).toMatchObject({ status: skipReason, refundAttempt: 1, attemptId: null, nextAttemptAt: null });
    expect(settlement.eventPayload).toMatchObject({
      status: skipReason,
      cause,
      attempt: 1,
      permanent: false,
      deadLettered: skipReason === 'dead',
    });
  });

  it.each([
    { skipReason: 'cancelled', given: 'cancelled while it was being sent' },
    { skipReason: 'expired', given: 'expired before it could be sent' },
    {
      skipReason: 'dead',
      given: 'dead-lettered: its worker stopped without settling it until no attempt or age was left',
    },
  ] as const)(
    '$skipReason after an earlier attempt reached one recipient: sent, the other given up on, with the sent event',
    ({ skipReason, given }) => {
      const row = claimedRow({ attempts: 3, attemptId: null, acceptedRecipients: ['ann@example.com'] });
      const settlement = skip(row, skipReason);
      const rejected = [{ address: 'bob@example.com', reply: given, replyCode: null }];
      expect(settlement).toMatchObject({
        status: 'sent',
        refundAttempt: 1,
        attemptId: null,
        lastError: null,
        acceptedRecipients: ['ann@example.com'],
        rejectedRecipients: rejected,
        eventName: EMAIL_SENT_EVENT,
      });
      expect(settlement.sentAt).toBeInstanceOf(Date);
      expect(settlement.eventPayload).toMatchObject({ accepted: ['ann@example.com'], rejected, attempt: 2 });
    },
  );

  it('every recipient suppressed after one took it: sent, the one that took it accepted only, the other suppressed', () => {
    const row = claimedRow({
      attemptId: null,
      acceptedRecipients: ['ann@example.com'],
      suppressed: ['ann@example.com', 'bob@example.com'],
    });
    const settlement = skip(row, 'suppressed');
    expect(settlement).toMatchObject({ status: 'sent', eventName: EMAIL_SENT_EVENT });
    const rejected = [{ address: 'bob@example.com', reply: 'suppressed: not sent', replyCode: null }];
    expect(settlement.rejectedRecipients).toEqual(rejected);
    expect(settlement.eventPayload).toMatchObject({ accepted: ['ann@example.com'], rejected });
  });

  it('a recipient that refused with a hard bounce (and was suppressed for it) is reported refused once', () => {
    const bounce = { address: 'bob@example.com', reply: '550 5.1.1 no such user', replyCode: 550 };
    const row = claimedRow({
      acceptedRecipients: [],
      rejectedRecipients: [bounce],
      suppressed: ['bob@example.com'],
    });
    const settlement = settle(row, attempted([recipient('ann@example.com', 'accepted', ok)], ok));
    expect(settlement).toMatchObject({ status: 'sent', acceptedRecipients: ['ann@example.com'] });
    expect(settlement.rejectedRecipients).toEqual([bounce]);
  });
});

describe("a provider's request id, accept time and deduplication", () => {
  const acceptedAt = at(-5);
  const provider = { providerRequestId: 'req-7', acceptedAt, deduplicatedByKey: true };

  it('are recorded with a sent row and carried in its EmailSentEvent', () => {
    const result: SendOutcome = {
      ...attempted(
        [
          recipient('ann@example.com', 'accepted', '200 id re_1'),
          recipient('bob@example.com', 'accepted', '200 id re_1'),
        ],
        '200 id re_1',
      ),
      providerMessageId: 're_1',
      ...provider,
    };
    const settlement = settle(claimedRow(), result);
    expect(settlement).toMatchObject({
      status: 'sent',
      providerMessageId: 're_1',
      providerRequestId: 'req-7',
      providerAcceptedAt: acceptedAt,
      deduplicatedByKey: true,
    });
    expect(settlement.eventPayload).toMatchObject({
      providerMessageId: 're_1',
      providerRequestId: 'req-7',
      providerAcceptedAt: acceptedAt,
    });
  });

  it('are recorded with an unknown outcome that is retried', () => {
    const unknown = recipient('ann@example.com', 'unknown', null);
    const result: SendOutcome = {
      ...attempted([unknown, { ...unknown, address: 'bob@example.com' }]),
      ...provider,
      acceptedAt: null,
    };
    expect(settle(claimedRow(), result)).toMatchObject({
      status: 'pending',
      outcome: 'unknown',
      providerRequestId: 'req-7',
      providerAcceptedAt: null,
      deduplicatedByKey: true,
    });
  });

  const outage: SendOutcome = {
    kind: 'outage',
    replyCode: 403,
    enhancedStatus: null,
    reply: '403 AccountSuspendedException',
    providerRequestId: 'req-9',
  };

  it("an outage keeps the provider's request id", () => {
    expect(settle(claimedRow(), outage)).toMatchObject({
      status: 'pending',
      outcome: 'outage',
      providerRequestId: 'req-9',
    });
  });

  it("an outage that closes a row too old for another try keeps the provider's request id too", () => {
    expect(settle(claimedRow({ ageFrom: at(-86_400_000) }), outage)).toMatchObject({
      status: 'dead',
      outcome: 'outage',
      providerRequestId: 'req-9',
    });
  });
});
