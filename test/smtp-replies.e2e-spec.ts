import { describe, expect, it } from '@jest/globals';
import { MailOutboxService, type ReliableMailOptions, type SmtpTransportOptions } from '@reliable-mail/nestjs';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import type { ScriptedReply, SmtpScript } from './support/smtp-test-server.js';

/** A reply for the first `count` times a stage is reached, and none (success) afterwards. */
function times(count: number, reply: ScriptedReply): () => ScriptedReply | undefined {
  let used = 0;
  return () => (used++ < count ? reply : undefined);
}
const once = (reply: ScriptedReply) => times(1, reply);
/**
 * A reply at a stage of the session (greeting, AUTH) for the first mail's connection: the one its lane opened ahead
 * at start, which the mail takes, and the one it then opens when that one failed. With `oneLane`.
 */
const atFirstSession = (reply: ScriptedReply) => times(2, reply);
const oneLane = (url: string) => testMailOptions(url, { lanes: { default: {} } });

describe('each SMTP reply ends in the right state with the right event', () => {
  const bed = useTestBed();

  async function start(script: SmtpScript, options: (url: string) => ReliableMailOptions = testMailOptions) {
    const server = await bed.startSmtp(script);
    const app = await bed.startApp(options(server.url));
    const outbox = app.get(MailOutboxService);
    const mail = await outbox.enqueue({
      to: 'ann@example.com',
      cc: 'bob@example.com',
      subject: 'Your order',
      text: 'Thanks',
    });
    return { outbox, mail, server, events: app.events };
  }

  it('421 on greeting: an outage of the lane, not counted against the row; sent once the server is back', async () => {
    const { outbox, mail, server, events } = await start(
      { onConnect: atFirstSession({ code: 421, text: '4.3.2 Service not available, closing channel' }) },
      oneLane,
    );
    await waitFor('EmailSentEvent', () => events.sent.length === 1, 10_000);
    expect(events.failed).toHaveLength(1);
    expect(events.failed[0]).toMatchObject({
      id: mail.id,
      attempt: 0,
      cause: 'outage',
      permanent: false,
      status: 'pending',
    });
    expect(events.sent[0]).toMatchObject({ id: mail.id, attempt: 1 });
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'sent', attempts: 1 });
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['outage', 'sent']);
    expect(server.received.map((message) => message.messageId)).toEqual([mail.messageId]);
  });

  it.each<[string, SmtpScript]>([
    ['451 after the final dot', { onData: once({ code: 451, text: '4.3.0 Temporary failure, try again later' }) }],
    ['452 on RCPT (both recipients)', { onRcptTo: times(2, { code: 452, text: '4.2.2 Insufficient system storage' }) }],
    ['552 5.2.2 (mailbox full) after the final dot', { onData: once({ code: 552, text: '5.2.2 Mailbox full' }) }],
  ])('%s: retried with the same Message-ID, then sent', async (_case, script) => {
    const { outbox, mail, server, events } = await start(script);
    await waitFor('EmailSentEvent', () => events.sent.length === 1);

    expect(events.failed).toHaveLength(1);
    expect(events.failed[0]).toMatchObject({
      id: mail.id,
      attempt: 1,
      permanent: false,
      deadLettered: false,
      cause: 'deferred',
    });
    expect(events.failed[0].nextAttemptAt).toBeInstanceOf(Date);
    expect(events.sent[0]).toMatchObject({ id: mail.id, attempt: 2 });
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'sent', attempts: 2 });
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['transient', 'sent']);
    expect(server.received.map((message) => message.messageId)).toEqual([mail.messageId]);
  });

  it('452 on one RCPT while the other recipient is accepted: the deferred recipient is retried on its own', async () => {
    const deferBob = once({ code: 452, text: '4.2.2 Mailbox over quota' });
    const { outbox, mail, server, events } = await start({
      onRcptTo: (recipient) => (recipient === 'bob@example.com' ? deferBob() : undefined),
    });
    await waitFor('EmailSentEvent', () => events.sent.length === 1);
    expect(events.failed).toHaveLength(1);
    expect(events.failed[0]).toMatchObject({
      cause: 'partial',
      status: 'pending',
      accepted: ['ann@example.com'],
      deferred: ['bob@example.com'],
    });
    expect(events.sent[0]).toMatchObject({ accepted: ['ann@example.com', 'bob@example.com'], rejected: [] });
    expect(server.received.map((message) => [message.messageId, message.recipients])).toEqual([
      [mail.messageId, ['ann@example.com']],
      [mail.messageId, ['bob@example.com']],
    ]);
    const row = await outbox.get(mail.id);
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['partial', 'sent']);
    expect(row.attemptLog[0].recipients).toEqual([
      expect.objectContaining({ address: 'ann@example.com', status: 'accepted' }),
      expect.objectContaining({ address: 'bob@example.com', status: 'deferred', replyCode: 452 }),
    ]);
  });

  it('550 5.1.1 on RCPT: failed at once with the reply, never retried', async () => {
    const { outbox, mail, server, events } = await start({
      onRcptTo: () => ({ code: 550, text: '5.1.1 No such user' }),
    });
    await waitFor('EmailFailedEvent', () => events.failed.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 300));

    expect(events.failed).toHaveLength(1);
    expect(events.repeated).toBe(0);
    expect(events.failed[0]).toMatchObject({
      permanent: true,
      replyCode: 550,
      enhancedStatus: '5.1.1',
      nextAttemptAt: null,
      deadLettered: false,
    });
    expect(events.failed[0].reason).toContain('No such user');
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, lastReplyCode: 550, lastEnhancedStatus: '5.1.1' });
    expect(row.lastError).toContain('5.1.1 No such user');
    expect(row.attemptLog).toHaveLength(1);
    expect(server.received).toHaveLength(0);
    expect(events.sent).toHaveLength(0);
  });

  it('535 on AUTH: an outage of the lane, the attempt does not count, sent once the credentials work', async () => {
    const { outbox, mail, events } = await start(
      { onAuth: atFirstSession({ code: 535, text: '5.7.8 Authentication credentials invalid' }) },
      (url) => {
        const options = oneLane(url);
        const transport = options.transport as SmtpTransportOptions;
        return { ...options, transport: { ...transport, auth: { user: 'shop', pass: 'secret' } } };
      },
    );
    await waitFor('EmailSentEvent', () => events.sent.length === 1);
    expect(events.failed[0]).toMatchObject({
      cause: 'outage',
      permanent: false,
      replyCode: 535,
      deadLettered: false,
    });
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'sent', attempts: 1 });
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['outage', 'sent']);
  });

  it('connection dropped after the final dot: outcome unknown, retried, both copies carry one Message-ID', async () => {
    const { outbox, mail, server, events } = await start({ onData: once('drop') });
    await waitFor('EmailSentEvent', () => events.sent.length === 1);
    expect(events.failed[0]).toMatchObject({ outcomeUnknown: true, permanent: false });
    expect(server.received.map((message) => message.messageId)).toEqual([mail.messageId, mail.messageId]);
    const row = await outbox.get(mail.id);
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['unknown', 'sent']);
  });

  it('connection refused: an outage, no attempt counted, dead only once the row is too old', async () => {
    // Nothing listens on port 1: the connection is refused before anything is sent.
    const app = await bed.startApp(testMailOptions('smtp://127.0.0.1:1', { retry: { maxAgeMs: 1_500 } }));
    const outbox = app.get(MailOutboxService);
    const mail = await outbox.enqueue({ to: 'ann@example.com', subject: 'Your order', text: 'Thanks' });
    const events = app.events;
    await waitFor('dead letter', () => events.failed.some((event) => event.deadLettered), 10_000);

    expect(events.failed.every((event) => event.cause === 'outage' || event.deadLettered)).toBe(true);
    expect(events.failed.at(-1)).toMatchObject({ status: 'dead', cause: 'age', attempt: 0, outcomeUnknown: false });
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'dead', attempts: 0 });
    expect(row.lastError).toMatch(/ECONNREFUSED.*dead-lettered: too old/);
    expect(new Set(row.attemptLog.map((attempt) => attempt.outcome))).toEqual(new Set(['outage']));
  });

  // Until the whole message was written the server cannot have taken it: only then is the outcome unknown.
  it.each<{ name: string; script: SmtpScript; outcome: string; cause: string }>([
    {
      name: 'no greeting (greeting timeout)',
      script: { onConnect: atFirstSession('stall') },
      outcome: 'outage',
      cause: 'outage',
    },
    {
      name: 'closed before the greeting',
      script: { onConnect: atFirstSession('drop') },
      outcome: 'outage',
      cause: 'outage',
    },
    {
      name: 'no reply to RCPT (socket timeout)',
      script: { onRcptTo: once('stall') },
      outcome: 'transient',
      cause: 'deferred',
    },
    { name: 'closed at RCPT', script: { onRcptTo: once('drop') }, outcome: 'transient', cause: 'deferred' },
    { name: 'no reply to the final dot', script: { onData: once('stall') }, outcome: 'unknown', cause: 'unknown' },
  ])('$name: $outcome', async ({ script, outcome, cause }) => {
    const { outbox, mail, events } = await start(script, oneLane);
    await waitFor('EmailSentEvent', () => events.sent.length === 1, 15_000);
    expect(events.failed[0]).toMatchObject({ cause, outcomeUnknown: cause === 'unknown' });
    const row = await outbox.get(mail.id);
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual([outcome, 'sent']);
  });
});
