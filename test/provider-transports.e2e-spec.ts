import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  MailOutboxHealthIndicator,
  MailOutboxService,
  type OutboxRowWithAttempts,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import { type ProviderName, type ProviderStandIn, startStandIn } from './support/provider-stand-ins.js';
import { pausedLaneHealth } from './support/lane-health.js';
import type { ScriptedReply } from './support/scripted-http-server.js';
import { testLogger, testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

const outcomes = (row: OutboxRowWithAttempts) => row.attemptLog.map((attempt) => attempt.outcome);
const mail = { to: 'ann@example.com', subject: 'Your order', text: 'Thanks', html: '<p>Thanks</p>' };

// The same cases against each provider's local stand-in (aws-ses-v2-local behind a front, and servers that speak
// Postmark's and Resend's APIs), through the provider's own SDK: no transport is mocked.
describe.each<ProviderName>(['ses', 'postmark', 'resend'])('the %s transport', (name) => {
  const bed = useTestBed();
  let provider: ProviderStandIn;

  beforeEach(async () => {
    provider = await startStandIn(name);
  });
  afterEach(async () => {
    await provider.close();
  });

  async function start(overrides: Partial<ReliableMailOptions> = {}) {
    const app = await bed.startApp(testMailOptions(bed.smtpUrl, { transport: provider.transport(), ...overrides }));
    return { app, outbox: app.get(MailOutboxService), health: app.get(MailOutboxHealthIndicator) };
  }

  it('sent: the provider took it with the stored Message-ID; its ids and accept time are on the row, the attempt and EmailSentEvent', async () => {
    const { app, outbox } = await start();
    const { id, messageId } = await outbox.enqueue({
      ...mail,
      bcc: 'audit@example.com',
      attachments: [{ filename: 'order.txt', contentType: 'text/plain', content: 'mug x 2' }],
    });
    await waitFor('the sent event', () => app.events.sent.length === 1);

    expect(await provider.delivered()).toEqual([messageId]);
    const event = app.events.sent[0];
    expect(event).toMatchObject({
      id,
      accepted: ['ann@example.com', 'audit@example.com'],
      providerMessageId: expect.any(String),
      providerAcceptedAt: expect.any(Date),
      // SES names each request (x-amzn-RequestId); Postmark and Resend document no request id.
      providerRequestId: name === 'ses' ? expect.any(String) : null,
    });
    const row = await outbox.get(id);
    expect(row).toMatchObject({
      status: 'sent',
      providerMessageId: event.providerMessageId,
      providerRequestId: event.providerRequestId,
      providerAcceptedAt: event.providerAcceptedAt,
      lastReplyCode: 200,
    });
    if (name !== 'ses') {
      // Postmark and Resend take the attachment as base64 in JSON.
      const body = JSON.parse(provider.requests.find((request) => request.method === 'POST')!.body);
      const [attachment] = body.attachments ?? body.Attachments;
      expect(attachment.content ?? attachment.Content).toBe(Buffer.from('mug x 2').toString('base64'));
    }
    expect(row.attemptLog).toEqual([
      expect.objectContaining({
        outcome: 'sent',
        providerMessageId: event.providerMessageId,
        providerRequestId: event.providerRequestId,
        deduplicatedByKey: provider.deduplicates,
      }),
    ]);
  });

  it.each([
    { answer: 'throttled (429)', reply: 'throttled' as const, replyCode: 429, slowsDown: true, cause: 'deferred' },
    { answer: 'unavailable (503)', reply: 'unavailable' as const, replyCode: 503, slowsDown: false, cause: 'deferred' },
    // The provider may have stored the message before its 500: the outcome is unknown, as a lost answer's. This 500
    // stored nothing (one copy); the case of one that did follows.
    {
      answer: 'a server error (500)',
      reply: 'serverError' as const,
      replyCode: 500,
      slowsDown: false,
      cause: 'unknown',
    },
  ])('$answer, then sent: retried with the same Message-ID', async ({ reply, replyCode, slowsDown, cause }) => {
    const { app, outbox } = await start();
    const slowDownPauses = () =>
      testLogger.warnings.filter((entry) => {
        const { msg, reason } = entry as { msg?: string; reason?: string };
        return msg === 'lane paused' && reason === 'slow-down';
      }).length;
    const pausesBefore = slowDownPauses();
    provider.script.next(provider.replies[reply]);
    const { id, messageId } = await outbox.enqueue(mail);
    await waitFor('the sent event', () => app.events.sent.length === 1);

    expect(app.events.failed).toEqual([
      expect.objectContaining({ cause, attempt: 1, replyCode, permanent: false, outcomeUnknown: cause === 'unknown' }),
    ]);
    const row = await outbox.get(id);
    expect(outcomes(row)).toEqual([cause === 'unknown' ? 'unknown' : 'transient', 'sent']);
    expect(await provider.delivered()).toEqual([messageId]);
    // A 429 pauses the lane (a second at first); a 5xx is retried after the row's own short delay.
    expect(slowDownPauses() - pausesBefore).toBe(slowsDown ? 1 : 0);
  });

  it('refused (422, MessageRejected): failed at once, never retried', async () => {
    const { app, outbox } = await start();
    provider.script.next(provider.replies.refused);
    const { id } = await outbox.enqueue(mail);
    await waitFor('the failed event', () => app.events.failed.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 300));

    expect(app.events.failed[0]).toMatchObject({ status: 'failed', cause: 'refused', permanent: true });
    expect(app.events.failed[0].replyCode).toBeGreaterThanOrEqual(400);
    const row = await outbox.get(id);
    expect(row).toMatchObject({ status: 'failed', attempts: 1 });
    expect(outcomes(row)).toEqual(['permanent']);
    expect(await provider.delivered()).toEqual([]);
    expect(provider.requests.filter((request) => request.method === 'POST')).toHaveLength(1);
  });

  // Both after the provider stored the message: a 500 does not say it was not taken (`afterStoring`).
  it.each([
    { answer: 'the connection dropped', reply: (): ScriptedReply => 'drop', replyCode: null },
    {
      answer: 'a server error (500)',
      reply: (): ScriptedReply => ({ afterStoring: provider.replies.serverError }),
      replyCode: 500,
    },
  ])(
    '$answer after the provider took the request: unknown, retried; a copy only where the provider does not deduplicate',
    async ({ reply, replyCode }) => {
      const { app, outbox } = await start();
      provider.script.next(reply());
      const { id, messageId } = await outbox.enqueue(mail, { idempotencyKey: 'order-confirmation:1' });
      await waitFor('the failed event', () => app.events.failed.length === 1);
      // The provider holds the message by the time the first attempt is settled, before any retry.
      expect((await provider.delivered()).length).toBeGreaterThanOrEqual(1);
      await waitFor('the sent event', () => app.events.sent.length === 1);

      expect(app.events.failed).toEqual([
        expect.objectContaining({ cause: 'unknown', outcomeUnknown: true, replyCode }),
      ]);
      const row = await outbox.get(id);
      expect(outcomes(row)).toEqual(['unknown', 'sent']);
      expect(row.attemptLog[0]).toMatchObject({ replyCode, deduplicatedByKey: provider.deduplicates });
      // Resend answers the retry's Idempotency-Key with the first request's id and keeps one message; SES and
      // Postmark hold two copies, recognisable as one by their Message-ID.
      expect(await provider.delivered()).toEqual(provider.deduplicates ? [messageId] : [messageId, messageId]);
      if (name === 'resend') {
        const keys = provider.requests.map((request) => request.headers['idempotency-key']);
        expect(keys).toEqual(['order-confirmation:1', 'order-confirmation:1']);
        // The same message again, answered with the first request's id: not a 409 for another body.
        const messageIds = provider.requests.map((request) => JSON.parse(request.body).headers['Message-ID']);
        expect(messageIds).toEqual([messageId, messageId]);
        expect(row.attemptLog[1]).toMatchObject({ replyCode: 200 });
        expect(row.providerMessageId).toBe(row.attemptLog[1].providerMessageId);
      }
    },
  );

  it('no answer before the send deadline (a stall): unknown, retried, and sent once', async () => {
    const { app, outbox } = await start({ dispatcher: { sendTimeoutMs: 1_000 } });
    provider.script.next('stall');
    const { id, messageId } = await outbox.enqueue(mail);
    await waitFor('the sent event', () => app.events.sent.length === 1);

    const row = await outbox.get(id);
    expect(outcomes(row)).toEqual(['unknown', 'sent']);
    // Cut at the 1 s deadline, not at the SDK's or the stand-in's own timeouts (minutes).
    expect(row.attemptLog[0].durationMs).toBeLessThan(10_000);
    expect(await provider.delivered()).toEqual([messageId]);
  });

  // A mail of 150 recipients, more than any of the three takes in one request (50 in To, Cc and Bcc together).
  const bcc = Array.from({ length: 149 }, (_, index) => `reader${String(index).padStart(3, '0')}@example.com`);
  const everyone = ['ann@example.com', ...bcc].sort();
  /** The sent event, or a failed event that closed the row (the code before requests of 50 ended so). */
  const settled = (app: { events: { sent: unknown[]; failed: Array<{ status: string }> } }) => () =>
    app.events.sent.length === 1 || app.events.failed.some((event) => event.status !== 'pending');

  // SES takes a request with Bcc recipients only; Postmark and Resend refuse one without a To, so the Bcc
  // recipients that do not fit beside the To go one to a request, each its own To.
  const toRequired = name !== 'ses';
  const requestSizes = toRequired ? [50, ...Array<number>(100).fill(1)] : [50, 50, 50];

  it('a mail to 1 + 149 Bcc recipients goes out in requests of at most 50, one after another: each recipient gets it once, the row is sent', async () => {
    const { app, outbox } = await start();
    const { id, messageId } = await outbox.enqueue({ ...mail, bcc });
    await waitFor('the row to settle', settled(app));

    expect(provider.requestedRecipients.map((recipients) => recipients.length)).toEqual(requestSizes);
    expect((await provider.deliveredTo()).flat().sort()).toEqual(everyone);
    expect(await provider.delivered()).toEqual(requestSizes.map(() => messageId));
    const row = await outbox.get(id);
    expect(row).toMatchObject({ status: 'sent', attempts: 1, providerMessageId: expect.any(String) });
    expect(outcomes(row)).toEqual(['sent']);
    expect([...app.events.sent[0].accepted].sort()).toEqual(everyone);
    // The To recipient goes in the first request, so it sees itself in To; later requests are Bcc only.
    expect(provider.requestedRecipients[0][0]).toBe('ann@example.com');
  });

  // A 500 may follow the request's storing: the attempt's outcome is then unknown (a retry may be a second copy, with
  // the same Message-ID), where a 503's is partial. The 500 here stores nothing (a plain scripted `serverError`).
  it.each([
    { answer: '503', reply: 'unavailable' as const, replyCode: 503, outcome: 'partial' },
    { answer: '500', reply: 'serverError' as const, replyCode: 500, outcome: 'unknown' },
  ])(
    'the second request fails ($answer): the first 50 keep it, the other 100 are retried, and nobody gets a second copy',
    async ({ reply, replyCode, outcome }) => {
      const { app, outbox } = await start();
      provider.script.next('pass', provider.replies[reply]);
      const { id, messageId } = await outbox.enqueue({ ...mail, bcc }, { idempotencyKey: 'newsletter:7' });
      await waitFor('the row to settle', settled(app));

      const [failed] = app.events.failed;
      expect(app.events.failed).toEqual([
        expect.objectContaining({ status: 'pending', cause: outcome, attempt: 1, replyCode }),
      ]);
      expect(failed.accepted).toHaveLength(50);
      expect(failed.deferred).toHaveLength(100);
      const row = await outbox.get(id);
      expect(row.status).toBe('sent');
      expect(outcomes(row)).toEqual([outcome, 'sent']);
      // The requests after the second were not made in the first attempt: their recipients say so.
      const untried = row.attemptLog[0].recipients!.filter((recipient) => recipient.reply?.includes('not tried'));
      expect(untried.map((recipient) => recipient.status)).toEqual(Array(100 - requestSizes[1]).fill('deferred'));
      // Attempt 1: the first request taken, the second failed; attempt 2: the second again, then the
      // ones never tried.
      const requested = provider.requestedRecipients;
      expect(requested.map((recipients) => recipients.length)).toEqual([
        50,
        ...requestSizes.slice(1, 2),
        ...requestSizes.slice(1),
      ]);
      expect(requested[2]).toEqual(requested[1]);
      expect((await provider.deliveredTo()).flat().sort()).toEqual(everyone);
      expect(await provider.delivered()).toEqual(requestSizes.map(() => messageId));
      if (name === 'resend') {
        // Each request has a key of its own, the same when its recipients are sent to again.
        const keys = provider.requests.map((request) => request.headers['idempotency-key']);
        expect(keys[2]).toBe(keys[1]);
        expect(new Set(keys).size).toBe(requestSizes.length);
      }
    },
  );

  it('a mail to Bcc recipients only reaches each of them, and none sees another', async () => {
    const { app, outbox } = await start();
    const readers = ['reader1@example.com', 'reader2@example.com'];
    const { id, messageId } = await outbox.enqueue({ bcc: readers, subject: 'Minutes', text: 'Attached' });
    await waitFor('the row to settle', settled(app));

    expect((await outbox.get(id)).status).toBe('sent');
    expect((await provider.deliveredTo()).flat().sort()).toEqual(readers);
    expect(await provider.delivered()).toEqual((toRequired ? readers : ['one']).map(() => messageId));
    if (toRequired) expect(provider.requestedRecipients).toEqual(readers.map((reader) => [reader]));
  });

  it('a suspended account: an outage of the lane, no attempt counted, the pause in health; sent once it is back', async () => {
    const { app, outbox, health } = await start();
    provider.script.hold(provider.replies.suspended);
    const { id, messageId } = await outbox.enqueue(mail);

    const during = await pausedLaneHealth(health, 'default');
    expect(during.status).toMatchObject({ status: 'down', failing: expect.arrayContaining(['lanes']) });
    expect(during.lane).toMatchObject({ paused: true, reason: 'outage' });

    provider.script.lift();
    await waitFor('the sent event', () => app.events.sent.length === 1, 15_000);
    const row = await outbox.get(id);
    expect(row).toMatchObject({ status: 'sent', attempts: 1 });
    expect(new Set(outcomes(row).slice(0, -1))).toEqual(new Set(['outage']));
    expect(app.events.failed.length).toBeGreaterThan(0);
    expect(app.events.failed.every((event) => event.cause === 'outage' && event.attempt === 0)).toBe(true);
    expect(await provider.delivered()).toEqual([messageId]);
  });
});
