import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import {
  EMAIL_SENT_EVENT,
  type EmailSentEvent,
  MailOutboxHealthIndicator,
  MailOutboxService,
} from '@reliable-mail/nestjs';
import { pausedLaneHealth } from './support/lane-health.js';
import type { ScriptedReply } from './support/smtp-test-server.js';
import { testLogger, testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

const mail = (index: number) => ({ to: `user${index}@example.com`, subject: `Order ${index}`, text: 'Thanks' });
const many = (count: number) => Array.from({ length: count }, (_, index) => ({ mail: mail(index) }));

/** What RFC 5321 and a careful MTA make of each SMTP situation, against a real (scripted) SMTP server. */
describe('SMTP semantics', () => {
  const bed = useTestBed();

  // Each refuses the session (or the module's own sender, so every mail) for a while, then lets everything through.
  it.each<{ name: string; refusedForMs: number; stage: 'onConnect' | 'onHelo' | 'onMailFrom'; reply: ScriptedReply }>([
    {
      name: 'a 554 greeting for 8 s (a blocklisted IP)',
      refusedForMs: 8_000,
      stage: 'onConnect',
      reply: { code: 554, text: '5.7.1 Your IP is on a blocklist' },
    },
    {
      name: "the module's own sender refused at MAIL FROM for 3 s (550 5.7.1)",
      refusedForMs: 3_000,
      stage: 'onMailFrom',
      reply: { code: 550, text: '5.7.1 Sender address rejected: access denied' },
    },
    {
      name: 'EHLO and HELO refused for 3 s (554)',
      refusedForMs: 3_000,
      stage: 'onHelo',
      reply: { code: 554, text: '5.7.1 Access denied' },
    },
    {
      name: 'no greeting for 3 s (connections accepted, then silent past the 2 s greeting timeout)',
      refusedForMs: 3_000,
      stage: 'onConnect',
      reply: 'stall',
    },
  ])(
    '$name is an outage of the lane: nothing fails, all delivered once, the pause in health',
    async ({ refusedForMs, stage, reply }) => {
      const refusedUntil = Date.now() + refusedForMs;
      const { outbox, health, app } = await bed.start(
        { [stage]: () => (Date.now() < refusedUntil ? reply : undefined) },
        { dispatcher: { sendTimeoutMs: 5_000 } },
      );
      const rows = await outbox.enqueueMany(many(10));

      const during = await pausedLaneHealth(health, 'default');
      expect(during.status).toMatchObject({ status: 'down', failing: expect.arrayContaining(['lanes']) });
      expect(during.lane).toMatchObject({ paused: true, reason: 'outage' });

      await waitFor('every mail delivered', () => bed.smtp.received.length === 10, 30_000);
      const copies = bed.smtp.copiesByMessageId();
      expect(rows.map((row) => copies.get(row.messageId))).toEqual(Array(10).fill(1));
      await waitFor('every row settled', () => app.events.sent.length === 10);
      const settled = await Promise.all(rows.map((row) => outbox.get(row.id)));
      // An outage's attempt is not counted: each row took one, and until then it stayed pending.
      expect(settled.map((row) => [row.status, row.attempts])).toEqual(Array(10).fill(['sent', 1]));
      expect(app.events.failed.length).toBeGreaterThan(0);
      expect(app.events.failed.every((event) => event.cause === 'outage' && event.status === 'pending')).toBe(true);
      // The outage is the one the script gave: its reply, or none for the silent server.
      expect(app.events.failed[0].replyCode).toBe(typeof reply === 'object' && 'code' in reply ? reply.code : null);
    },
  );

  it('451 4.3.0 to DATA on the first session only: retried on a new connection, and sent', async () => {
    let sickSession: string | undefined;
    const { outbox, app } = await bed.start({
      onData: (message) => {
        sickSession ??= message.sessionId;
        return message.sessionId === sickSession ? { code: 451, text: '4.3.0 Temporary failure' } : undefined;
      },
    });
    const { id, messageId } = await outbox.enqueue(mail(1));
    await waitFor('the sent event', () => app.events.sent.length === 1);
    expect(bed.smtp.received.map((message) => message.messageId)).toEqual([messageId]);
    expect(bed.smtp.received[0].sessionId).not.toBe(sickSession);
    const attempts = (await outbox.get(id)).attemptLog;
    expect(attempts.map((attempt) => attempt.outcome)).toEqual(['transient', 'sent']);
    // When the 250 came: on the attempt that got it, and in the event.
    expect(attempts.map((attempt) => attempt.providerAcceptedAt)).toEqual([null, expect.any(Date)]);
    expect(attempts[1].providerAcceptedAt!.getTime()).toBeGreaterThanOrEqual(attempts[1].startedAt.getTime());
    expect(app.events.sent[0].providerAcceptedAt).toEqual(attempts[1].providerAcceptedAt);
  });

  it.each<{ name: string; reply?: { code: number; text: string } }>([
    { name: 'without a word' },
    { name: 'with 421 (its idle timeout)', reply: { code: 421, text: '4.4.2 Idle timeout, closing connection' } },
  ])(
    'a pooled connection the server closed $name: the next mail goes over a new one, sent at its first attempt',
    async ({ reply }) => {
      const { outbox, app } = await bed.start();
      const first = await outbox.enqueue(mail(1));
      await waitFor('the first mail', () => app.events.sent.length === 1);
      const second = await outbox.enqueue(mail(2));
      await waitFor('the second mail', () => app.events.sent.length === 2);
      // The connection is pooled: the second mail went over it.
      const pooled = bed.smtp.received[0].sessionId;
      expect(bed.smtp.received[1].sessionId).toBe(pooled);

      bed.smtp.closeSession(pooled, reply);
      // The client reads the close (and the 421) as it comes, well within this.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const third = await outbox.enqueue(mail(3));
      await waitFor('the third mail', () => app.events.sent.length === 3);
      expect(bed.smtp.received.map((message) => message.messageId)).toEqual(
        [first, second, third].map((row) => row.messageId),
      );
      expect(bed.smtp.received[2].sessionId).not.toBe(pooled);
      expect((await outbox.get(third.id)).attemptLog.map((attempt) => attempt.outcome)).toEqual(['sent']);
      expect(app.events.failed).toEqual([]);
    },
  );

  it('3 recipients, one greylisted at RCPT on its first try: each gets exactly one copy, all with the same Message-ID, the retry on a new session', async () => {
    let greylisted = false;
    const { outbox, app } = await bed.start({
      onRcptTo: (recipient) => {
        if (recipient !== 'bob@example.com' || greylisted) return undefined;
        greylisted = true;
        return { code: 451, text: '4.7.1 Greylisted, please try again later' };
      },
    });
    const { messageId } = await outbox.enqueue({
      to: ['ann@example.com', 'bob@example.com'],
      cc: 'carl@example.com',
      subject: 'Hi',
      text: 'Hello',
    });
    await waitFor('the sent event', () => app.events.sent.length === 1);
    expect(bed.smtp.copiesByRecipient(messageId)).toEqual(
      new Map([
        ['ann@example.com', 1],
        ['carl@example.com', 1],
        ['bob@example.com', 1],
      ]),
    );
    expect(new Set(bed.smtp.received.map((message) => message.messageId))).toEqual(new Set([messageId]));
    expect(app.events.sent[0].accepted).toEqual(['ann@example.com', 'carl@example.com', 'bob@example.com']);
    // A transient failure, even of one recipient, closes the connection: the retry does not go over that session.
    expect(bed.smtp.received.map((message) => message.recipients)).toEqual([
      ['ann@example.com', 'carl@example.com'],
      ['bob@example.com'],
    ]);
    expect(bed.smtp.received[1].sessionId).not.toBe(bed.smtp.received[0].sessionId);
  });

  it.each([
    { name: 'takes 100 per transaction (as many as reliable-mail sends)', serverLimit: 100 },
    { name: 'takes only 40 per transaction (452 4.5.3 past that)', serverLimit: 40 },
  ])('150 bcc recipients to a server that $name: every one gets it once', async ({ serverLimit }) => {
    const { outbox, app } = await bed.start({ maxRecipientsPerTransaction: serverLimit });
    const bcc = Array.from({ length: 150 }, (_, index) => `reader${index}@example.com`);
    const { messageId } = await outbox.enqueue({ to: 'list@example.com', bcc, subject: 'News', text: 'Hello' });
    await waitFor('the sent event', () => app.events.sent.length === 1);
    const copies = bed.smtp.copiesByRecipient(messageId);
    expect(copies.size).toBe(151);
    expect([...copies.values()].every((count) => count === 1)).toBe(true);
    expect(bed.smtp.received.every((message) => message.recipients.length <= serverLimit)).toBe(true);
    expect(app.events.failed).toHaveLength(0);
  });

  it('a mail whose own from is refused (553) fails after one attempt, and the 200 beside it in its lane drain without a pause', async () => {
    const { outbox, app, health } = await bed.start({
      onMailFrom: (sender) =>
        sender === 'sales@other.example.com'
          ? { code: 553, text: '5.7.1 Sender address rejected: not owned by user' }
          : undefined,
    });
    const pauses = () => testLogger.warnings.filter((entry) => (entry as { msg?: string }).msg === 'lane paused');
    const pausedBefore = pauses().length;
    const foreign = await outbox.enqueue({ ...mail(0), from: 'sales@other.example.com' });
    await outbox.enqueueMany(many(200));
    await waitFor('all settled', () => app.events.sent.length === 200 && app.events.failed.length === 1, 30_000);
    // Not once during the run: a pause that the next send to go through ends at once shows in the log alone.
    expect(pauses().length).toBe(pausedBefore);

    const row = await outbox.get(foreign.id);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, lastReplyCode: 553 });
    expect(app.events.failed[0]).toMatchObject({ id: foreign.id, cause: 'refused', permanent: true });
    const { mail: status } = await health.isHealthy('mail');
    expect((status.dispatcher as { lanes: Record<string, unknown> }).lanes.default).toEqual({
      paused: false,
      probing: false,
    });
  });

  it("a mail whose own from is refused with 553 5.1.3 fails, and its recipient is not suppressed: the sender's fault", async () => {
    const { outbox, app, admin } = await bed.start({
      onMailFrom: (sender) =>
        sender === 'sales@other.example.com' ? { code: 553, text: '5.1.3 Bad sender address syntax' } : undefined,
    });
    const refused = await outbox.enqueue({ ...mail(1), from: 'sales@other.example.com' });
    await waitFor('the refusal', () => app.events.failed.length === 1);
    expect(await outbox.get(refused.id)).toMatchObject({ status: 'failed', lastEnhancedStatus: '5.1.3' });
    // A reply to MAIL FROM is about the sender, never about a recipient: the address stays off the list.
    expect(await admin.listSuppressions()).toEqual([]);

    const later = await outbox.enqueue(mail(1));
    await waitFor('the later mail sent', () => app.events.sent.length === 1);
    expect(bed.smtp.received.map((message) => message.messageId)).toEqual([later.messageId]);
  });

  it('a listener that never resolves holds up no send and no other event: 300 mails sent, a second listener hears each event once', async () => {
    @Injectable()
    class StuckListener {
      @OnEvent(EMAIL_SENT_EVENT)
      onSent(): Promise<void> {
        return new Promise(() => undefined);
      }
    }
    @Injectable()
    class CountingListener {
      readonly heard: string[] = [];

      @OnEvent(EMAIL_SENT_EVENT)
      onSent(event: EmailSentEvent): void {
        this.heard.push(event.eventId);
      }
    }
    const server = await bed.startSmtp();
    const app = await bed.startApp(
      testMailOptions(server.url, {
        lanes: { default: { concurrency: 4 } },
        // Places for every event: what is tested is that none waits for the stuck one, nor is emitted twice.
        events: { listenerTimeoutMs: 60_000, concurrency: 300 },
        dispatcher: { eventLeaseMs: 2_000 },
      }),
      [StuckListener, CountingListener],
    );
    await app.get(MailOutboxService).enqueueMany(many(300));
    await waitFor('all 300 delivered', () => server.received.length === 300, 30_000);
    // Settled as well, the last rows a moment after the server took them: the listener holds up no settle either.
    const health = app.get(MailOutboxHealthIndicator);
    await waitFor('every row settled', async () => {
      const { mail: status } = await health.isHealthy('mail');
      return (status.backlog as { count: number }).count === 0;
    });

    // Every event is heard while the stuck listener still holds all 300 (its timeout is a minute away).
    const { heard } = app.get(CountingListener);
    await waitFor('300 sent events heard', () => heard.length >= 300, 30_000);
    // Past the events' lease and a redelivery round: an event whose listeners are still running is not emitted again.
    await new Promise((resolve) => setTimeout(resolve, 3_500));
    expect(heard).toHaveLength(300);
    expect(new Set(heard).size).toBe(300);
  });
});
